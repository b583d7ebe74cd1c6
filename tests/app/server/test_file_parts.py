"""Documents through `tailor serve`'s chat API as OpenAI's clients send them: `file` parts with the file inline
as a base64 data: URL; real PDFs (fpdf2), the real engine with the starter model (2,048 tokens of context)
and the official `openai` client; refused by name where they cannot be taken."""

from __future__ import annotations

import base64
from pathlib import Path

import openai
import pytest

from app.server.errors import ApiError
from app.server.image_parts import has_media_parts
from app.server.own_engine import OwnEngine
from app.server.params import parse_chat
from app.server.runner import ServerThread
from tests.app.server.conftest import MODEL, served_model
from tests.app.server.test_images import post
from tests.app.server.test_rejections import assert_error
from tests.app.services.documents.makers import encrypted_pdf, filler, pdf_with_pages

QUESTION = "What is the name of the lighthouse keeper's parrot?"
ANSWER = "The lighthouse keeper's parrot is named Archimedes Quill."


def file_part(path: Path, media_type: str = "application/pdf", name: str | None = None) -> dict:
    data = base64.b64encode(path.read_bytes()).decode()
    return {"type": "file", "file": {"filename": name or path.name, "file_data": f"data:{media_type};base64,{data}"}}


def ask(*parts: dict, max_tokens: int = 4) -> dict:
    return {"model": MODEL, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}, *parts]}]}


def test_a_long_pdf_puts_the_passage_of_page_37_before_the_question(tmp_path: Path, served_engine: OwnEngine):
    report = pdf_with_pages(tmp_path / "report.pdf", {37: f"{filler(37, 60)} {ANSWER}"}, 60)
    body = ask(file_part(report), max_tokens=64)
    assert has_media_parts(body)  # read off the event loop
    params = parse_chat(body, served_engine.model_info())
    (message,) = params.messages
    assert message.content.startswith("Answer from the documents below") and "as [n]" in message.content
    assert "[1] report.pdf, page 37\n" in message.content
    assert ANSWER in " ".join(message.content.split())
    assert message.content.endswith(f"\n\n{QUESTION}")
    assert "[1] report.pdf (whole)" not in message.content and len(message.content) < 2048 * 4


def test_the_openai_client_sends_a_file_and_its_text_reaches_the_model(tmp_path: Path, client: openai.OpenAI):
    notes = tmp_path / "notes.md"
    notes.write_text(f"# Keeper\n\n{ANSWER}\n")
    model = served_model(client)
    plain = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": QUESTION}])
    with_file = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, file_part(notes, "text/markdown")]}])
    assert with_file.usage.prompt_tokens > plain.usage.prompt_tokens + 20  # the note, whole, and the framing


def test_a_long_pdf_through_the_server_fits_the_context(tmp_path: Path, server: ServerThread):
    report = pdf_with_pages(tmp_path / "report.pdf", {37: f"{filler(37, 60)} {ANSWER}"}, 60)
    response = post(server, ask(file_part(report)))
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens"] + 4 <= 2048


@pytest.mark.parametrize("which", ["file_id", "encrypted", "no name", "unknown kind", "bad base64", "in a system"])
def test_a_file_that_cannot_be_taken_is_a_400_naming_it(tmp_path: Path, server: ServerThread, which: str):
    part: dict
    if which == "file_id":
        part = {"type": "file", "file": {"file_id": "file-abc123"}}
    elif which == "encrypted":
        part = file_part(encrypted_pdf(tmp_path / "secret.pdf"))
    elif which == "no name":
        part = {"type": "file", "file": {"file_data": "data:application/octet-stream;base64,AAAA"}}
    elif which == "unknown kind":
        part = {"type": "file", "file": {"filename": "movie.mkv", "file_data": "data:video/x-matroska;base64,AAAA"}}
    elif which == "bad base64":
        part = {"type": "file", "file": {"filename": "a.txt", "file_data": "data:text/plain;base64,@@@"}}
    else:
        part = file_part(encrypted_pdf(tmp_path / "secret.pdf"))
    body = ask(part)
    if which == "in a system":
        body["messages"].insert(0, {"role": "system", "content": [part]})
    response = post(server, body)
    error = response.json().get("error", {})
    expected = {
        "file_id": ("messages[0].content[1].file.file_id", "send the file inline as 'file_data'"),
        "encrypted": ("messages[0].content[1].file", "secret.pdf is encrypted"),
        "no name": ("messages[0].content[1].file.filename", "'filename' must name the file"),
        "unknown kind": ("messages[0].content[1].file", "movie.mkv is not a kind of document Tailor reads"),
        "bad base64": ("messages[0].content[1].file.file_data", "The base64 of a.txt is malformed"),
        "in a system": ("messages[0].content[0]", "Files go in user messages"),
    }[which]
    assert_error(response, 400, param=expected[0])
    assert expected[1] in error["message"]


def test_a_conversation_that_leaves_no_room_for_the_file_is_refused_by_name(tmp_path: Path,
                                                                            served_engine: OwnEngine):
    notes = tmp_path / "notes.txt"
    notes.write_text(ANSWER)
    body = ask(file_part(notes, "text/plain"), max_tokens=2040)
    with pytest.raises(ApiError) as refused:
        parse_chat(body, served_engine.model_info())
    assert refused.value.status == 400 and "No room for notes.txt" in refused.value.message
