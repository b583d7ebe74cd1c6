"""A chat's audio clips out of the history and back (issue 33), with real WAV files: the JSON export (version 5)
embeds them or writes them beside itself and the import reads either back, each checked by its sha256 and its
WAV header; HTML holds each in the browser's own player with its data inline (its policy allows media from
`data:` only); Markdown links the files beside it; a missing, changed, piped or compressed clip is refused by
name and its message kept."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from urllib.parse import unquote

import numpy as np
import pytest

from app.services.history.store import AudioRef, ChatStore
from app.services.media.intake import PreparedAudio, PreparedImage, audio_from_bytes, read_image
from app.services.transfer.export import VERSION, load_chats, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.export_media import ExportMedia, media_folder_of
from app.services.transfer.jobs import export_chats
from tests.app.services.media.images import red_square, save
from tests.app.services.media.sounds import pcm_wav, tone
from tests.app.services.transfer.test_media_transfer import _import_in_thread, imported_into


@pytest.fixture
def clips() -> list[PreparedAudio]:
    stereo = np.stack([tone(2.0, 44_100), tone(2.0, 44_100, 660.0)], axis=1)
    return [audio_from_bytes(pcm_wav(stereo, 44_100, 16), sample_rate=16_000, name="question.wav"),
            audio_from_bytes(pcm_wav(tone(75.0, 8_000), 8_000, 8), sample_rate=16_000, name="a talk [1].wav")]


@pytest.fixture
def photo(tmp_path) -> PreparedImage:
    folder = tmp_path / "attached"
    folder.mkdir()
    return read_image(save(red_square(16, 16), folder / "square.png", "PNG"))


@pytest.fixture
def history(tmp_path, clips, photo):
    """A chat with a photo and both clips, a reply, and the question again alone; and a chat with none."""
    store = ChatStore(tmp_path / "source" / "chats.sqlite3")
    chat = store.create_conversation("Sounds")
    store.add_message(chat.id, "user", "What do you hear?", images=[photo], clips=clips)
    store.add_message(chat.id, "assistant", "A tone and a talk.")
    store.add_message(chat.id, "user", "", clips=clips[:1])
    store.add_message(store.create_conversation("Words").id, "user", "Nothing to hear.")
    yield store
    store.close()


def clips_of(store: ChatStore) -> list[list[list[AudioRef]]]:
    return [[list(m.clips) for m in store.all_messages(c.id)]
            for c in sorted(store.list_conversations(), key=lambda c: c.created)]


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "beside"])
def test_a_json_export_imports_back_with_the_same_clips(tmp_path, history, clips, photo, embed):
    target = tmp_path / "out" / "my chats.json"
    target.parent.mkdir()
    problems: list[str] = []
    assert export_chats(history.path, None, "json", target, embed_media=embed, problems=problems) == 2
    assert problems == []
    document = json.loads(target.read_text())
    assert document["version"] == VERSION == 6
    first = document["chats"][0]["messages"][0]
    assert [(c["name"], c["format"], c["sha256"]) for c in first["audio"]] == [
        ("question.wav", "WAV", clips[0].sha256), ("a talk [1].wav", "WAV", clips[1].sha256)]
    assert [round(c["seconds"], 3) for c in first["audio"]] == [2.0, 75.0]
    assert len(first["images"]) == 1 and document["chats"][0]["messages"][1]["audio"] == []
    folder = media_folder_of(target)
    if embed:
        assert base64.b64decode(first["audio"][0]["data"]) == clips[0].original and not folder.exists()
    else:
        assert [c["file"] for c in first["audio"]] == [f"my chats-media/{c.sha256}.wav" for c in clips]
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            [f"{c.sha256}.wav" for c in clips] + [f"{photo.sha256}.png"])
    store, result = imported_into(tmp_path, target)
    try:
        assert len(result.imported) == 2 and result.notes == [] and result.problems == []
        assert clips_of(store) == clips_of(history)
        assert [store.media.read(c.sha256) for c in clips] == [c.original for c in clips]
        again = tmp_path / "again" / "my chats.json"  # and out again: the same bytes
        again.parent.mkdir()
        export_chats(store.path, None, "json", again, embed_media=embed)
        assert again.read_bytes() == target.read_bytes()
    finally:
        store.close()


def test_a_missing_changed_or_compressed_clip_is_named_and_its_message_kept(tmp_path, history, clips, photo):
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target)
    folder = media_folder_of(target)
    (folder / f"{clips[1].sha256}.wav").unlink()
    (folder / f"{clips[0].sha256}.wav").write_bytes(pcm_wav(tone(1.0, 16_000, 300.0), 16_000, 16))
    store, result = imported_into(tmp_path, target)
    try:
        assert len(result.imported) == 2 and result.problems == []
        (note,) = result.notes
        assert "3 audio clips could not be imported and were left out of their messages" in note
        assert "question.wav does not hold the bytes the export names" in note
        assert "a talk [1].wav is not beside the export" in note
        first = store.all_messages(store.list_conversations()[-1].id)[0]
        assert first.content == "What do you hear?" and first.clips == () and len(first.images) == 1
    finally:
        store.close()
    # An MP3 in a clip's place (its hash named rightly): refused by what it is, with the command that converts it.
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 64
    document = json.loads(target.read_text())
    clip = document["chats"][0]["messages"][0]["audio"][0]
    clip.pop("file")
    clip.update(name="song.mp3", data=base64.b64encode(mp3).decode(), sha256=hashlib.sha256(mp3).hexdigest())
    target.write_text(json.dumps(document))
    other, result = imported_into(tmp_path, target, "other")
    try:
        assert "song.mp3 is an MP3 audio file: Tailor reads WAV audio; convert it first" in result.notes[0]
    finally:
        other.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_in_place_of_a_clip_beside_the_export_is_refused_by_name(tmp_path, history, clips):
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target)
    fifo = media_folder_of(target) / f"{clips[0].sha256}.wav"
    fifo.unlink()
    os.mkfifo(fifo)
    path = tmp_path / "target" / "chats.sqlite3"
    result = _import_in_thread(path, target, fifo)
    store = ChatStore(path)
    try:
        assert len(result.imported) == 2
        assert "question.wav is a FIFO (named pipe), not an audio file" in result.notes[0]
        assert clips[1].sha256 in store.media.hashes() and clips[0].sha256 not in store.media.hashes()
    finally:
        store.close()


def test_html_holds_each_clip_in_a_player_with_its_data_inline_and_allows_nothing_else(history, clips):
    page = to_html(load_chats(history), ExportMedia(history.media))
    uri = "data:audio/wav;base64," + base64.b64encode(clips[0].original).decode()
    assert page.count(f'src="{uri}"') == 2  # the question, and the question again alone
    assert page.count("<audio controls") == 3
    assert "question.wav · 0:02" in page and "a talk [1].wav · 1:15" in page
    assert "media-src data:" in page and "img-src data:" in page and "default-src 'none'" in page
    assert not re.search(r'<(?:audio|img|source)[^>]+src="(?!data:)', page)  # nothing fetched
    assert "<script" not in page and "(empty)" not in page  # a message of a clip alone is not empty
    named = to_html(load_chats(history))  # without the store: named, not played
    assert "<audio" not in named and "[audio: question.wav · 0:02]" in named


def test_markdown_links_clips_written_beside_it(tmp_path, history, clips):
    target = tmp_path / "out.md"
    export_chats(history.path, None, "md", target)
    text = target.read_text()
    links = re.findall(r"(?<!!)\[(audio: [^\]]*(?:\\\][^\]]*)*)\]\(([^)]+)\)", text)
    assert [label for label, _ in links] == ["audio: question.wav · 0:02", "audio: a talk \\[1\\].wav · 1:15",
                                             "audio: question.wav · 0:02"]
    for (_, link), clip in zip(links, [*clips, clips[0]], strict=True):
        assert link == f"out-media/{clip.sha256}.wav"
        assert (tmp_path / unquote(link)).read_bytes() == clip.original
    plain = to_markdown(load_chats(history))  # to standard output: no folder, the clips named
    assert "*\\[audio: question.wav · 0:02\\]*" in plain and "](out-media" not in plain
