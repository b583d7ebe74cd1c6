"""Images through `tailor serve`'s chat API, as OpenAI's clients send them: `image_url` parts with base64
`data:` URLs, to the starter model with a tiny gemma3 projector (tests/fixtures/tiny_projector.py) in an
engine process of its own."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image

from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import RemoteEngine
from app.server.config import ServerConfig
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from engine.protocol import ChatMessage, Done, Media, SamplingParams
from tests.app.server.conftest import format_server, served_model
from tests.app.server.test_rejections import assert_error
from tests.fixtures.bad_openai_server import BadOpenAIServer
from tests.fixtures.range_server import serve_files, serving
from tests.fixtures.tiny_projector import TinyProjectorSpec, write_tiny_projector


@pytest.fixture(scope="module")
def vision_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    folder = tmp_path_factory.mktemp("vision")
    projector = write_tiny_projector(folder / "mmproj-gemma3.gguf", TinyProjectorSpec(projector_type="gemma3"))
    with format_server(starter_model, folder, LoadSettings(n_ctx=2048, mmproj=str(projector))) as thread:
        yield thread


def png_url(colour: tuple[int, int, int], size: tuple[int, int] = (80, 60)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def ask(*parts: dict, system: bool = False) -> dict:
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is in the picture?"}, *parts]}]
    if system:
        messages.insert(0, {"role": "system", "content": [{"type": "text", "text": "Be brief."}, *parts]})
    return {"model": "SmolLM2-135M-Instruct.Q4_1", "messages": messages, "max_tokens": 4, "temperature": 0}


def image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}


def post(server: ServerThread, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=120)


def test_the_openai_client_sends_an_image_and_the_model_sees_it(vision_server: ServerThread):
    client = openai.OpenAI(base_url=vision_server.url, api_key="unused", max_retries=0, timeout=120)
    model = served_model(client)
    text_only = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": "What is in the picture?"}])
    seen = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                     {"type": "image_url", "image_url": {"url": png_url((255, 0, 0))}}]}])
    assert seen.choices[0].message.content is not None and seen.usage.completion_tokens > 0
    # gemma3's projector: 16 positions for any picture, and the text around them
    assert seen.usage.prompt_tokens >= text_only.usage.prompt_tokens + 16
    streamed = client.chat.completions.create(model=model, max_tokens=4, temperature=0, stream=True, messages=[
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png_url((0, 0, 255))}},
                                     {"type": "text", "text": "And this one?"}]}])
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)


def test_image_parts_that_cannot_be_taken_are_400_naming_the_part(vision_server: ServerThread, tmp_path: Path):
    bomb = io.BytesIO()
    Image.new("1", (20_000, 20_000)).save(bomb, "PNG", optimize=True)  # 400 M pixels in a few hundred KB
    svg = "data:image/svg+xml;base64," + base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()
    cases = {
        "https://example.com/cat.png": "fetches no image URLs",
        "data:image/png;base64,not*base64!": "malformed",
        "data:image/png;base64," + base64.b64encode(bomb.getvalue()).decode(): "pixels",
        svg: "SVG",
        "file:///etc/passwd": "data: URL",
    }
    for url, expected in cases.items():
        response = post(vision_server, ask(image(url)))
        assert_error(response, 400, param="messages[0].content[1].image_url")
        assert expected.lower() in response.json()["error"]["message"].lower(), (url[:40], response.text)
    many = post(vision_server, ask(*[image(png_url((i, 0, 0), (8, 8))) for i in range(17)]))
    assert_error(many, 400, param="messages[0].content")
    assert "17 images" in many.json()["error"]["message"]
    in_system = post(vision_server, ask(image(png_url((1, 2, 3))), system=True))
    assert_error(in_system, 400, param="messages[0].content[1]")
    audio = post(vision_server, ask({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}))
    assert_error(audio, 400, param="messages[0].content[1]")
    assert post(vision_server, ask(image(png_url((9, 9, 9))))).status_code == 200  # and the server is fine


def test_with_allow_image_urls_the_server_fetches_the_image_a_request_names(
        starter_model: Path, tmp_path: Path):
    projector = write_tiny_projector(tmp_path / "mmproj-gemma3.gguf", TinyProjectorSpec(projector_type="gemma3"))
    red, junk = tmp_path / "red.png", tmp_path / "junk.png"
    red.write_bytes(base64.b64decode(png_url((255, 0, 0)).split(",", 1)[1]))
    junk.write_bytes(b"\x00not an image at all" * 50)
    config = ServerConfig(port=0, allow_image_urls=True)
    with serve_files({"/red.png": red, "/junk.png": junk}) as files, \
            format_server(starter_model, tmp_path, LoadSettings(n_ctx=2048, mmproj=str(projector)), config) as server:
        plain = post(server, ask())
        seen = post(server, ask(image(files.url("/red.png"))))
        assert seen.status_code == 200, seen.text
        assert seen.json()["usage"]["prompt_tokens"] >= plain.json()["usage"]["prompt_tokens"] + 16
        cases = {files.url("/missing.png"): "could not be fetched: 127.0.0.1 answered 404",
                 files.url("/junk.png"): "not an image"}
        for url, expected in cases.items():
            response = post(server, ask(image(url)))
            assert_error(response, 400, param="messages[0].content[1].image_url")
            assert expected.lower() in response.json()["error"]["message"].lower(), response.text


def test_a_model_without_a_projector_refuses_images_by_name(server: ServerThread):
    response = post(server, ask(image(png_url((255, 0, 0)))))
    assert_error(response, 400, code="model_not_multimodal")
    assert "cannot see images" in response.json()["error"]["message"]


# ---------------------------------------------------------------- Tailor as the client of a remote server


def red_media(width: int = 120, height: int = 90) -> Media:
    pixels = Image.new("RGB", (width, height), (255, 255, 255))
    pixels.paste((255, 0, 0), (width // 4, height // 4, 3 * width // 4, 3 * height // 4))
    return Media("image", "c" * 64, pixels.tobytes(), width, height)


def test_a_remote_endpoint_receives_the_images_as_openai_has_them():
    with serving(BadOpenAIServer()) as bad_server:
        engine = RemoteEngine(RemoteEndpoint(bad_server.url, "ok", read_timeout_s=60))
        try:
            events = list(engine.stream(engine.generate([ChatMessage("user", "What is it?", media=(red_media(),))],
                                                        SamplingParams(temperature=0.0, max_tokens=8))))
        finally:
            engine.shutdown()
    assert isinstance(events[-1], Done)
    content = bad_server.bodies[-1]["messages"][0]["content"]
    assert [part["type"] for part in content] == ["image_url", "text"] and content[1]["text"] == "What is it?"
    url = content[0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (120, 90)
    centre, corner = sent.convert("RGB").getpixel((60, 45)), sent.convert("RGB").getpixel((2, 2))
    assert centre[0] > 240 and centre[1] < 20 and min(corner) > 240  # the red square on white, through JPEG


def test_tailor_chats_with_a_remote_tailor_about_a_picture(vision_server: ServerThread):
    """The whole way: the window's remote engine sends the picture to a vision server, whose model sees it."""
    engine = RemoteEngine(RemoteEndpoint(vision_server.url, "SmolLM2-135M-Instruct.Q4_1", read_timeout_s=120))
    try:
        sampling = SamplingParams(temperature=0.0, max_tokens=4)
        plain = list(engine.stream(engine.generate([ChatMessage("user", "What is it?")], sampling)))[-1]
        seen = list(engine.stream(engine.generate([ChatMessage("user", "What is it?", media=(red_media(),))],
                                                  sampling)))[-1]
    finally:
        engine.shutdown()
    assert isinstance(plain, Done) and isinstance(seen, Done), (plain, seen)
    assert seen.stats.prompt_tokens >= plain.stats.prompt_tokens + 16  # gemma3's 16 image positions reached the model
