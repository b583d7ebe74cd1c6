"""Documents in the window, end to end with the real engine and the starter model: a PDF attached becomes a chip,
goes with the question whole when it fits (counted by the model's tokenizer) or as the passages that answer it
when it does not, is kept with the message as sent, and shows under the message."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices

from app.chat.engine_history import engine_messages
from tests.app.conftest import QUICK, with_load
from tests.app.gui.dialogs.test_crash import OpenedUrls
from tests.app.gui.test_window import TIMEOUT_MS, messages
from tests.app.services.documents.makers import filler, pdf_with_pages

SECRET = "The harbour master keeps the spare key under the blue lantern."


def send(qtbot, window, question: str):
    window.composer.setFocus()
    qtbot.keyClicks(window.composer, question)
    with qtbot.waitSignal(window.controller.stream_finished, timeout=TIMEOUT_MS) as finished:
        qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    return finished.args[0]


def attach(qtbot, window, *paths) -> None:
    strip = window.media_attach.strip
    window.media_attach.add_files(list(paths))
    qtbot.waitUntil(lambda: len(strip.documents) == len(paths) and not strip.busy, timeout=TIMEOUT_MS)


def test_a_pdf_that_fits_goes_whole_and_stays_with_the_message(qtbot, make_window, tmp_path):
    window = make_window()
    pdf = pdf_with_pages(tmp_path / "report.pdf", {2: SECRET}, 3)
    strip = window.media_attach.strip
    window.media_attach.add_files([pdf])
    # Said at once, before the pool thread can have read it (its outcome comes through this thread's loop).
    assert strip.isVisibleTo(window) and strip.reading.text() == "Reading report.pdf…"
    qtbot.waitUntil(lambda: len(strip.documents) == 1 and not strip.busy, timeout=TIMEOUT_MS)
    assert not strip.reading.isVisibleTo(strip)
    assert strip.isVisible() and strip.entries[0].label.text() == "report.pdf · 3 pages"
    original = pdf.read_bytes()
    pdf.unlink()  # gone before Send: what was read when it was attached goes, and the window says so
    notices: list[str] = []
    window.sending.notice.connect(notices.append)
    reply = send(qtbot, window, "Where is the spare key?")
    assert "report.pdf was deleted or moved after being attached: what was read then was sent." in notices
    assert reply.state == "complete"
    assert strip.documents == () and not strip.isVisible() and window.composer.toPlainText() == ""
    user, _ = messages(window)
    assert user.content == "Where is the spare key?"
    (note,) = user.documents.notes
    assert note.startswith("report.pdf · 3 pages · ") and note.endswith("tokens, whole")
    assert SECRET in user.documents.block
    # What the model read: the block, then the question; its prompt counted every token of the block.
    sent = engine_messages(messages(window), QUICK.system_prompt)
    assert sent[1].content == f"{user.documents.block}\n\nWhere is the spare key?"
    assert reply.stats["prompt_tokens"] > user.documents.tokens > 100
    assert note in window.chat.plain_text() and "[1] report.pdf · whole" in window.chat.plain_text()
    # The original, kept as attached: linked under the message, opened from the history's media store.
    (kept,) = user.files
    assert (kept.format, kept.name) == ("PDF", "report.pdf") and window.session.store.media.read(kept.sha256) == original
    assert "Attached: report.pdf" in window.chat.plain_text()
    opened = OpenedUrls()
    QDesktopServices.setUrlHandler("file", opened, "open")
    try:
        window.chat.transcript_actions.open_link(QUrl(f"tailor-file:{kept.sha256}"))
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [u.toLocalFile() for u in opened.urls] == [str(window.session.store.media.path_of(kept.sha256))]
    # The next question about it is warm: the block is the prefix the engine kept.
    again = send(qtbot, window, "And who keeps it?")
    assert again.stats["cached_tokens"] >= reply.stats["prompt_tokens"] > user.documents.tokens
    # Deleting the chat removes the original no other message names (at once: no other process puts files here).
    window.session.store.media_grace_s = 0
    window.session.delete_conversation(user.conversation_id)
    assert window.session.store.media.path_of(kept.sha256) is None


def test_a_document_longer_than_the_context_goes_as_the_passages_that_answer(qtbot, make_window, tmp_path):
    window = make_window(settings=with_load(QUICK, n_ctx=1024))
    pages = {n: filler(n, 400) for n in range(1, 41)}
    pages[37] = f"{filler(37, 150)} {SECRET} {filler(38, 150)}"
    attach(qtbot, window, pdf_with_pages(tmp_path / "manual.pdf", pages, 40))
    reply = send(qtbot, window, "Where does the harbour master keep the spare key?")
    assert reply.state == "complete"
    user, _ = messages(window)
    (note,) = user.documents.notes
    assert "too long for the context" in note and "retrieved" in note
    first = user.documents.sources[0]
    assert "page 37" in first.label and SECRET in user.documents.block[first.start:first.end]
    assert reply.stats["prompt_tokens"] + QUICK.max_tokens <= 1024  # the block fitted the context it was made for


def test_a_file_that_is_no_document_is_named_and_nothing_is_attached(qtbot, make_window, tmp_path):
    window = make_window(start=False)
    notices: list[str] = []
    window.media_attach.notice.connect(notices.append)
    junk = tmp_path / "notes.txt"
    junk.write_bytes(bytes(range(256)) * 64)
    window.media_attach.add_files([junk])
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=TIMEOUT_MS)
    assert "notes.txt" in notices[0] and window.media_attach.strip.documents == ()
