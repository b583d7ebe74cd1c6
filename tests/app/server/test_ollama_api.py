"""Ollama's API through `tailor serve`, driven by the official `ollama` client as apps drive it: the starter
model's weights under Qwen3's real template (tools, thinking) with a tiny vision projector, in an engine of
its own, served on the main port and on an Ollama port; and under QwQ's (its prompt opens the think block)
for `think`."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import jsonschema
import ollama
import pytest
from PIL import Image

from app.cli.main import main
from app.server.config import ServerConfig
from app.server.engine_port import EnginePort
from app.server.keep_alive import NEVER
from app.server.model_router import Lease, SingleModel
from app.server.own_engine import OwnEngine
from app.server.runner import ServerStartError, ServerThread
from app.services.load_settings import LoadSettings
from tests.app.server.conftest import format_server
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub
from tests.fixtures.format_models import TIME_TOOL, WEATHER_TOOL
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector

MODEL = "starter-qwen3"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
STORY = [{"role": "user", "content": "Write a very long story about a dragon who learns to bake bread."}]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [WEATHER_TOOL, TIME_TOOL]
BOOK = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                         "year": {"type": "integer", "minimum": 1400, "maximum": 2030}},
        "required": ["title", "year"]}
GREEDY = {"temperature": 0}
REPO = "org/Tiny-GGUF"
fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants


class RecordingRouter(SingleModel):
    """The one-model router, remembering the keep_alive each request asked for."""

    def __init__(self, port: EnginePort):
        super().__init__(port)
        self.keep_alives: list[float | None] = []

    async def acquire(self, name: str | None, keep_alive: float | None = None) -> Lease:
        self.keep_alives.append(keep_alive)
        return await super().acquire(name, keep_alive)


@dataclass
class Served:
    thread: ServerThread
    router: RecordingRouter
    port: EnginePort
    model_path: Path


@pytest.fixture(scope="module")
def served(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("ollama")
    projector = write_tiny_projector(folder / "mmproj-gemma3.gguf", TinyProjectorSpec(projector_type="gemma3"))
    model = format_models("qwen3")
    engine = OwnEngine(log_path=folder / "engine.log")
    engine.load(model, LoadSettings(n_ctx=2048, mmproj=str(projector)))
    port = EnginePort(engine.client, engine.model_info)
    router = RecordingRouter(port)
    thread = ServerThread(None, None, ServerConfig(port=0, ollama_port=0), router=router).start()
    try:
        yield Served(thread, router, port, model)
    finally:
        thread.stop()
        engine.shutdown()


@pytest.fixture
def client(served: Served) -> ollama.Client:
    return ollama.Client(host=served.thread.ollama_url, timeout=120)


@pytest.fixture(scope="module")
def thinker(format_models: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ollama.Client]:
    with format_server(format_models("qwq"), tmp_path_factory.mktemp("logs")) as thread:
        yield ollama.Client(host=thread.ollama_url, timeout=120)


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (80, 60), colour).save(buffer, "PNG")
    return buffer.getvalue()


def error_of(call: Callable[[], object]) -> ollama.ResponseError:
    with pytest.raises(ollama.ResponseError) as caught:
        result = call()
        if not isinstance(result, ollama.ChatResponse | ollama.GenerateResponse | ollama.ProgressResponse):
            list(result)  # type: ignore[call-overload]  # a stream: the error comes with its first line
    return caught.value


# -- what the server has ------------------------------------------------------------------------------


def test_the_root_and_the_version_say_what_clients_look_for(served: Served):
    assert httpx.get(served.thread.ollama_url + "/", timeout=30).text == "Ollama is running"
    version = httpx.get(served.thread.ollama_url + "/api/version", timeout=30).json()["version"]
    assert tuple(int(p) for p in version.split(".")) >= (0, 9, 0)  # clients check it before thinking, tools


def test_list_names_the_model_with_its_details(client: ollama.Client, served: Served):
    (model,) = client.list().models
    assert model.model == MODEL and model.size == served.model_path.stat().st_size
    assert model.modified_at == datetime.fromtimestamp(served.model_path.stat().st_mtime, UTC)
    assert len(model.digest) == 64 and model.digest == client.list().models[0].digest  # a stable id
    details = model.details
    assert (details.format, details.family, details.parameter_size, details.quantization_level) == \
        ("gguf", "llama", "134.52M", "Q4_1")
    assert details.families == ["llama", "clip"]  # it sees through a projector
    raw = httpx.get(served.thread.ollama_url + "/api/tags", timeout=30).json()["models"][0]
    assert raw["name"] == MODEL and raw["capabilities"] == ["completion", "tools", "thinking", "vision"]


def test_show_gives_the_header_the_template_and_the_capabilities(client: ollama.Client, served: Served):
    shown = client.show(MODEL)
    assert shown.capabilities == ["completion", "tools", "thinking", "vision"]
    assert "<tool_call>" in shown.template and "enable_thinking" in shown.template  # Qwen3's own Jinja
    info = shown.modelinfo
    assert info["general.architecture"] == "llama" and info["llama.context_length"] == 8192
    assert 134e6 < info["general.parameter_count"] < 135e6  # counted from the tensors (the header has none)
    assert info["tokenizer.ggml.tokens"] == []  # long arrays are left empty, as Ollama leaves them
    assert "tokenizer.chat_template" not in info and "general.name" not in info
    assert "num_ctx                        2048" in shown.parameters
    assert shown.details.quantization_level == "Q4_1"
    verbose = httpx.post(served.thread.ollama_url + "/api/show", json={"model": MODEL, "verbose": True}, timeout=30).json()
    assert any(t["name"] == "token_embd.weight" for t in verbose["tensors"])
    assert verbose["projector_info"]["clip.projector_type"] == "gemma3"


def test_show_of_an_unknown_model_is_ollama_s_404(client: ollama.Client, served: Served):
    error = error_of(lambda: client.show("llama3.2"))
    assert error.status_code == 404 and error.error.startswith("model 'llama3.2' not found") and MODEL in error.error
    raw = httpx.post(served.thread.ollama_url + "/api/show", json={"model": "nope"}, timeout=30)
    assert raw.status_code == 404 and set(raw.json()) == {"error"}


def test_ps_shows_the_loaded_model_with_its_context(client: ollama.Client):
    (loaded,) = client.ps().models
    assert loaded.model == loaded.name == MODEL and loaded.context_length == 2048
    assert loaded.size > 0 and loaded.digest == client.list().models[0].digest
    assert loaded.expires_at.year > 2200  # kept loaded for good (Ollama's date for a negative keep_alive)
    assert loaded.details.family == "llama"


def test_a_name_with_ollama_s_latest_tag_or_another_case_is_the_same_model(client: ollama.Client):
    for name in (f"{MODEL}:latest", MODEL.upper()):
        assert client.show(name).details.family == "llama"
        assert client.chat(model=name, messages=FRANCE, options={**GREEDY, "num_predict": 2}).model == name


# -- replies ----------------------------------------------------------------------------------------


def test_chat_whole_answers_with_ollama_s_figures(client: ollama.Client):
    reply = client.chat(model=MODEL, messages=FRANCE, think=False, options={**GREEDY, "num_predict": 30})
    assert reply.done and reply.done_reason in ("stop", "length") and reply.message.role == "assistant"
    assert "Paris" in reply.message.content and not reply.message.thinking
    assert reply.prompt_eval_count > 10 and 0 < reply.eval_count <= 30
    assert reply.total_duration > reply.prompt_eval_duration > 0 and reply.eval_duration > 0
    assert reply.load_duration >= 0
    assert datetime.fromisoformat(reply.created_at).tzinfo is not None


def test_chat_streams_ndjson_lines_that_add_up_to_the_whole_reply(client: ollama.Client, served: Served):
    whole = client.chat(model=MODEL, messages=FRANCE, think=False, options={**GREEDY, "num_predict": 20})
    parts = list(client.chat(model=MODEL, messages=FRANCE, think=False, options={**GREEDY, "num_predict": 20},
                             stream=True))
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content for p in parts) == whole.message.content
    last = parts[-1]
    assert last.message.content == "" and last.done_reason == whole.done_reason and last.eval_count == whole.eval_count
    with httpx.stream("POST", served.thread.ollama_url + "/api/chat", timeout=60,
                      json={"model": MODEL, "messages": FRANCE, "options": {"num_predict": 3}}) as raw:
        assert raw.headers["content-type"] == "application/x-ndjson"  # Ollama streams by default
        lines = [json.loads(line) for line in raw.iter_lines()]
    assert lines[-1]["done"] is True and all(line["model"] == MODEL for line in lines)


def test_generate_renders_the_template_or_sends_the_prompt_raw(client: ollama.Client):
    reply = client.generate(model=MODEL, prompt="What is the capital of France?", system="Answer in one word.",
                            think=False, options={**GREEDY, "num_predict": 10})
    assert reply.done and reply.response and reply.eval_count <= 10 and reply.context is None
    streamed = list(client.generate(model=MODEL, prompt="What is the capital of France?", system="Answer in one word.",
                                    think=False, options={**GREEDY, "num_predict": 10}, stream=True))
    assert "".join(p.response for p in streamed) == reply.response and streamed[-1].done
    raw = client.generate(model=MODEL, prompt="The capital of France is", raw=True, options={**GREEDY, "num_predict": 5})
    assert raw.prompt_eval_count < 10  # the prompt alone, without the template around it
    for field, value in (("template", "{{ .Prompt }}"), ("suffix", "end"), ("context", [1, 2])):
        error = error_of(lambda f=field, v=value: client._request_raw(
            "POST", "/api/generate", json={"model": MODEL, "prompt": "x", f: v}))
        assert error.status_code == 400 and f"'{field}'" in error.error


def test_an_empty_generate_loads_the_model_and_keep_alive_0_unloads_it(client: ollama.Client, served: Served):
    served.router.keep_alives.clear()
    loaded = client.generate(model=MODEL, prompt="")
    assert loaded.done and loaded.done_reason == "load" and loaded.response == ""
    unloaded = client.generate(model=MODEL, prompt="", keep_alive=0)
    assert unloaded.done and unloaded.done_reason == "unload"
    chat = client.chat(model=MODEL, messages=[], keep_alive="10m")
    assert chat.done_reason == "load" and chat.message.content == ""
    assert served.router.keep_alives == [None, 0.0, 600.0]
    assert error_of(lambda: client.generate(model="nope", prompt="", keep_alive=0)).status_code == 404


# -- options and keep_alive --------------------------------------------------------------------------


def test_num_predict_caps_eval_count(client: ollama.Client):
    reply = client.chat(model=MODEL, messages=STORY, think=False, options={**GREEDY, "num_predict": 7})
    assert reply.eval_count == 7 and reply.done_reason == "length"


def test_stop_stops_before_the_stop_string(client: ollama.Client):
    free = client.chat(model=MODEL, messages=STORY, think=False, options={**GREEDY, "num_predict": 40})
    word = free.message.content.split()[3]
    reply = client.chat(model=MODEL, messages=STORY, think=False, options={**GREEDY, "num_predict": 40, "stop": [word]})
    assert reply.done_reason == "stop" and word not in reply.message.content
    assert free.message.content.startswith(reply.message.content)


def test_a_seed_and_a_temperature_repeat_a_reply(client: ollama.Client):
    def sample(seed: int) -> str:
        options = {"temperature": 1.2, "top_k": 100, "top_p": 1.0, "seed": seed, "num_predict": 12}
        return client.chat(model=MODEL, messages=STORY, think=False, options=options).message.content

    first = sample(7)
    assert sample(7) == first
    assert any(sample(seed) != first for seed in (8, 9, 10))


def test_num_ctx_beyond_the_loaded_context_is_refused_naming_it(client: ollama.Client):
    error = error_of(lambda: client.chat(model=MODEL, messages=FRANCE, options={"num_ctx": 8192}))
    assert error.status_code == 400 and "2048" in error.error and "8192" in error.error
    assert client.chat(model=MODEL, messages=FRANCE, options={"num_ctx": 2048, "num_predict": 1}).done


@pytest.mark.parametrize(("options", "name"), [
    ({"temperature": "hot"}, "options.temperature"), ({"num_predict": 1.5}, "options.num_predict"),
    ({"stop": [1]}, "options.stop"), ({"seed": True}, "options.seed"), ({"use_mmap": "yes"}, "options.use_mmap"),
    ({"repeat_penalty": [1.1]}, "options.repeat_penalty"), ({"top_p": 0}, "options.top_p"),
])
def test_an_option_of_the_wrong_type_is_a_400_naming_it(client: ollama.Client, options: dict, name: str):
    error = error_of(lambda: client.chat(model=MODEL, messages=FRANCE, options=options))
    assert error.status_code == 400 and f"'{name}'" in error.error


def test_unknown_options_are_ignored_and_options_without_effect_are_named(served: Served):
    body = {"model": MODEL, "messages": FRANCE, "stream": False,
            "options": {"num_predict": 2, "mirostat": 2, "no_such_option": "x", "repeat_penalty": 1.1, "num_gpu": 99}}
    reply = httpx.post(served.thread.ollama_url + "/api/chat", json=body, timeout=60)
    assert reply.status_code == 200 and reply.json()["done"]
    assert reply.headers["x-tailor-options-without-effect"] == "num_gpu, repeat_penalty"


@pytest.mark.parametrize(("keep_alive", "seconds"), [
    ("5m", 300.0), ("1h30m", 5400.0), (300, 300.0), ("300", 300.0), (0, 0.0), (-1, NEVER), ("-1m", NEVER),
])
def test_every_form_of_keep_alive_reaches_the_router(client: ollama.Client, served: Served, keep_alive, seconds):
    served.router.keep_alives.clear()
    assert client.chat(model=MODEL, messages=FRANCE, keep_alive=keep_alive, options={"num_predict": 1}).done
    assert served.router.keep_alives == [seconds]


def test_a_keep_alive_that_is_no_duration_is_a_400(client: ollama.Client, served: Served):
    served.router.keep_alives.clear()
    for garbage in ("soon", "5 minutes", "1d"):
        error = error_of(lambda g=garbage: client.chat(model=MODEL, messages=FRANCE, keep_alive=g))
        assert error.status_code == 400 and "'keep_alive'" in error.error
    assert served.router.keep_alives == []  # refused before any model was asked for


# -- tools, thinking, JSON, images -------------------------------------------------------------------


def test_a_tool_call_round_trip_with_arguments_as_objects(client: ollama.Client):
    # Ollama has no tool_choice; Tailor takes OpenAI's in `options` (or at the top of the body) to force one.
    reply = client.chat(model=MODEL, messages=ASK_WEATHER, tools=TOOLS, think=False,
                        options={**GREEDY, "tool_choice": "required"})
    calls = reply.message.tool_calls
    assert calls and reply.done_reason == "stop" and reply.message.content == ""
    for call in calls:
        tool = {"get_weather": WEATHER_TOOL, "get_time": TIME_TOOL}[call.function.name]
        jsonschema.validate(dict(call.function.arguments), tool["function"]["parameters"])  # an object, not text
    answers = [{"role": "tool", "content": "18 degrees and sunny", "tool_name": c.function.name} for c in calls]
    follow = client.chat(model=MODEL, messages=[*ASK_WEATHER, reply.message, *answers], tools=TOOLS, think=False,
                         options={**GREEDY, "num_predict": 20})
    assert follow.message.content and not follow.message.tool_calls


def test_a_streamed_call_comes_whole_in_the_line_before_the_last(client: ollama.Client):
    parts = list(client.chat(model=MODEL, messages=ASK_WEATHER, tools=TOOLS, think=False, stream=True,
                             options={**GREEDY, "tool_choice": "get_time"}))
    assert parts[-1].done and not parts[-1].message.tool_calls
    calls = parts[-2].message.tool_calls
    assert calls and all(c.function.name == "get_time" and isinstance(c.function.arguments["zone"], str) for c in calls)
    assert not any(p.message.tool_calls for p in parts[:-2])


def test_tools_are_checked_as_the_openai_api_checks_them(client: ollama.Client, served: Served):
    bad = [{"type": "function", "function": {"name": "no spaces allowed", "parameters": {"type": "object"}}}]
    body = {"model": MODEL, "messages": ASK_WEATHER, "tools": bad, "stream": False}
    reply = httpx.post(served.thread.ollama_url + "/api/chat", json=body, timeout=30)
    assert reply.status_code == 400 and "name" in reply.json()["error"]
    body = {"model": MODEL, "messages": ASK_WEATHER, "tools": TOOLS, "format": "json", "stream": False}
    assert httpx.post(served.thread.ollama_url + "/api/chat", json=body, timeout=30).status_code == 400


def test_think_on_sends_the_thinking_apart(thinker: ollama.Client):
    model = thinker.list().models[0].model
    reply = thinker.chat(model=model, messages=STORY, think=True, options={**GREEDY, "num_predict": 16})
    assert reply.message.thinking and "<think>" not in reply.message.thinking
    parts = list(thinker.chat(model=model, messages=STORY, think=True, stream=True,
                              options={**GREEDY, "num_predict": 16}))
    assert "".join(p.message.thinking or "" for p in parts) == reply.message.thinking
    assert parts[0].message.thinking and not parts[0].message.content
    generated = thinker.generate(model=model, prompt="Write a story.", think=True, options={**GREEDY, "num_predict": 8})
    assert generated.thinking


def test_format_holds_the_answer_to_a_json_schema(client: ollama.Client):
    reply = client.chat(model=MODEL, messages=[{"role": "user", "content": "Name a book."}], format=BOOK, think=False,
                        options=GREEDY)
    jsonschema.validate(json.loads(reply.message.content), BOOK)
    generated = client.generate(model=MODEL, prompt="Describe a cat.", format="json", think=False,
                                options={**GREEDY, "num_predict": 60})
    assert generated.done_reason == "length" or isinstance(json.loads(generated.response), dict)
    error = error_of(lambda: client.chat(model=MODEL, messages=FRANCE, format={"type": "string", "format": "uri"}))
    assert error.status_code == 400 and "format" in error.error


def test_images_go_through_the_projector(client: ollama.Client):
    plain = client.chat(model=MODEL, messages=[{"role": "user", "content": "What is this?"}],
                        options={**GREEDY, "num_predict": 2})
    seen = client.chat(model=MODEL, messages=[{"role": "user", "content": "What is this?", "images": [png((200, 30, 30))]}],
                       options={**GREEDY, "num_predict": 2})
    assert seen.prompt_eval_count > plain.prompt_eval_count  # the image's tokens came in before the text
    error = error_of(lambda: client.chat(model=MODEL, messages=[{"role": "user", "content": "x", "images": [b"not an image"]}]))
    assert error.status_code == 400 and "messages[0].images[0]" in error.error


# -- downloads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama3.2", "qwen3:8b", "library/mistral:latest", "registry.ollama.ai/library/phi3"])
def test_a_name_of_ollama_s_registry_is_refused_saying_what_to_pull(client: ollama.Client, name: str):
    error = error_of(lambda: client.pull(name))
    assert error.status_code == 400 and f"'{name}'" in error.error and "tailor pull" in error.error


def test_a_hugging_face_name_is_pulled_with_ollama_s_status_lines(client: ollama.Client, fake_hub: FakeHub,
                                                                   tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    wanted = tiny_quants["Q8_0"]
    sha = hashlib.sha256(wanted.read_bytes()).hexdigest()
    statuses = list(client.pull(f"hf.co/{REPO}:q8_0", stream=True))
    assert statuses[0].status == "pulling manifest"
    assert [s.status for s in statuses[-3:]] == ["verifying sha256 digest", "writing manifest", "success"]
    pulling = [s for s in statuses if s.digest == f"sha256:{sha}"]
    assert pulling and pulling[0].status == f"pulling {sha[:12]}"
    assert pulling[-1].completed == pulling[-1].total == wanted.stat().st_size
    (local,) = Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-Q8_0.gguf")
    assert hashlib.sha256(local.read_bytes()).hexdigest() == sha  # in the Hugging Face cache, checked
    assert client.pull(f"hf.co/{REPO}:Q8_0").status == "success"  # whole, and nothing left to fetch


def test_what_a_hugging_face_repo_does_not_have_is_said(client: ollama.Client, fake_hub: FakeHub,
                                                        tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    missing = error_of(lambda: client.pull(f"hf.co/{REPO}:Q2_K"))
    assert missing.status_code == 404 and "no Q2_K file" in missing.error and "Q4_K_M" in missing.error
    nowhere = error_of(lambda: client.pull("hf.co/org/Nope-GGUF:Q4_K_M"))
    assert nowhere.status_code == 404 and "org/Nope-GGUF" in nowhere.error


# -- the server itself -------------------------------------------------------------------------------


def test_a_client_that_leaves_cancels_its_reply(client: ollama.Client, served: Served):
    stream = client.chat(model=MODEL, messages=STORY, stream=True, options={"num_predict": 1500})
    next(stream)
    (request_id,) = served.port.active
    stream.close()
    outcome = served.port.wait_outcome(request_id, timeout=60)
    assert outcome is not None and outcome.finish_reason == "cancelled"


def test_the_ollama_port_and_the_main_port_serve_the_same_app(served: Served):
    thread = served.thread
    assert thread.ollama_port not in (None, thread.port)
    main_port = ollama.Client(host=f"http://127.0.0.1:{thread.port}", timeout=60)
    other = ollama.Client(host=thread.ollama_url, timeout=60)
    assert main_port.list() == other.list()
    assert httpx.get(f"{thread.ollama_url}/v1/models", timeout=30).json()["data"][0]["id"] == MODEL
    assert main_port.generate(model=MODEL, prompt="Hi", options={"num_predict": 1}).done


def test_an_ollama_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ServerStartError) as caught:
            ServerThread(None, None, ServerConfig(port=0, ollama_port=port))
    message = str(caught.value)
    assert f"127.0.0.1:{port} (--ollama-port)" in message and "Ollama itself" in message


def test_tailor_serve_ollama_port_serves_ollama_s_api_there(starter_model: Path, tmp_path: Path):
    env = {**os.environ, "TAILOR_HOME": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "app.launcher", "serve", "--port", "0", "--ollama-port", "0",
                                "--ctx", "512"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        said = []
        for line in process.stderr:  # type: ignore[union-attr]
            said.append(line)
            if "serving Ollama's API on " in line:
                break
        host = said[-1].split(" on ", 1)[1].split()[0]
        assert "serving on http://127.0.0.1:" in "".join(said) and host.startswith("http://127.0.0.1:")
        (model,) = ollama.Client(host=host, timeout=60).list().models
        assert model.model == starter_model.stem
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0


def test_the_cli_refuses_an_ollama_port_out_of_range(capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "--ollama-port", "70000"]) == 1
    assert "--ollama-port 70000 is out of range" in capsys.readouterr().err


def test_durations_are_nanoseconds(client: ollama.Client):
    started = time.monotonic_ns()
    reply = client.chat(model=MODEL, messages=FRANCE, options={"num_predict": 8})
    took = time.monotonic_ns() - started
    assert 0 < reply.prompt_eval_duration < reply.total_duration <= took
    rate = reply.eval_count / (reply.eval_duration / 1e9)  # tokens per second, as clients work it out
    assert reply.eval_count / (took / 1e9) < rate < 100_000
