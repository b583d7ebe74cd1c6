"""Download throughput: our Downloader vs `hf_hub_download` of the same file from the fake hub
(the issue's baseline, target >= 0.95) and vs a bare urllib GET (no hashing, no cache: a floor
for what loopback allows), and the extra bytes fetched after a connection drop at 50% (target
< 10% of the file).

    python -m tests.bench.download [SIZE_MB]

The file is served by the fault server in a child process (so the server does not share our GIL),
runs alternate between the two clients, and the median of 3 of each is compared. Our side writes
into a fresh HF cache layout and checks the sha256; the bare GET only writes the bytes. Against
the hub, both sides are timed alike, from their first request: `hf_hub_download` asks for the
file's metadata (a HEAD) before it downloads, and ours reads the repo's file list (sizes, sha256)
as `tailor pull` does; neither is left out of its timing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from models.download.downloader import Downloader
from models.download.request import DownloadFile, DownloadRequest
from tests.fixtures.fault_server import serve_faulty

RUNS = 3
ROOT = Path(__file__).resolve().parents[2]


def _bare_get(url: str, out: Path) -> None:
    with urllib.request.urlopen(url) as resp, out.open("wb") as f:
        while chunk := resp.read(1 << 20):
            f.write(chunk)


def _ours(file: DownloadFile, cache: Path) -> None:
    Downloader(cache).download(DownloadRequest("bench/file", "b" * 40, (file,)))


# A fake hub in a child process serving one file, so the server does not share our GIL.
_HUB = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from tests.fixtures.fake_hub import FakeHub\n"
    "hub = FakeHub().start()\n"
    "hub.add_repo('bench/model', {'model.gguf': Path(sys.argv[1])})\n"
    "print(hub.endpoint, flush=True)\n"
    "time.sleep(3600)\n"
)


def _hub_runs(source: Path, tmp_path: Path, size: int) -> tuple[list[float], list[float]]:
    """Alternating runs of hf_hub_download and of our Downloader through the hub's CDN redirect."""
    from huggingface_hub import hf_hub_download

    from app.services.planning.pull_plan import build_request
    from models.hub.client import HubClient

    child = subprocess.Popen([sys.executable, "-c", _HUB, str(source)], stdout=subprocess.PIPE, text=True,
                             cwd=ROOT, env={**os.environ, "HF_HUB_DISABLE_XET": "1"})
    hf, ours = [], []
    try:
        endpoint = child.stdout.readline().strip()
        client = HubClient(endpoint=endpoint, token=False)
        for i in range(RUNS):
            for name in (("hf", "ours") if i % 2 == 0 else ("ours", "hf")):
                target = tmp_path / f"hub-run-{name}"
                started = time.perf_counter()
                if name == "hf":
                    hf_hub_download("bench/model", "model.gguf", cache_dir=target, endpoint=endpoint, token=False)
                else:  # the metadata request is timed too, as hf_hub_download's HEAD is
                    details = client.repo_details("bench/model")
                    request = build_request(client, details, ("model.gguf",), details.sha)
                    Downloader(target).download(request)
                (hf if name == "hf" else ours).append(size / (time.perf_counter() - started))
                shutil.rmtree(target)
    finally:
        child.terminate()
        child.wait(10)
    return hf, ours


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    size = int(argv[0]) << 20 if argv else 200 << 20
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        source = tmp_path / "model.gguf"
        digest = hashlib.sha256()
        with source.open("wb") as f:
            for _ in range(size >> 20):
                block = os.urandom(1 << 20)
                digest.update(block)
                f.write(block)
        sha = digest.hexdigest()

        child = subprocess.Popen([sys.executable, "-m", "tests.fixtures.fault_server", str(source)],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            url = child.stdout.readline().strip()
            file = DownloadFile("model.gguf", url, size, sha, sha)
            bare, ours = [], []
            for i in range(RUNS):
                for name in (("bare", "ours") if i % 2 == 0 else ("ours", "bare")):
                    target = tmp_path / f"run-{name}"
                    started = time.perf_counter()
                    if name == "bare":
                        target.mkdir()
                        _bare_get(url, target / "model.gguf")
                    else:
                        _ours(file, target)
                    seconds = time.perf_counter() - started
                    (bare if name == "bare" else ours).append(size / seconds)
                    shutil.rmtree(target)
        finally:
            child.terminate()
            child.wait(10)
        hf, ours_hub = _hub_runs(source, tmp_path, size)
        print(f"download_hf_hub_download_mb_s={statistics.median(hf) / 1e6:.0f}")
        print(f"download_ours_via_hub_mb_s={statistics.median(ours_hub) / 1e6:.0f}")
        print(f"download_throughput_ratio={statistics.median(ours_hub) / statistics.median(hf):.3f} "
              "(vs hf_hub_download; target >= 0.95)")
        ratio = statistics.median(ours) / statistics.median(bare)
        print(f"download_bare_get_mb_s={statistics.median(bare) / 1e6:.0f}")
        print(f"download_ours_mb_s={statistics.median(ours) / 1e6:.0f}")
        print(f"download_vs_bare_get_ratio={ratio:.3f} (a floor: the bare GET neither hashes nor writes a cache)")

        with serve_faulty({"/model.gguf": source}) as server:
            server.faults.drop_after = size // 2
            file = DownloadFile("model.gguf", server.url("/model.gguf"), size, sha, sha)
            item = Downloader(tmp_path / "drop", backoff_s=0.05).start(DownloadRequest("bench/file", "b" * 40, (file,)))
            item.result()
            # What the client received over both answers (the server's count may lag its last chunk).
            extra = (item.outcomes["model.gguf"].fetched_bytes - size) / size * 100
        print(f"download_extra_bytes_after_drop={extra:.2f}% (target < 10%)")


if __name__ == "__main__":
    main()
