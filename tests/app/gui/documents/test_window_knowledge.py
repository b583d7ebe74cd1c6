"""A chat's knowledge in the window: a folder indexed from the Knowledge dialog in the background, chosen for the
chat, and each message then sent with the passages that answer it; the document budget of the settings caps
what documents take."""

from __future__ import annotations

import os
import re

from app.gui.documents.indexing_job import IndexingJob
from app.gui.documents.knowledge import KnowledgeDialog
from app.services.documents.knowledge import knowledge_path
from app.services.paths import AppPaths
from models.library import ModelStore
from tests.app.gui.documents.test_window_documents import send
from tests.app.gui.test_window import TIMEOUT_MS, messages
from tests.app.services.documents.makers import filler, pdf_with_pages

SECRET = "The harbour master keeps the spare key under the blue lantern."


def folder_of_notes(root):
    root.mkdir()
    (root / "harbour.md").write_text(f"# Harbour\n\n{filler(1, 300)}\n\n## Keys\n\n{SECRET}\n\n{filler(2, 300)}\n")
    for n in range(3, 8):
        (root / f"minutes-{n}.txt").write_text(filler(n, 600))
    pdf_with_pages(root / "manual.pdf", {}, 3)
    (root / "junk.txt").write_bytes(bytes(range(256)) * 64)  # binary under a text name: skipped, named
    os.symlink("/etc", root / "outside")  # a link out of the folder: not followed
    return root


def index_in_dialog(qtbot, window, folder, name="harbour") -> KnowledgeDialog:
    dialog = window.show_knowledge()
    qtbot.waitExposed(dialog)
    # The holdings of the list made when the run ended (the dialog's first list, with no index, is shown at
    # once: its holdings could come before the run ends, but then the job is still there).
    with qtbot.waitSignal(dialog.holdings_shown, timeout=TIMEOUT_MS,
                          check_params_cb=lambda *_a: dialog.job is None and dialog.list.count() == 1):
        assert dialog.index_folder(folder, name)
    return dialog


def test_a_folder_indexed_and_chosen_answers_each_message(qtbot, make_window, tmp_path):
    window = make_window()
    dialog = index_in_dialog(qtbot, window, folder_of_notes(tmp_path / "notes"))
    assert re.fullmatch(r"harbour · 7 documents, \d{2,} passages", dialog.list.item(0).text())
    assert "7 files indexed" in dialog.status.text() and "junk.txt" in dialog.status.text()
    assert not dialog.progress.isVisible() and dialog.index_button.isEnabled()
    with qtbot.waitSignal(dialog.chosen) as chosen:
        dialog.use_selected()
    assert chosen.args == ["harbour"] and window.session.current.settings.knowledge == "harbour"
    assert window.knowledge_button.text() == "Knowledge: harbour"
    reply = send(qtbot, window, "Where does the harbour master keep the spare key?")
    assert reply.state == "complete"
    user, _ = messages(window)
    assert user.content == "Where does the harbour master keep the spare key?"
    first = user.documents.sources[0]
    assert first.label.startswith("[1] harbour.md · passage") and SECRET in user.documents.block[first.start:first.end]
    assert user.documents.notes == ()  # nothing was attached: the passages are the knowledge's
    # Another chat starts without it; this one keeps it when opened again.
    window.new_conversation()
    assert window.session.current.settings.knowledge is None and window.knowledge_button.text() == "Knowledge"
    window.session.open_conversation(user.conversation_id)
    assert window.knowledge_button.text() == "Knowledge: harbour"


def test_a_knowledge_index_gone_keeps_the_message_in_the_box_and_says_why(qtbot, make_window, tmp_path):
    window = make_window(start=False)
    window.session.new_conversation()
    window.session.set_knowledge("vanished")
    notices: list[str] = []
    window.sending.notice.connect(notices.append)
    window.composer.setPlainText("Where is the key?")
    window.sending.submit("Where is the key?")
    qtbot.waitUntil(lambda: any("not sent" in n for n in notices), timeout=TIMEOUT_MS)
    assert "no knowledge index is named 'vanished'" in notices[-1]
    assert window.composer.toPlainText() == "Where is the key?" and not window.composer.isReadOnly()
    assert messages(window) == []


def test_cancelling_keeps_what_was_indexed_and_says_so(qtbot, tmp_path):
    data_dir = AppPaths.default().data_dir
    job = IndexingJob(data_dir, "early", folder_of_notes(tmp_path / "notes"))
    job.cancel()  # before the first file: the indexer stops where it looks first
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS) as finished:
        job.start()
    assert finished.args[0].report.cancelled and finished.args[0].report.indexed == []
    assert job.wait() and knowledge_path(data_dir, "early").is_file()


def test_a_name_that_cannot_be_one_is_said_in_the_dialog(qtbot, make_window, tmp_path):
    window = make_window(start=False)
    dialog = window.show_knowledge()
    assert not dialog.index_folder(tmp_path, "../escape")
    assert "is not a knowledge name" in dialog.status.text() and dialog.job is None


def test_the_settings_document_budget_caps_what_documents_take(qtbot, make_window, tmp_path):
    window = make_window()
    panel = window.settings_panel
    assert panel.document_budget.text() == "All that fits" and panel.settings().document_budget is None
    window.session.new_conversation()
    panel.document_budget.setValue(300)  # typed in the side panel
    panel.commit()
    assert window.session.current.settings.document_budget == 300
    pages = {1: f"{filler(1, 250)} {SECRET}", 2: filler(2, 250)}
    window.media_attach.add_files([pdf_with_pages(tmp_path / "two.pdf", pages, 2)])
    strip = window.media_attach.strip
    qtbot.waitUntil(lambda: len(strip.documents) == 1 and not strip.busy, timeout=TIMEOUT_MS)
    send(qtbot, window, "Where is the spare key kept?")
    user, _ = messages(window)
    (note,) = user.documents.notes
    assert "too long for the context" in note and user.documents.tokens <= 300


def test_with_an_embedding_model_in_the_library_passages_are_found_by_meaning(qtbot, make_window, tmp_path, tiny_bert):
    ModelStore(AppPaths.default().data_dir).import_gguf(tiny_bert)
    window = make_window()
    dialog = window.show_knowledge()
    qtbot.waitUntil(lambda: dialog.embed_model is not None, timeout=TIMEOUT_MS)
    assert "by their meaning" in dialog.meaning.text() and "tiny-bert.gguf" in dialog.meaning.text()
    with qtbot.waitSignal(dialog.holdings_shown, timeout=TIMEOUT_MS,
                          check_params_cb=lambda *_a: dialog.job is None and dialog.list.count() == 1):
        assert dialog.index_folder(folder_of_notes(tmp_path / "notes"), "harbour")
    assert re.search(r"\d+ passages embedded with tiny-bert\.gguf\.", dialog.status.text())
    dialog.use_selected()
    # No word of this question is in the folder: the words find nothing, the meaning still brings passages.
    reply = send(qtbot, window, "Qwxzv plimbok?")
    assert reply.state == "complete"
    user, _ = messages(window)
    assert user.documents is not None and len(user.documents.sources) >= 1


def test_without_an_embedding_model_the_dialog_suggests_one(qtbot, make_window):
    window = make_window(start=False)
    dialog = window.show_knowledge()
    qtbot.waitUntil(lambda: "Models window" in dialog.meaning.text(), timeout=TIMEOUT_MS)
    assert dialog.embed_model is None and "bge-small" in dialog.meaning.text()


def test_a_knowledge_of_a_few_files_and_files_added_to_it_later(qtbot, make_window, tmp_path):
    window = make_window(start=False)
    notes = folder_of_notes(tmp_path / "notes")
    dialog = window.show_knowledge()
    with qtbot.waitSignal(dialog.holdings_shown, timeout=TIMEOUT_MS,
                          check_params_cb=lambda *_a: dialog.job is None and dialog.list.count() == 1):
        assert dialog.index_folder([notes / "harbour.md", notes / "junk.txt"], "picked")
    assert "1 files indexed" in dialog.status.text() and "junk.txt" in dialog.status.text()
    assert re.fullmatch(r"picked · 1 documents, \d+ passages", dialog.list.item(0).text())
    with qtbot.waitSignal(dialog.holdings_shown, timeout=TIMEOUT_MS,
                          check_params_cb=lambda *_a: dialog.job is None and "2 documents" in dialog.list.item(0).text()):
        assert dialog.index_folder([notes / "minutes-3.txt"], "picked")  # added: the first file stays
