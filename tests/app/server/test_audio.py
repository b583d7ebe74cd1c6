"""Audio through `tailor serve`'s chat API, as OpenAI's clients send it: `input_audio` parts holding a WAV in
base64, to the starter model with a tiny Qwen2-Audio projector (tests/fixtures/tiny_audio_projector.py) in an
engine process of its own; refused by name where it cannot be taken; and sent by Tailor's remote engine the same
way."""

from __future__ import annotations

import base64
import io
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

from app.remote.media_parts import wav_bytes
from app.remote.openai_client import RemoteEndpoint
from app.remote.remote_engine import REMOTE_SAMPLE_RATE, RemoteEngine
from app.server.image_parts import has_image_parts, has_media_parts
from app.server.runner import ServerThread
from app.services.load_settings import LoadSettings
from app.services.media.intake import audio_from_bytes
from engine.protocol import ChatMessage, Done, SamplingParams
from tests.app.server.conftest import format_server, served_model
from tests.app.server.test_images import image, png_url, post
from tests.app.server.test_rejections import assert_error
from tests.app.services.media.sounds import pcm_wav, tone
from tests.fixtures.bad_openai_server import BadOpenAIServer
from tests.fixtures.range_server import serving
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector

WINDOW = 750  # tokens of one 30-second window of Qwen2-Audio


@pytest.fixture(scope="module")
def audio_server(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    folder = tmp_path_factory.mktemp("hears")
    projector = write_tiny_audio_projector(folder / "mmproj-qwen2a.gguf")
    with format_server(starter_model, folder, LoadSettings(n_ctx=2048, mmproj=str(projector))) as thread:
        yield thread


def wav_b64(seconds: float = 2.0, rate: int = 44_100, bits: int = 16) -> str:
    return base64.b64encode(pcm_wav(tone(seconds, rate), rate, bits)).decode()


def clip(data: str | None = None, fmt: str = "wav") -> dict:
    return {"type": "input_audio", "input_audio": {"data": wav_b64() if data is None else data, "format": fmt}}


def ask(*parts: dict, system: bool = False) -> dict:
    messages = [{"role": "user", "content": [{"type": "text", "text": "What do you hear?"}, *parts]}]
    if system:
        messages.insert(0, {"role": "system", "content": [{"type": "text", "text": "Be brief."}, *parts]})
    return {"model": "SmolLM2-135M-Instruct.Q4_1", "messages": messages, "max_tokens": 4, "temperature": 0}


def test_the_openai_client_sends_a_clip_and_the_model_hears_it(audio_server: ServerThread):
    client = openai.OpenAI(base_url=audio_server.url, api_key="unused", max_retries=0, timeout=120)
    model = served_model(client)
    text_only = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": "What do you hear?"}])
    heard = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": [{"type": "text", "text": "What do you hear?"},
                                     {"type": "input_audio", "input_audio": {"data": wav_b64(), "format": "wav"}}]}])
    # The projector's weights are random: what the model makes of the clip means nothing (often an end at once).
    assert heard.choices[0].message.content is not None and heard.choices[0].finish_reason in ("stop", "length")
    assert heard.usage.prompt_tokens >= text_only.usage.prompt_tokens + WINDOW  # the clip's window reached it
    streamed = client.chat.completions.create(model=model, max_tokens=4, temperature=0, stream=True, messages=[
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": wav_b64(1.0), "format": "wav"}},
                                     {"type": "text", "text": "And this one?"}]}])
    assert [c.choices[0].finish_reason for c in streamed if c.choices][-1] in ("stop", "length")


def test_audio_parts_that_cannot_be_taken_are_400_naming_the_part(audio_server: ServerThread):
    mp3 = base64.b64encode(b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 64).decode()
    cases = {
        ("mp3", wav_b64()): ("messages[0].content[1].input_audio.format", "ffmpeg -i clip.mp3 clip.wav"),
        ("flac", wav_b64()): ("messages[0].content[1].input_audio.format", "must be wav"),
        ("wav", "not*base64!"): ("messages[0].content[1].input_audio.data", "malformed"),
        ("wav", ""): ("messages[0].content[1].input_audio.data", "base64"),
        ("wav", mp3): ("messages[0].content[1].input_audio", "is an MP3 audio file: Tailor reads WAV audio"),
        ("wav", wav_b64(601.0, rate=4_000, bits=8)): ("messages[0].content[1].input_audio", "up to 10 min"),
        ("wav", base64.b64encode(b"RIFF\x04\x00\x00\x00WAVE").decode()): (
            "messages[0].content[1].input_audio", "truncated"),
    }
    for (fmt, data), (param, expected) in cases.items():
        response = post(audio_server, ask(clip(data, fmt)))
        assert_error(response, 400, param=param)
        assert expected.lower() in response.json()["error"]["message"].lower(), (fmt, data[:20], response.text)
    many = post(audio_server, ask(*[clip(wav_b64(0.2)) for _ in range(5)]))
    assert_error(many, 400, param="messages[0].content")
    assert "5 audio clips" in many.json()["error"]["message"]
    in_system = post(audio_server, ask(clip(), system=True))
    assert_error(in_system, 400, param="messages[0].content[1]")
    assert "Audio goes in user messages" in in_system.json()["error"]["message"]
    not_an_object = post(audio_server, ask({"type": "input_audio", "input_audio": "AAAA"}))
    assert_error(not_an_object, 400, param="messages[0].content[1].input_audio")
    picture = post(audio_server, ask(image(png_url((255, 0, 0)))))  # it hears, it does not see
    assert_error(picture, 400, code="model_not_multimodal")
    assert "cannot see images" in picture.json()["error"]["message"]
    assert post(audio_server, ask(clip(wav_b64(0.5)))).status_code == 200  # and the server is fine


def test_a_model_without_an_audio_projector_refuses_clips_by_name(server: ServerThread):
    response = post(server, ask(clip()))
    assert_error(response, 400, code="model_not_multimodal", param="messages[0].content[1]")
    assert "cannot hear audio" in response.json()["error"]["message"]
    assert "Qwen2-Audio" in response.json()["error"]["message"]


def test_audio_parts_are_decoded_off_the_event_loop():
    body = ask(clip())
    assert has_media_parts(body) and not has_image_parts(body)
    assert has_media_parts(ask(image("data:,"))) and not has_media_parts(ask())


# ---------------------------------------------------------------- Tailor as the client of a remote server


def test_a_remote_endpoint_receives_the_clips_as_openai_has_them():
    original = pcm_wav(np.stack([tone(1.5, 48_000), tone(1.5, 48_000, 660.0)], axis=1), 48_000, 24)
    media = audio_from_bytes(original, sample_rate=REMOTE_SAMPLE_RATE, name="q.wav").as_media()
    with serving(BadOpenAIServer()) as bad_server:
        engine = RemoteEngine(RemoteEndpoint(bad_server.url, "ok", read_timeout_s=60))
        try:
            events = list(engine.stream(engine.generate([ChatMessage("user", "What is it?", media=(media,))],
                                                        SamplingParams(temperature=0.0, max_tokens=8))))
        finally:
            engine.shutdown()
    assert isinstance(events[-1], Done)
    content = bad_server.bodies[-1]["messages"][0]["content"]
    assert [part["type"] for part in content] == ["input_audio", "text"] and content[1]["text"] == "What is it?"
    assert content[0]["input_audio"]["format"] == "wav"
    sent = base64.b64decode(content[0]["input_audio"]["data"])
    with wave.open(io.BytesIO(sent)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, REMOTE_SAMPLE_RATE)
        assert reader.getnframes() == 1.5 * REMOTE_SAMPLE_RATE
    again = audio_from_bytes(sent, sample_rate=REMOTE_SAMPLE_RATE)  # what a server reads back: the same clip
    assert np.abs(np.frombuffer(again.pcm, "<f4") - np.frombuffer(media.data, "<f4")).max() < 1e-4
    assert sent == wav_bytes(media)


def test_tailor_chats_with_a_remote_tailor_about_a_clip(audio_server: ServerThread):
    """The whole way: the window's remote engine sends the clip to an audio server, whose model hears it."""
    engine = RemoteEngine(RemoteEndpoint(audio_server.url, "SmolLM2-135M-Instruct.Q4_1", read_timeout_s=120))
    media = audio_from_bytes(pcm_wav(tone(2.0, 22_050), 22_050, 16), sample_rate=REMOTE_SAMPLE_RATE).as_media()
    try:
        sampling = SamplingParams(temperature=0.0, max_tokens=4)
        plain = list(engine.stream(engine.generate([ChatMessage("user", "What is it?")], sampling)))[-1]
        heard = list(engine.stream(engine.generate([ChatMessage("user", "What is it?", media=(media,))],
                                                   sampling)))[-1]
    finally:
        engine.shutdown()
    assert isinstance(plain, Done) and isinstance(heard, Done), (plain, heard)
    assert heard.stats.prompt_tokens >= plain.stats.prompt_tokens + WINDOW
