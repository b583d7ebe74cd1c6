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

from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from tests.app.server.conftest import format_server, served_model
from tests.app.server.test_rejections import assert_error
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


def test_a_model_without_a_projector_refuses_images_by_name(server: ServerThread):
    response = post(server, ask(image(png_url((255, 0, 0)))))
    assert_error(response, 400, code="model_not_multimodal")
    assert "cannot see images" in response.json()["error"]["message"]
