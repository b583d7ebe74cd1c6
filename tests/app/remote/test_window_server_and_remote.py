"""The window's Server menu: serving its loaded engine, and chatting with a remote server."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import openai
import pytest

from app.chat.reasoning_text import finished_header
from app.gui.server.endpoints_dialog import EndpointsDialog
from app.remote.endpoints import NO_KEYRING, EndpointStore, KeyStore
from app.remote.openai_client import RemoteEndpoint
from app.services.paths import AppPaths
from engine.client import EngineClient
from models.library import ModelStore
from tests.app.remote.conftest import LLAMA_ALIAS
from tests.fixtures.bad_openai_server import ANSWER, THOUGHT, THOUGHT_TOKENS, BadOpenAIServer
from tests.fixtures.range_server import serving

TIMEOUT_MS = 90_000
SYSTEM = {"role": "system", "content": "You are Tailor, a helpful assistant. Reply clearly and concisely."}


def send(qtbot, window, text: str):
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        assert window.session.send(text)
    return finished.args[0]


def test_serving_the_windows_engine_beside_its_own_chat(qtbot, make_window):
    window = make_window()
    toggle = window.server_menu.toggle
    toggle.port = 0  # the system picks a free port as the server binds it (no port released, then taken)
    toggle.action.setChecked(True)
    assert toggle.server is not None and toggle.label.isVisible()
    served_url = toggle.url
    assert served_url.startswith("http://127.0.0.1:") and not served_url.startswith("http://127.0.0.1:0/")
    assert toggle.label.text() == f"Serving on {served_url}"
    (attached,) = toggle.pool.loaded()  # the window's model, served from the window's engine: one model copy
    assert attached.info.path == window.session.model.loaded[0] and toggle.pool.load_log == []
    client = openai.OpenAI(base_url=toggle.url, api_key="x", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    served: dict[str, str] = {}

    def ask_server() -> None:
        reply = client.chat.completions.create(
            model=model, messages=[SYSTEM, {"role": "user", "content": "What is the capital of Italy?"}],
            max_tokens=24, temperature=0, stream=True,
        )
        served["text"] = "".join(c.choices[0].delta.content or "" for c in reply if c.choices)

    thread = threading.Thread(target=ask_server)
    thread.start()  # the server's reply and the window's run on the same engine, one after the other
    reply = send(qtbot, window, "What is the capital of France?")
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=TIMEOUT_MS)
    assert reply.state == "complete" and "Paris" in reply.content and "Rome" not in reply.content
    assert "Rome" in served["text"] and "Paris" not in served["text"]
    assert not window.banner.isVisible()
    toggle.action.setChecked(False)
    assert toggle.server is None and not toggle.label.isVisible()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{served_url}/models")


def test_the_window_serves_the_library_beside_its_model_and_shows_what_the_server_holds(
        qtbot, make_window, format_models):
    other = format_models("qwen3")  # another model of the library (the starter's weights under Qwen3's template)
    ModelStore(AppPaths.default().data_dir).import_gguf(other)
    window = make_window()
    toggle = window.server_menu.toggle
    toggle.port = 0
    toggle.action.setChecked(True)
    client = openai.OpenAI(base_url=toggle.url, api_key="x", max_retries=0, timeout=120)
    ids = [m.id for m in client.models.list().data]
    name = other.name[: -len(".gguf")]
    assert name in ids and len(ids) == 2
    reply = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                           temperature=0, extra_body={"reasoning_effort": "none"})
    assert reply.model == name and reply.choices[0].message.content is not None
    assert {m.model.id for m in toggle.pool.loaded()} == {name, ids[0] if ids[0] != name else ids[1]}
    label = window.memory_page.memory.server_label
    qtbot.waitUntil(lambda: name in label.text(), timeout=TIMEOUT_MS)  # the panel hears it within a poll
    assert label.text().startswith("Also loaded by the server: ") and " GB RAM · " in label.text()
    toggle.action.setChecked(False)  # the models the server loaded go with it; the window's stays
    qtbot.waitUntil(lambda: not label.text(), timeout=TIMEOUT_MS)
    assert window.session.model.loaded is not None
    reply = send(qtbot, window, "Still there?")
    assert reply.state == "complete"


def test_a_taken_port_is_a_notice_not_a_crash(qtbot, make_window):
    window = make_window(start=False)
    toggle = window.server_menu.toggle
    with serving(BadOpenAIServer()) as busy:
        toggle.port = busy.server_address[1]
        with qtbot.waitSignal(toggle.notice) as notice:
            toggle.action.setChecked(True)
    assert "Could not serve" in notice.args[0] and not toggle.action.isChecked()


def test_chatting_with_a_remote_server_and_back(qtbot, make_window, llama_server: str):
    window = make_window()
    menu = window.server_menu
    local = window.session.engine
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
        assert menu.use_remote(RemoteEndpoint(llama_server, LLAMA_ALIAS))
    assert not local.running  # the local model's memory is freed meanwhile
    assert "(remote)" in window.model_label.text() and "remote" in window.model_label.text()
    assert window.memory_label.text() == "Memory: remote"
    assert not menu.toggle.action.isEnabled()  # nothing local to serve
    reply = send(qtbot, window, "What is the capital of France?")
    assert reply.state == "complete" and "Paris" in reply.content
    with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
        assert menu.use_local()
    assert isinstance(window.session.engine, EngineClient) and local.running
    assert "remote" not in window.model_label.text()
    assert menu.toggle.action.isEnabled()


def test_remote_failures_show_in_the_banner(qtbot, make_window):
    window = make_window(start=False)
    with serving(BadOpenAIServer()) as bad:
        with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
            window.server_menu.use_remote(RemoteEndpoint(bad.url, "boom"))
        with qtbot.waitSignal(window.controller.problem, timeout=TIMEOUT_MS) as problem:
            window.session.send("Hello?")
        text = problem.args[0]
        assert "500" in text and "CUDA out of memory" in text and bad.url.removesuffix("/v1") in text
        qtbot.waitUntil(lambda: not window.session.busy, timeout=TIMEOUT_MS)
        with qtbot.waitSignal(window.controller.problem, timeout=TIMEOUT_MS) as problem:
            window.server_menu.use_remote(RemoteEndpoint(bad.url, "no-such-model"))
        assert "no-such-model" in problem.args[0]


def test_counts_a_remote_server_does_not_give_show_as_unknown(qtbot, make_window):
    window = make_window(start=False)
    with serving(BadOpenAIServer()) as bad:
        with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
            assert window.server_menu.use_remote(RemoteEndpoint(bad.url, "no_usage"))
        reply = send(qtbot, window, "Hello?")
    assert reply.state == "complete" and reply.content == "Hello"
    assert reply.stats["prompt_tokens"] is None and reply.stats["cached_tokens"] is None  # stored as unknown
    assert "prompt tokens unknown" in window.stats_label.text()
    panel = window.memory_page.memory
    assert panel.last_label.text().endswith("prompt tokens unknown")
    assert panel.rolling_label.text().endswith("prompt tokens unknown")


def test_a_remote_reasoning_model_thinks_apart_in_the_window(qtbot, make_window):
    window = make_window(start=False)
    streamed: list[tuple[str, str]] = []
    window.controller.stream_reasoning.connect(lambda text, _tokens, _s: streamed.append(("thought", text)))
    window.controller.stream_text.connect(lambda text: streamed.append(("answer", text)))
    with serving(BadOpenAIServer()) as bad:
        with qtbot.waitSignal(window.controller.loaded, timeout=TIMEOUT_MS):
            assert window.server_menu.use_remote(RemoteEndpoint(bad.url, "thinks"))
        reply = send(qtbot, window, "Capital of France?")
    # The session got the server's reasoning_content as reasoning events, as from a local reasoning model.
    assert streamed == [("thought", t) for t in THOUGHT] + [("answer", a) for a in ANSWER]
    assert (reply.state, reply.content, reply.reasoning, reply.reasoning_closed) == (
        "complete", "".join(ANSWER), "".join(THOUGHT), True)
    assert reply.stats["reasoning_tokens"] == THOUGHT_TOKENS  # the server's own count, from its usage
    assert finished_header(reply).startswith("Thought for ") and finished_header(reply).endswith(
        f" · {THOUGHT_TOKENS} tokens")
    assert f"{THOUGHT_TOKENS} thinking + {len(ANSWER)} answer tokens" in window.stats_label.text()


def test_endpoints_dialog_saves_removes_and_picks(qtbot, tmp_path: Path):
    paths = AppPaths.default()
    store = EndpointStore(paths, KeyStore(paths.data_dir / "keys.json", backend=NO_KEYRING))
    dialog = EndpointsDialog(store)
    qtbot.addWidget(dialog)
    dialog.name.setText("box")
    dialog.url.setText("gpu-box:8000")
    dialog.model.setText("qwen")
    dialog.key.setText("sk-1")
    assert dialog.save()
    assert dialog.list.count() == 1 and store.get("box").url == "http://gpu-box:8000/v1"
    with qtbot.waitSignal(dialog.remote_chosen) as chosen:
        dialog.choose()
    assert chosen.args[0] == RemoteEndpoint("http://gpu-box:8000/v1", "qwen", "sk-1")
    dialog.name.setText("")
    assert not dialog.save() and "name" in dialog.message.text()
    dialog.list.setCurrentRow(0)
    dialog.remove()
    assert dialog.list.count() == 0 and store.list() == []
