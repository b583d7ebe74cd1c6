"""The streaming import: the JSON pull parser over chunk boundaries, a damaged file kept up to the damage with
where it broke, progress and cancel for the window, an import on a thread of its own, memory that does not
grow with the file, and a 100,000-message chat's exact round trip."""

from __future__ import annotations

import io
import json
import threading
import tracemalloc
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from app.services.history.store import ChatStore, Conversation, Message
from app.services.transfer.export import ChatRecord, load_chats, to_json
from app.services.transfer.importer import ImportProgress, import_file
from app.services.transfer.json_stream import JsonStream, StreamError
from tests.app.services.history.history_files import chats_of
from tests.fixtures.chatgpt.generate import write_export

DOCUMENTS = [
    '{"a": [1, 2.5e-3, -0, true, false, null], "b": {"c": "d\\u00e9\\n\\"q\\"", "e": []}, "f": {}}',
    '  [ "caf\u00e9 \u2192 \U0001f642", 123456789012345678901234567890, -1.25E+10, [[[]]], {"": ""} ]  ',
    '"just a string"',
    "\ufeff[1, 2]",  # a byte-order mark first
]


def _stream(data: str | bytes, chunk: int = 5) -> JsonStream:
    return JsonStream(io.BytesIO(data.encode("utf-8") if isinstance(data, str) else data), chunk_bytes=chunk)


def _walk(stream: JsonStream) -> object:
    """The value that starts here, rebuilt through items(), elements() and value()."""
    first = stream.peek()
    if first == "{":
        return {key: _walk(stream) for key in stream.items()}
    if first == "[":
        return [_walk(stream) for _ in stream.elements()]
    return stream.value()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 18])
@pytest.mark.parametrize("document", DOCUMENTS)
def test_any_chunk_size_reads_the_same_values(document: str, chunk: int):
    stream = _stream(document, chunk)
    assert _walk(stream) == json.loads(document.lstrip("\ufeff"))
    stream.expect_end()


def test_offsets_are_bytes_of_the_file():
    text = '["\u00e9\U0001f642", 7]'
    stream = _stream(text, 3)
    elements = stream.elements()
    next(elements)
    assert stream.value() == "\u00e9\U0001f642" and stream.offset == len(b'["') + 2 + 4 + 1
    next(elements)
    assert stream.peek() == "7" and stream.offset == len(text.encode()) - 2


@pytest.mark.parametrize("chunk", [2, 5, 1 << 18])
def test_every_cut_of_a_document_is_damage_never_a_value(chunk: int):
    document = DOCUMENTS[0]
    for end in range(len(document)):
        with pytest.raises(StreamError) as caught:
            stream = _stream(document[:end], chunk)
            _walk(stream)
            stream.expect_end()
        assert caught.value.reason == "the file ends early" or caught.value.reason.startswith("invalid JSON (")


@pytest.mark.parametrize(("text", "reason", "offset"), [
    ("[1, 2 3]", "invalid JSON (Expecting ',' delimiter)", 6),
    ('{"a" 1}', "invalid JSON (Expecting ':' delimiter)", 5),
    ('{"a": 1, 2}', "invalid JSON (Expecting property name enclosed in double quotes)", 9),
    ('["\u00e9", x]', "invalid JSON (Expecting value)", 7),
    ('["a\x01b"]', "invalid JSON (Invalid control character at)", 3),
    ("[1, 2", "the file ends early", 5),
    ('["abc', "the file ends early", 5),
    ("[1] [2]", "text after the end of the JSON", 4),
])
def test_damage_says_what_and_at_which_byte(text: str, reason: str, offset: int):
    stream = _stream(text, 2)
    with pytest.raises(StreamError) as caught:
        _walk(stream)
        stream.expect_end()
    assert (caught.value.reason, caught.value.offset) == (reason, offset)
    assert str(caught.value) == f"{reason} at byte {offset:,}"


def test_not_utf8_and_nesting_too_deep_are_damage():
    with pytest.raises(StreamError, match="not UTF-8 text at byte 4"):
        _walk(_stream(b'["ab\xff"]', 2))
    with pytest.raises(StreamError, match="not UTF-8 text at byte 4"):  # counted across a character the chunks cut
        _walk(_stream(b'["\xc3\xa9\xc3"]', 3))
    with pytest.raises(StreamError, match="nested too deeply"):
        _stream("[" * 100_000 + "]" * 100_000).value()
    with pytest.raises(StreamError, match="nested too deeply"):
        _stream("[" * 100_000 + "]" * 100_000).skip()


class _CountingFile(io.BytesIO):
    reads = 0

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        return super().read(size)


def test_a_large_value_costs_a_few_reads_not_one_per_chunk():
    text = json.dumps(["x" * 4_000_000])
    file = _CountingFile(text.encode())
    stream = JsonStream(file, chunk_bytes=4096)
    value = stream.value()
    assert len(value[0]) == 4_000_000 and file.reads < 20  # the read doubles: about log2(4 MB / 4 KiB) reads


# ---------------------------------------------------------------- whole imports


def _history(path: Path, chats: int) -> Path:
    """A Tailor export of `chats` small chats (two branches each), written through a real history."""
    store = ChatStore(path.with_suffix(".sqlite3"))
    for i in range(chats):
        chat = store.create_conversation(f"Chat {i}")
        question = store.add_message(chat.id, "user", f"question {i} \u00e9\U0001f642")
        store.add_message(chat.id, "assistant", f"answer {i}")
        store.add_message(chat.id, "assistant", f"answer {i}, again", parent_id=question.id)
    path.write_text(to_json(load_chats(store)), encoding="utf-8")
    store.close()
    return path


@pytest.fixture
def target(tmp_path: Path):
    store = ChatStore(tmp_path / "target.sqlite3")
    mine = store.create_conversation("Mine")
    store.add_message(mine.id, "user", "keep me")
    yield store
    store.close()


def _chat_starts(data: bytes) -> list[int]:
    """The byte offsets where each chat of a Tailor export starts."""
    return [i + 5 for i in range(len(data)) if data.startswith(b'\n    {\n      "created"', i)]


def test_a_cut_file_keeps_the_chats_before_the_cut_and_says_where(tmp_path: Path, target: ChatStore):
    data = _history(tmp_path / "all.json", 30).read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: _chat_starts(data)[19] + 300])  # inside chat 20
    result = import_file(target, cut)
    assert len(result.imported) == 19 and result.problems == []
    assert result.error == (f"{cut} breaks in chat 20 at byte {cut.stat().st_size:,} (the file ends early); "
                            "the 19 chat(s) were imported before it")
    assert ("Mine", ["keep me"]) in chats_of(target) and len(target.list_conversations()) == 20
    again = import_file(target, tmp_path / "all.json")  # the whole file later: the rest, nothing twice
    assert (len(again.imported), len(again.skipped), again.error) == (11, 19, None)


def test_invalid_json_or_bytes_part_way_keep_the_chats_before(tmp_path: Path, target: ChatStore):
    data = _history(tmp_path / "all.json", 10).read_bytes()
    sixth = _chat_starts(data)[5]
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(data[:sixth] + b"xyz " + data[sixth:])
    result = import_file(target, garbage)
    assert len(result.imported) == 5
    assert result.error == (f"{garbage} breaks in chat 6 at byte {sixth:,} (invalid JSON (Expecting value)); "
                            "the 5 chat(s) were imported before it")
    eighth = data.index(b"question 7")
    latin = tmp_path / "latin.json"
    latin.write_bytes(data[:eighth] + b"\xe9" + data[eighth + 1:])
    result = import_file(target, latin)
    assert len(result.skipped) == 5 and len(result.imported) == 2
    assert f"breaks in chat 8 at byte {eighth:,} (not UTF-8 text)" in result.error
    after = tmp_path / "after.json"
    after.write_bytes(data + b"\n{}")
    result = import_file(target, after)
    assert result.error == f"{after} has text after the end of the JSON at byte {len(data) + 1:,}; its 3 chat(s) were imported"


def test_a_cut_chatgpt_export_keeps_the_conversations_before(tmp_path: Path, target: ChatStore):
    path = tmp_path / "conversations.json"
    write_export(path, 12, 12 * 20_000)
    data = path.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 2 // 3])
    result = import_file(target, cut)
    assert result.source == "chatgpt" and 0 < len(result.imported) < 12
    assert result.error.startswith(f"{cut} breaks in conversation {len(result.imported) + 1} at byte ")
    assert result.error.endswith(f"(the file ends early); the {len(result.imported)} chat(s) were imported before it")


def test_progress_goes_from_nothing_to_everything(tmp_path: Path, target: ChatStore):
    path = _history(tmp_path / "all.json", 120)
    seen: list[ImportProgress] = []
    result = import_file(target, path, on_progress=seen.append)
    total = path.stat().st_size
    assert len(result.imported) == 120
    assert seen[0] == ImportProgress(0, total, 0) and seen[-1] == ImportProgress(total, total, 120)
    assert all(a.bytes_done <= b.bytes_done and a.chats_done <= b.chats_done for a, b in zip(seen, seen[1:], strict=False))
    assert 120 // 25 <= len(seen) <= 120 // 25 + 100 + 2
    with pytest.raises(FrozenInstanceError):
        seen[0].chats_done = 3  # type: ignore[misc]


def test_cancel_stops_after_the_current_chat_and_keeps_what_was_imported(tmp_path: Path, target: ChatStore):
    path = _history(tmp_path / "all.json", 40)
    asked = []

    def cancelled() -> bool:
        asked.append(len(target.list_conversations()))  # asked after each chat, that chat in the history
        return len(asked) == 10

    result = import_file(target, path, cancelled=cancelled)
    assert result.cancelled and len(result.imported) == 10 and result.error is None
    assert asked == list(range(2, 12)) and len(target.list_conversations()) == 11
    rest = import_file(target, path)
    assert (len(rest.imported), len(rest.skipped), rest.cancelled) == (30, 10, False)


def test_an_import_on_its_own_thread_and_store_while_the_window_reads(tmp_path: Path, target: ChatStore):
    path = _history(tmp_path / "all.json", 60)
    halfway, go_on = threading.Event(), threading.Event()
    results = []

    def report(progress: ImportProgress) -> None:
        if progress.chats_done >= 25 and not halfway.is_set():
            halfway.set()
            assert go_on.wait(30)

    def work() -> None:
        store = ChatStore(target.path)  # its own connection: SQLite's are per thread
        try:
            results.append(import_file(store, path, on_progress=report))
        finally:
            store.close()

    worker = threading.Thread(target=work)
    worker.start()
    assert halfway.wait(30)
    part_way = len(target.list_conversations())  # the window's store reads while the import waits mid-way
    go_on.set()
    worker.join(30)
    assert 1 + 25 <= part_way < 61 and len(results[0].imported) == 60
    assert len(target.list_conversations()) == 61


def test_memory_holds_a_chat_not_the_file(tmp_path: Path, target: ChatStore):
    path = tmp_path / "conversations.json"
    written = write_export(path, 150, 6_000_000)
    tracemalloc.start()
    try:
        result = import_file(target, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.imported) == 150
    # About the chunk, its text and the buffer (1.2 MB in all here), and one chat, whatever the file's size
    # (Python's own allocations; reading the file whole would take several times its size).
    assert peak < 1_500_000 + 3 * written.largest_chat_bytes < written.bytes / 3


def test_a_chat_of_100000_messages_goes_round_exactly(tmp_path: Path):
    messages = [Message(i, 0, "user" if i % 2 else "assistant", f"message {i}", "complete", None, 1000.0 + i,
                        parent_id=(i - 1 if i % 1000 else i - 2) if i > 1 else None)  # a version every 1,000
                for i in range(1, 100_001)]
    record = ChatRecord("0b7f2f3e-8a4d-4c1b-9f3e-2d1c0b9a8f7e", Conversation(0, "Long", 1.0, 2.0), tuple(messages),
                        leaf=100_000)
    path = tmp_path / "long.json"
    path.write_text(to_json([record]), encoding="utf-8")
    store = ChatStore(tmp_path / "history.sqlite3")
    assert import_file(store, path).imported == ["Long"]
    (chat,) = store.list_conversations()
    assert store.message_count(chat.id) == 100_000 and len(store.list_messages(chat.id)) == 100_000 - 100
    assert to_json(load_chats(store)).encode() == path.read_bytes()
    store.close()
