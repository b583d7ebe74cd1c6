"""POST /api/pull: a Hugging Face GGUF repo, named as Ollama accepts them (`hf.co/org/repo:Q4_K_M`),
downloaded by Tailor's own downloader into the Hugging Face cache, sha256 checked, with Ollama's status
lines; names of Ollama's registry (`llama3.2`, `qwen3:8b`) are a 400 saying what to pull instead.

The tag is a quantization level of the repo's GGUF files; without one (or `latest`) the file is the one
the plan picks for this machine, as `tailor pull` without --quant picks it. A vision repo's projector
comes with its model. A client that leaves pauses the download (its parts are kept), and pulling the
same name again resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.server.errors import ApiError, bad_param
from app.server.ollama.errors import ollama_error
from app.server.ollama.names import requested_name
from app.server.ollama.ndjson import NdjsonStream, ndjson_line
from app.server.request_json import load_request_json
from app.server.streaming import ClientGone, unless_disconnected
from app.services.planning.machine import detect_machine
from app.services.planning.pull_plan import assess_repo, build_request, with_extras
from models.download.downloader import Downloader
from models.download.request import DownloadError, DownloadRequest, Progress, StateChanged
from models.hub.client import HubClient, HubError, RepoDetails
from models.hub.repo_files import group_files
from models.plan.machine import Machine

_HF_NAME = re.compile(r"(?:https?://)?(?:hf\.co|huggingface\.co)/(?P<repo>[\w.-]+/[\w.-]+?)(?::(?P<tag>[\w.-]+))?/?",
                      re.IGNORECASE)
_HUB_STATUS = {"not_found": 404, "revision_not_found": 404, "gated": 403, "refused": 400, "offline": 502,
               "network": 502}


def hub_name(name: str) -> tuple[str, str | None]:
    """The repo and quantization level a pull names (`hf.co/org/repo:Q4_K_M`), or a 400 for any other name."""
    match = _HF_NAME.fullmatch(name.strip())
    if match is None and re.match(r"(?:https?://)?(?:hf\.co|huggingface\.co)/", name.strip(), re.IGNORECASE):
        raise ApiError(400, f"'{name}' is not a Hugging Face repo: name one as \"hf.co/<org>/<repo>\", with a "
                            "quantization level after a colon (\":Q4_K_M\") or none (the plan picks; `tailor pull "
                            "<org>/<repo>` does the same on the command line).", param="model")
    if match is None:
        raise ApiError(400, f"'{name}' is a name of Ollama's registry, which Tailor does not download from. Pull a GGUF "
                            "repo from Hugging Face instead: \"hf.co/<org>/<repo>:Q4_K_M\" here, or `tailor pull "
                            "<org>/<repo>` on the command line (`tailor search` finds repos).", param="model")
    tag = match["tag"]
    return match["repo"], None if tag is None or tag.lower() == "latest" else tag


class Pull:
    """The handler of POST /api/pull."""

    async def pull(self, request: Request) -> Response:
        try:
            body = load_request_json(await request.body())
            if not isinstance(body, dict):
                raise ApiError(400, "The request body must be a JSON object.")
            repo, quant = hub_name(requested_name(body))
            stream = body.get("stream")
            if stream is not None and not isinstance(stream, bool):
                raise bad_param("stream", "'stream' must be a boolean.")
            download, headers = await asyncio.to_thread(_plan, repo, quant)
        except ApiError as error:
            return ollama_error(error)
        job = _Job(download, headers)
        if stream is not False:
            return NdjsonStream(job.lines(), on_close=job.close)
        try:
            outcome = await unless_disconnected(job.outcome(), request.receive)
        except ClientGone:
            return Response(status_code=499)
        finally:
            job.close()
        return ollama_error(outcome) if isinstance(outcome, ApiError) else JSONResponse({"status": "success"})


def _plan(repo: str, quant: str | None) -> tuple[DownloadRequest, dict[str, str]]:
    """What to download for `repo` at `quant` (None: the plan's pick for this machine); blocking."""
    client = HubClient()
    try:
        details = client.repo_details(repo)
        paths = _files(client, details, quant)
    except HubError as exc:
        raise ApiError(_HUB_STATUS.get(exc.kind, 502), exc.message, param="model") from None
    return build_request(client, details, paths, "main"), client.auth_headers()


def _files(client: HubClient, details: RepoDetails, quant: str | None) -> tuple[str, ...]:
    ggufs = [g for g in group_files(details.files) if g.complete and g.format == "gguf"]
    if not ggufs:
        raise ApiError(400, f"{details.id} has no GGUF files: Ollama's API pulls GGUF models (`tailor pull "
                            f"{details.id}` downloads checkpoints).", param="model")
    if quant is not None:
        group = next((g for g in ggufs if (g.quant or "").upper() == quant.upper()), None)
        if group is None:
            levels = ", ".join(g.quant for g in ggufs if g.quant) or "none"
            raise ApiError(404, f"{details.id} has no {quant.upper()} file (levels: {levels}).", param="model")
        return with_extras(details, group)
    assessment = assess_repo(client, details, Machine.from_profile(detect_machine()), torch_ok=False)
    chosen = assessment.recommended
    if chosen is None or chosen.group.format != "gguf":
        raise ApiError(400, f"No GGUF file of {details.id} fits this machine: {assessment.note or 'see tailor plan'}.",
                       param="model")
    return with_extras(details, chosen.group, chosen.projector)


class _Job:
    """One download, its events brought onto the event loop."""

    def __init__(self, download: DownloadRequest, headers: dict[str, str]):
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._sha = {f.path_in_repo: f.sha256 or f.etag for f in download.files}
        self._downloader = Downloader(on_event=self._on_event)
        self._item = self._downloader.start(download, headers)
        self._closed = False

    def _on_event(self, event: object) -> None:  # on a download thread
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    async def _updates(self) -> AsyncIterator[dict[str, Any] | ApiError]:
        """Ollama's status lines as the download goes, ending with success or an error."""
        yield {"status": "pulling manifest"}
        while True:
            event = await self._events.get()
            if isinstance(event, Progress) and event.path_in_repo and event.download_id == self._item.id:
                digest = self._sha.get(event.path_in_repo) or ""
                yield {"status": f"pulling {digest[:12] or event.path_in_repo}", "digest": f"sha256:{digest}",
                       "total": event.file_total, "completed": event.file_done}
            elif isinstance(event, StateChanged) and event.download_id == self._item.id:
                if event.state == "done":
                    for status in ("verifying sha256 digest", "writing manifest", "success"):
                        yield {"status": status}
                    return
                if event.state in ("failed", "cancelled"):
                    error = event.error or DownloadError("cancelled", "The download was cancelled.")
                    yield ApiError(502, f"{error.message}", param="model")
                    return

    async def lines(self) -> AsyncIterator[bytes]:
        async for update in self._updates():
            yield ndjson_line({"error": update.message} if isinstance(update, ApiError) else update)

    async def outcome(self) -> ApiError | None:
        async for update in self._updates():
            if isinstance(update, ApiError):
                return update
        return None

    def close(self) -> None:
        """The reply is over: an unfinished download is paused (its parts kept) and its threads let go."""
        if not self._closed:
            self._closed = True
            threading.Thread(target=self._downloader.close, name="tailor-pull-close", daemon=True).start()
