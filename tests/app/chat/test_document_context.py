"""document_context: attached documents whole when they fit the budget, else the passages that answer the
question, numbered and traced back to their file, page and offsets. Real PDFs (fpdf2), real SQLite; tokens
by the chunker's estimate (the engine's count is tested through `tailor chat --file`)."""

from __future__ import annotations

from pathlib import Path

from app.chat.document_context import INSTRUCTIONS, document_budget, document_context
from app.services.documents.chunking import estimate_tokens
from app.services.documents.extract import extract_document
from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import index_folder
from tests.app.services.documents.makers import filler, pdf_with_pages

ANSWER = "The lighthouse keeper's parrot is named Archimedes Quill."


def test_documents_that_fit_go_in_whole_each_marked_and_numbered(tmp_path: Path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Garden\n\nThe tomatoes went in on the third of May.\n")
    report = extract_document(pdf_with_pages(tmp_path / "report.pdf", {2: ANSWER}, 3))
    context = document_context([extract_document(notes), report], "What is the parrot called?", 5_000)
    assert [(s.number, s.name, s.whole, s.page) for s in context.sources] == [
        (1, "notes.md", True, None), (2, "report.pdf", True, None)]
    assert context.sources[1].end == len(report.text)
    assert [n.line() for n in context.notes] == [
        f"notes.md · {estimate_tokens(extract_document(notes).text):,} tokens, whole",
        f"report.pdf · 3 pages · {estimate_tokens(report.text):,} tokens, whole"]
    assert context.text.startswith(INSTRUCTIONS) and "cite the passages you use as [n]" in context.text
    assert "[1] notes.md (whole)\nGarden" in context.text and "[2] report.pdf (whole)" in context.text
    assert ANSWER in _words(context.text)
    assert context.message("Who?").endswith(f"{report.text}\n\nWho?")
    assert context.tokens <= 5_000


def test_a_long_pdf_gives_the_passage_of_page_37_within_the_budget(tmp_path: Path):
    report = extract_document(pdf_with_pages(tmp_path / "report.pdf", {37: f"{filler(37, 60)} {ANSWER}"}, 60))
    budget = 2_000
    assert estimate_tokens(report.text) > budget
    context = document_context([report], "What is the name of the lighthouse keeper's parrot?", budget)
    (note,) = context.notes
    assert not note.whole and note.pages == 60 and note.passages == len(context.sources) >= 1
    assert note.line() == (f"report.pdf · 60 pages · {note.tokens:,} tokens: too long for the context; "
                           f"{note.passages} passage{'s' * (note.passages != 1)} retrieved")
    first = context.sources[0]
    assert (first.number, first.name, first.page, first.whole) == (1, "report.pdf", 37, False)
    assert ANSWER in _words(report.text[first.start:first.end])  # the offsets point at the passage
    assert "[1] report.pdf, page 37\n" in context.text and ANSWER in _words(context.text)
    assert context.tokens <= budget and sum(s.tokens for s in context.sources) <= budget


def test_a_question_no_passage_matches_says_so_and_sends_nothing(tmp_path: Path):
    report = extract_document(pdf_with_pages(tmp_path / "report.pdf", {}, 30))
    context = document_context([report], "zeppelin xylophone", 500)
    assert context.text == "" and context.sources == ()
    assert context.notes[0].line().endswith("too long for the context; no passage matched the question")
    assert context.message("zeppelin xylophone") == "zeppelin xylophone"


def test_knowledge_passages_fill_the_budget_the_attachments_leave(tmp_path: Path):
    folder = tmp_path / "knowledge"
    folder.mkdir()
    pdf_with_pages(folder / "manual.pdf", {5: f"{filler(5, 40)} {ANSWER}"}, 12)
    (folder / "other.txt").write_text("Unrelated: the ferry leaves at noon.")
    with DocumentIndex(tmp_path / "k.sqlite3") as index:
        index_folder(index, folder)
        attached = tmp_path / "todo.txt"
        attached.write_text("Feed the parrot before noon.")
        context = document_context([extract_document(attached)], "What is the parrot named?", 1_500,
                                   knowledge=index)
    first, second = context.sources[:2]
    assert (first.name, first.whole) == ("todo.txt", True)
    assert (second.number, second.name, second.page, second.whole) == (2, "manual.pdf", 5, False)
    assert second.path == str(folder / "manual.pdf")
    assert [n.name for n in context.notes] == ["todo.txt"]  # a knowledge index's files are not attachments


def test_the_budget_is_the_context_less_the_conversation_the_reply_and_a_margin():
    assert document_budget(8192, 100, 512, margin=64) == 8192 - 100 - 512 - 64
    assert document_budget(1024, 900, 512) == 0


def _words(text: str) -> str:
    """The text with its line breaks (a PDF's wrapped lines) as spaces."""
    return " ".join(text.split())
