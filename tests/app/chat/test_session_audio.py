"""A chat's audio clips on their way to the model: kept in the history, sent with every turn (after the message's
images) at the rate the model hears, to a model whose projector hears (a tiny Qwen2-Audio projector beside the
starter model); left out, with a notice, for one that does not or where a file is gone; counted by the context
guard as the projector cuts them; and once through the real engine process and libmtmd."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.chat.session import ChatSession
from app.chat.stored_clips import StoredClips
from app.services.history.store import AudioRef, ChatStore
from app.services.load_settings import LoadSettings
from app.services.media.intake import PreparedAudio, audio_from_bytes, checked_audio, read_image
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient
from engine.protocol import Done, Error, Loaded
from models.formats.projector_header import read_projector_info
from models.hardware.profile import profile_for
from tests.app.chat.conftest import FIXED, Chat
from tests.app.chat.test_session_images import finish, picture
from tests.app.services.media.sounds import pcm_wav, tone
from tests.fixtures.fake_engine import FakeEngine, HandTimer, Recorder
from tests.fixtures.tiny_audio_projector import write_tiny_audio_projector

RATE = 16_000
# Room for a few clips (766 tokens each with the tiny Qwen2-Audio projector) and a short reply.
ROOMY = replace(FIXED, max_tokens=128, load=LoadSettings(n_ctx=4096))


def clip(name: str, seconds: float = 2.0, hz: float = 440.0, rate: int = 44_100) -> PreparedAudio:
    """A 16-bit WAV at `rate`, read by the intake at the projector's 16 kHz (as the window attaches it)."""
    return audio_from_bytes(pcm_wav(tone(seconds, rate, hz), rate, 16), sample_rate=RATE, name=name)


def model_folder(tmp_path: Path, starter_model: Path, hears: bool) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    model = folder / starter_model.name
    model.symlink_to(starter_model)
    if hears:
        write_tiny_audio_projector(folder / "mmproj-audio-F16.gguf")
    return model


def audio_chat(tmp_path: Path, starter_model: Path, hears: bool = True) -> Chat:
    """A chat whose model is the starter model with (or without) an audio projector beside it."""
    model = model_folder(tmp_path, starter_model, hears)
    db = tmp_path / "chats.sqlite3"
    store = ChatStore(db)
    engine, heard, timers = FakeEngine(), Recorder(), []
    session = ChatSession(store, engine, LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path), str(model),
                          heard, lambda callback: timers.append(HandTimer(callback)) or timers[-1])
    engine.handle = session.handle
    session.open_conversation(store.create_conversation("New chat", ROOMY).id)
    chat = Chat(session, engine, heard, timers, store, db)
    chat.started()
    return chat


def test_clips_go_with_the_message_and_every_later_turn_at_the_rate_the_model_hears(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        assert chat.engine.loads[-1].mmproj.endswith("mmproj-audio-F16.gguf")
        assert chat.session.model.hears_audio and chat.session.model.audio_sample_rate == RATE
        assert not chat.session.model.sees_images
        question, noise = clip("question.wav"), clip("noise.wav", 0.5, hz=660.0)
        assert chat.session.send("What do you hear?", clips=[question, noise])
        first = finish(chat, "A tone.")
        (sent,) = [m for m in chat.engine.prompts[first] if m.role == "user"]
        assert [m.kind for m in sent.media] == ["audio", "audio"]
        assert [m.id for m in sent.media] == [question.as_media().id, noise.as_media().id]
        assert sent.media[0].sample_rate == RATE and sent.media[0].data == question.pcm
        assert chat.session.send("And now?")
        second = finish(chat, "Still a tone.")
        users = [m for m in chat.engine.prompts[second] if m.role == "user"]
        assert [len(m.media) for m in users] == [2, 0]  # the first message's clips again, from the history
        assert users[0].media[1].data == noise.pcm
        stored = [m for m in chat.store.list_messages(chat.session.current.id) if m.role == "user"]
        assert [c.name for c in stored[0].clips] == ["question.wav", "noise.wav"]
        assert stored[0].clips[0] == AudioRef.of(question)
        assert not chat.heard.of("notice")  # nothing was left out
    finally:
        chat.store.close()


def test_a_message_of_a_clip_alone_is_sent_and_names_the_chat(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        assert chat.session.send("", clips=[clip("voice memo.wav")])
        request_id = finish(chat, "Hello.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "" and [m.kind for m in sent.media] == ["audio"]
        assert chat.session.current.title == "voice memo.wav"
    finally:
        chat.store.close()


def test_a_clip_checked_by_its_header_is_decoded_when_sent(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        wav = pcm_wav(tone(1.0, 48_000), 48_000, 16)
        assert chat.session.send("Hear this.", clips=[checked_audio(wav, name="attached.wav")])  # as the window does
        request_id = finish(chat, "Yes.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        (media,) = sent.media
        assert media.sample_rate == RATE and media.data == audio_from_bytes(wav, sample_rate=RATE).pcm
    finally:
        chat.store.close()


def test_images_go_without_a_model_that_only_hears_and_the_clip_with_it(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        photo = read_image(picture(tmp_path / "red.png", "red"))
        assert chat.session.send("Both?", [photo], [clip("q.wav")])
        request_id = finish(chat, "A sound.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert [m.kind for m in sent.media] == ["audio"]
        (notice,) = chat.heard.of("notice")
        assert "cannot see images" in notice[0] and "1 image " in notice[0] and "hear" not in notice[0]
    finally:
        chat.store.close()


def test_a_model_that_cannot_hear_gets_the_text_and_the_user_is_told(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model, hears=False)
    try:
        assert chat.engine.loads[-1].mmproj is None and not chat.session.model.hears_audio
        assert chat.session.send("What is this?", clips=[clip("a.wav"), clip("b.wav", hz=300.0)])
        request_id = finish(chat, "I cannot hear it.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "What is this?" and sent.media == ()
        assert any("cannot hear audio" in n and "2 clips" in n and "Qwen2-Audio" in n
                   for (n,) in chat.heard.of("notice"))
        assert len(chat.store.list_messages(chat.session.current.id)[0].clips) == 2  # kept for a model that hears
    finally:
        chat.store.close()


def test_a_stored_clip_gone_from_disk_costs_that_clip_alone(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        kept, lost = clip("kept.wav"), clip("lost.wav", hz=880.0)
        assert chat.session.send("Two clips.", clips=[kept, lost])
        finish(chat, "Two.")
        chat.store.media.path_of(lost.sha256).unlink()
        chat.session.replies.clips = StoredClips(chat.store.media)  # as after a restart: nothing decoded yet
        assert chat.session.send("Again?")
        request_id = finish(chat, "One.")
        first_user = next(m for m in chat.engine.prompts[request_id] if m.role == "user")
        assert [m.id for m in first_user.media] == [kept.as_media().id]
        assert any(n.startswith("Sent without lost.wav") for (n,) in chat.heard.of("notice"))
    finally:
        chat.store.close()


def test_an_edit_keeps_the_clips_of_the_message_it_replaces(tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        question = clip("question.wav")
        assert chat.session.send("What is it?", clips=[question])
        finish(chat, "A tone.")
        first = chat.store.list_messages(chat.session.current.id)[0]
        assert chat.session.edit_message(first.id, "What note is it?")
        request_id = finish(chat, "A.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "What note is it?" and [m.id for m in sent.media] == [question.as_media().id]
    finally:
        chat.store.close()


def test_clips_that_outgrow_the_context_hold_the_message_back_and_go_with_it_after_the_reload(
        tmp_path, starter_model):
    chat = audio_chat(tmp_path, starter_model)
    try:
        settings = chat.session.current.settings
        chat.session.update_settings(replace(settings, max_tokens=64, load=replace(settings.load, n_ctx=1024)))
        count = chat.session.model.clip_tokens
        assert count is not None and count(2.0) == 750 + 16  # one 30-second window of Qwen2-Audio, its markers
        assert count(45.0) == 2 * 750 + 16
        one = [clip("one.wav")]
        assert chat.session.send("What is it?", clips=one)  # 766 tokens and the text fit in 1,024
        finish(chat, "A tone.")
        assert chat.engine.loads[-1].n_ctx == 1024
        two = [clip("two.wav", hz=500.0), clip("three.wav", hz=600.0)]
        assert not chat.session.send("And these?", clips=two)
        (short,) = chat.heard.last("context_outgrown")
        assert short.needed > 2 * 766 + 64 and short.clips == tuple(two) and short.images == ()
        assert len(chat.store.list_messages(chat.session.current.id)) == 2  # nothing was added
        assert chat.session.send_with_larger_context(short)
        chat.engine.pump()
        assert chat.engine.loads[-1].n_ctx == short.max_context
        sent = chat.engine.prompts[chat.engine.last_request][-1]
        assert sent.content == "And these?" and [m.kind for m in sent.media] == ["audio", "audio"]
    finally:
        chat.store.close()


# ---------------------------------------------------------------- the real engine


def _until(client: EngineClient, session: ChatSession, kind: type, timeout: float = 120.0):
    """Hand the engine's events to the session (as the window's relay does) until one of `kind`."""
    while True:
        event = client.next_event(timeout)
        assert event is not None, f"no {kind.__name__} within {timeout} s"
        session.handle(event)
        if isinstance(event, kind):
            return event
        assert not isinstance(event, Error), event


@pytest.mark.timeout(300)
def test_a_clip_reaches_the_real_engine_and_the_next_turn_finds_it_in_the_cache(tmp_path, starter_model):
    model = model_folder(tmp_path, starter_model, hears=True)
    window = read_projector_info(model.parent / "mmproj-audio-F16.gguf").audio.tokens_per_window
    store = ChatStore(tmp_path / "chats.sqlite3")
    client = EngineClient(log_path=tmp_path / "engine.log")
    timers: list[HandTimer] = []
    session = ChatSession(store, client, LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path), str(model),
                          Recorder(), lambda callback: timers.append(HandTimer(callback)) or timers[-1])
    settings = replace(FIXED, max_tokens=4, temperature=0.0)
    session.open_conversation(store.create_conversation("New chat", settings).id)
    try:
        session.start()
        loaded = _until(client, session, Loaded)
        assert loaded.info.audio and loaded.info.audio_sample_rate == RATE and session.model.hears_audio
        assert session.send("What do you hear?", clips=[clip("question.wav", 3.0)])
        first = _until(client, session, Done)
        assert first.stats.prompt_tokens > window  # the clip's 750 positions, and the text around them
        assert session.send("Say it again.")
        second = _until(client, session, Done)
        assert second.stats.cached_tokens >= first.stats.prompt_tokens - 8  # the clip was not encoded again
        replies = [m for m in store.list_messages(session.current.id) if m.role == "assistant"]
        assert [m.state for m in replies] == ["complete", "complete"]
    finally:
        session.shutdown()
        store.close()
