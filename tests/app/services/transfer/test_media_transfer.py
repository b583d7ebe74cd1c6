"""A chat's images out of the history and back (issue 33), with real files written by Pillow: the JSON export
embeds them or writes them beside itself and the import reads either back, each checked by its sha256; HTML
inlines them, Markdown links files that exist; ChatGPT's export brings the images its folder holds and says
which it does not; a missing, changed, piped or bomb image is refused by name and its message kept."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import unquote

import pytest

from app.services.history.store import ChatStore, ImageRef
from app.services.media.intake import PreparedImage, image_from_bytes, read_image
from app.services.transfer.export import load_chats, to_markdown
from app.services.transfer.export_html import to_html
from app.services.transfer.export_media import ExportMedia, media_folder_of
from app.services.transfer.importer import ImportResult, import_file
from app.services.transfer.jobs import export_chats
from tests.app.services.media.images import png_bomb, red_square, save
from tests.app.services.transfer.test_import_chatgpt import chatgpt_conversation, node


@pytest.fixture
def photos(tmp_path) -> list[PreparedImage]:
    folder = tmp_path / "attached"
    folder.mkdir()
    return [read_image(save(red_square(64, 48), folder / "square.png", "PNG")),
            read_image(save(red_square(30, 20, side=8), folder / "a photo [1].jpg", "JPEG", quality=90))]


@pytest.fixture
def history(tmp_path, photos):
    """A history of two chats: one with both images (and the square again later), one without any."""
    store = ChatStore(tmp_path / "source" / "chats.sqlite3")
    chat = store.create_conversation("Pictures")
    store.add_message(chat.id, "user", "What are these?", images=photos)
    store.add_message(chat.id, "assistant", "Two red squares.")
    store.add_message(chat.id, "user", "", images=photos[:1])
    store.add_message(store.create_conversation("Words").id, "user", "No pictures here.")
    yield store
    store.close()


def hashes_of(store: ChatStore) -> list[list[tuple]]:
    """Per chat, per message: (sha256, format, name, width, height) of its images."""
    return [[[(r.sha256, r.format, r.name, r.width, r.height) for r in m.images] for m in store.all_messages(c.id)]
            for c in sorted(store.list_conversations(), key=lambda c: c.created)]


def imported_into(tmp_path: Path, source: Path, name: str = "target") -> tuple[ChatStore, ImportResult]:
    store = ChatStore(tmp_path / name / "chats.sqlite3")
    return store, import_file(store, source)


# ---------------------------------------------------------------- JSON both ways


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "beside"])
def test_a_json_export_imports_back_with_the_same_images(tmp_path, history, photos, embed):
    target = tmp_path / "out" / "my chats.json"
    target.parent.mkdir()
    problems: list[str] = []
    assert export_chats(history.path, None, "json", target, embed_media=embed, problems=problems) == 2
    assert problems == []
    document = json.loads(target.read_text())
    first = document["chats"][0]["messages"][0]["images"]
    assert [(i["name"], i["format"], i["sha256"], i["width"], i["height"]) for i in first] == [
        ("square.png", "PNG", photos[0].sha256, 64, 48), ("a photo [1].jpg", "JPEG", photos[1].sha256, 30, 20)]
    folder = media_folder_of(target)
    if embed:
        assert base64.b64decode(first[0]["data"]) == photos[0].original and not folder.exists()
    else:
        assert [i["file"] for i in first] == [f"my chats-media/{p.sha256}{p.suffix}" for p in photos]
        assert sorted(p.name for p in folder.iterdir()) == sorted(f"{p.sha256}{p.suffix}" for p in photos)
    store, result = imported_into(tmp_path, target)
    try:
        assert len(result.imported) == 2 and result.notes == [] and result.problems == []
        assert hashes_of(store) == hashes_of(history)
        assert store.media.hashes() == {p.sha256 for p in photos}
        assert [store.media.read(p.sha256) for p in photos] == [p.original for p in photos]
        again = tmp_path / "again" / "my chats.json"  # and out again: the same bytes
        again.parent.mkdir()
        export_chats(store.path, None, "json", again, embed_media=embed)
        assert again.read_bytes() == target.read_bytes()
    finally:
        store.close()


def test_an_export_whose_folder_was_renamed_with_it_still_finds_its_images(tmp_path, history, photos):
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target)
    moved = tmp_path / "moved"
    moved.mkdir()
    target.rename(moved / "renamed.json")
    media_folder_of(target).rename(moved / "renamed-media")
    store, result = imported_into(tmp_path, moved / "renamed.json")
    try:
        assert result.notes == [] and hashes_of(store) == hashes_of(history)
    finally:
        store.close()


def test_a_missing_or_changed_image_beside_the_export_is_named_and_its_message_kept(tmp_path, history, photos):
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target)
    folder = media_folder_of(target)
    (folder / f"{photos[1].sha256}.jpg").unlink()
    other = red_square(64, 48, side=20)  # another PNG under the square's name
    save(other, folder / f"{photos[0].sha256}.png", "PNG")
    store, result = imported_into(tmp_path, target)
    try:
        assert len(result.imported) == 2 and result.problems == []
        [note] = result.notes
        assert "3 images could not be imported and were left out of their messages" in note
        assert f"message 1: a photo [1].jpg is not beside the export (no chats-media/{photos[1].sha256}.jpg" in note
        assert "message 1: square.png does not hold the bytes the export names" in note
        assert "message 3: square.png does not hold the bytes" in note
        chat = next(c for c in store.list_conversations() if c.title == "Pictures")
        assert [(m.content, m.images) for m in store.list_messages(chat.id)] == [
            ("What are these?", ()), ("Two red squares.", ()), ("", ())]
        assert store.media.hashes() == set()
    finally:
        store.close()


def test_an_image_missing_from_the_history_is_left_out_of_the_export_and_said(tmp_path, history, photos):
    history.media.remove(photos[1].sha256)
    problems: list[str] = []
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target, embed_media=True, problems=problems)
    [problem] = problems
    assert problem.startswith("a photo [1].jpg was left out of the export: The image")
    [square, photo] = json.loads(target.read_text())["chats"][0]["messages"][0]["images"]
    assert "data" in square and "data" not in photo and photo["sha256"] == photos[1].sha256
    store, result = imported_into(tmp_path, target)  # the import says which image it lacks
    try:
        assert "a photo [1].jpg is not beside the export" in result.notes[0]
        assert store.media.hashes() == {photos[0].sha256}
    finally:
        store.close()


# ---------------------------------------------------------------- HTML and Markdown


def test_html_inlines_each_image_as_a_data_uri_and_allows_nothing_else(history, photos):
    page = to_html(load_chats(history), ExportMedia(history.media))
    uri = "data:image/png;base64," + base64.b64encode(photos[0].original).decode()
    assert page.count(f'<img src="{uri}" alt="square.png"') == 2
    assert '<img src="data:image/jpeg;base64,' in page and 'alt="a photo [1].jpg"' in page
    assert "img-src data:" in page and "default-src 'none'" in page
    assert not re.search(r'<img[^>]+src="(?!data:)', page)  # nothing fetched
    assert "(empty)" not in page  # a message of images alone is not empty
    named = to_html(load_chats(history))  # without the store: named, not shown
    assert "<img" not in named and "[image: square.png]" in named


def test_markdown_links_images_written_beside_it(tmp_path, history, photos):
    target = tmp_path / "out.md"
    export_chats(history.path, None, "md", target)
    text = target.read_text()
    links = re.findall(r"!\[([^\]]*(?:\\\][^\]]*)*)\]\(([^)]+)\)", text)
    assert [alt for alt, _ in links] == ["square.png", "a photo \\[1\\].jpg", "square.png"]
    for _, link in links:
        assert (tmp_path / unquote(link)).read_bytes() in (photos[0].original, photos[1].original)
    assert links[1][1] == f"out-media/{photos[1].sha256}.jpg"
    plain = to_markdown(load_chats(history))  # to standard output: no folder, the images named
    assert "*\\[image: square.png\\]*" in plain and "![" not in plain


def test_one_file_per_chat_gets_its_own_media_folder(tmp_path, history, photos):
    out = tmp_path / "each"
    out.mkdir()
    assert export_chats(history.path, None, "md", out, each=True) == 2
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(folders) == 1 and folders[0].startswith("Pictures-") and folders[0].endswith("-media")
    assert len(list((out / folders[0]).iterdir())) == 2


# ---------------------------------------------------------------- ChatGPT


def chatgpt_export_with_images(folder: Path, *ids: str) -> Path:
    """conversations.json whose one user message points at the assets `ids`, in `folder`."""
    parts: list = [{"content_type": "image_asset_pointer", "asset_pointer": f"file-service://{i}", "size_bytes": 1,
                    "width": 10, "height": 10} for i in ids]
    conversation = chatgpt_conversation("c-images", "Pictures", [
        node("root", None),
        node("u1", "root", "user", None, created=1700000001.0,
             content={"content_type": "multimodal_text", "parts": [*parts, "What is this?"]}),
        node("a1", "u1", "assistant", "A red square.", created=1700000002.0),
    ], current="a1")
    path = folder / "conversations.json"
    path.write_text(json.dumps([conversation]))
    return path


def chatgpt_message(store: ChatStore):
    return store.list_messages(store.list_conversations()[0].id)[0]


def test_chatgpt_images_in_the_export_are_imported_and_missing_ones_said(tmp_path, photos):
    folder = tmp_path / "chatgpt"
    folder.mkdir()
    save(red_square(64, 48), folder / "file-Present1-square.png", "PNG")
    save(red_square(8, 8), folder / "file-Present12-other.png", "PNG")  # a longer id: not this one
    source = chatgpt_export_with_images(folder, "file-Present1", "file-Gone2")
    store, result = imported_into(tmp_path, source)
    try:
        assert len(result.imported) == 1 and result.notes == []
        message = chatgpt_message(store)
        assert message.content == "[image not in the export: file-Gone2]\nWhat is this?"
        assert message.images == (ImageRef(photos[0].sha256, "PNG", "file-Present1-square.png", 64, 48),)
        assert store.media.read(photos[0].sha256) == photos[0].original
    finally:
        store.close()


def test_chatgpt_images_in_a_folder_of_the_export_are_found(tmp_path):
    folder = tmp_path / "chatgpt"
    (folder / "user-abc").mkdir(parents=True)
    save(red_square(), folder / "user-abc" / "file_00000000aa-1234.webp", "WEBP")
    store, result = imported_into(tmp_path, chatgpt_export_with_images(folder, "file_00000000aa"))
    try:
        assert [i.format for i in chatgpt_message(store).images] == ["WEBP"]
    finally:
        store.close()


# ---------------------------------------------------------------- hostile


def _release(fifo: Path) -> None:
    """Open the FIFO's other end, so that a reader that did block (the bug) gets its end of file."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def _import_in_thread(path: Path, source: Path, fifo: Path) -> ImportResult:
    """Import `source` into the history at `path` on a thread of its own (with its own store, as the window's
    import job), which must end within seconds: a read of the FIFO would block it."""
    outcome: list = []

    def work() -> None:
        store = ChatStore(path, recover=False)
        try:
            outcome.append(import_file(store, source))
        finally:
            store.close()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(timeout=20)
    blocked = worker.is_alive()
    if blocked:
        _release(fifo)
        worker.join(timeout=20)
    assert not blocked, "the import waited on a FIFO"
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_in_place_of_an_image_beside_a_tailor_export_is_refused_by_name(tmp_path, history, photos):
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target)
    fifo = media_folder_of(target) / f"{photos[1].sha256}.jpg"
    fifo.unlink()
    os.mkfifo(fifo)
    path = tmp_path / "target" / "chats.sqlite3"
    result = _import_in_thread(path, target, fifo)
    store = ChatStore(path)
    try:
        assert len(result.imported) == 2
        assert "a photo [1].jpg is a FIFO (named pipe), not an image file" in result.notes[0]
        assert store.media.hashes() == {photos[0].sha256}
    finally:
        store.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_named_as_a_chatgpt_image_is_refused_by_name_and_its_message_kept(tmp_path):
    folder = tmp_path / "chatgpt"
    folder.mkdir()
    fifo = folder / "file-Pipe1-photo.png"
    os.mkfifo(fifo)
    source = chatgpt_export_with_images(folder, "file-Pipe1")
    path = tmp_path / "target" / "chats.sqlite3"
    result = _import_in_thread(path, source, fifo)
    store = ChatStore(path)
    try:
        assert len(result.imported) == 1
        assert "file-Pipe1-photo.png is a FIFO (named pipe), not an image file" in result.notes[0]
        message = chatgpt_message(store)
        assert message.images == () and message.content == "[image not imported: file-Pipe1]\nWhat is this?"
    finally:
        store.close()


def test_a_png_bomb_in_an_import_is_refused_by_name_before_it_is_decoded(tmp_path, history, photos):
    bomb = png_bomb()
    with pytest.raises(ValueError):
        image_from_bytes(bomb, name="bomb.png")  # what the import must meet: the intake's own refusal
    target = tmp_path / "chats.json"
    export_chats(history.path, None, "json", target, embed_media=True)
    document = json.loads(target.read_text())
    image = document["chats"][0]["messages"][0]["images"][0]
    image.update(name="bomb.png", data=base64.b64encode(bomb).decode(), sha256=hashlib.sha256(bomb).hexdigest())
    target.write_text(json.dumps(document))
    folder = tmp_path / "chatgpt"  # and one in a ChatGPT export's folder
    folder.mkdir()
    (folder / "file-Bomb1-big.png").write_bytes(bomb)
    store, result = imported_into(tmp_path, target)
    other, from_chatgpt = imported_into(tmp_path, chatgpt_export_with_images(folder, "file-Bomb1"), "other")
    try:
        assert "bomb.png is 30000 × 30000 pixels (900 megapixels)" in result.notes[0]
        assert store.media.hashes() == {photos[0].sha256, photos[1].sha256}  # the rest came in
        assert "file-Bomb1-big.png is 30000 × 30000 pixels" in from_chatgpt.notes[0]
        assert chatgpt_message(other).images == () and other.media.hashes() == set()
    finally:
        store.close()
        other.close()
