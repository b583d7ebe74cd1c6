"""OpenAI's `file` content parts: a document sent inline, `{"type": "file", "file": {"filename": "report.pdf",
"file_data": "data:application/pdf;base64,..."}}`, read here and put into the model's context.

A document goes through the same reading as the window's and the CLI's (app/services/documents: the kind by
the file name's extension, every cap, encryption and binary junk refused), from the decoded bytes in memory;
parse_chat runs off the event loop when a request carries one. A `file_id` (a file uploaded to OpenAI's
Files API) is refused with what to send instead: this server keeps no uploaded files.

What goes in is app/chat/document_context.py's: the request's documents whole when all fit the context the
conversation and the reply leave, else the passages that answer the last user message. The server counts
with the context guard's estimate (it errs high), as the request is read before its model is lent and no
tokenizer is at hand. The block goes before the text of the last message that carries files.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass, replace

from app.chat.context_guard import estimate_tokens
from app.chat.document_context import document_budget, document_context
from app.server.errors import ApiError, bad_param
from app.services.chat_defaults import DEFAULT_MAX_TOKENS
from app.services.documents.document import Document
from app.services.documents.errors import DocumentRefused, FileTooLarge
from app.services.documents.extract import extract_open, kind_or_refuse
from app.services.documents.limits import DEFAULT_LIMITS
from engine.protocol import ChatMessage

_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[^;,]*)*);base64,", re.ASCII)
# The file name a part without one is given, by the media type of its data: URL.
_NAMES = {"application/pdf": "document.pdf", "text/plain": "document.txt", "text/markdown": "document.md",
          "text/html": "document.html", "text/csv": "document.csv",
          "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "document.docx"}
# Below this many tokens left for documents, none can be said to have gone in: the request is refused.
MIN_DOCUMENT_BUDGET = 64


@dataclass(frozen=True, slots=True)
class Attached:
    """The documents one message carried: its index in `messages`, and each document read."""

    message: int
    documents: tuple[Document, ...]


def file_part(part: dict, param: str) -> Document:
    """The document of one `file` part (ApiError 400 naming the part and the reason otherwise)."""
    value = part.get("file")
    if not isinstance(value, dict):
        raise bad_param(f"{param}.file", f"'{param}.file' must be an object with 'filename' and 'file_data' "
                                         "(a base64 data: URL).")
    if value.get("file_id") is not None and value.get("file_data") is None:
        raise bad_param(f"{param}.file.file_id", "This server keeps no uploaded files, so a 'file_id' names "
                                                 "nothing here: send the file inline as 'file_data' "
                                                 "(data:application/pdf;base64,...) with its 'filename'.")
    url = value.get("file_data")
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        raise bad_param(f"{param}.file.file_data", "'file_data' must be the file as a base64 data: URL "
                                                   "(data:application/pdf;base64,...).")
    name = value.get("filename") or _NAMES.get((match["type"] or "").lower())
    if not isinstance(name, str) or not name.strip():
        raise bad_param(f"{param}.file.filename", "'filename' must name the file, with its extension "
                                                  "(report.pdf): it tells how the file is read.")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]  # a name, never a path
    encoded = url[match.end():]
    try:
        kind = kind_or_refuse(name)
        if len(encoded) // 4 * 3 > DEFAULT_LIMITS.max_file_bytes:
            raise FileTooLarge(name, f"is larger than {DEFAULT_LIMITS.max_file_bytes:,} bytes (MAX_FILE_BYTES)")
        try:
            data = base64.b64decode("".join(encoded.split()), validate=True)
        except (binascii.Error, ValueError):
            raise bad_param(f"{param}.file.file_data", f"The base64 of {name} is malformed.") from None
        return extract_open(name, kind, io.BytesIO(data), DEFAULT_LIMITS)
    except DocumentRefused as exc:
        raise bad_param(f"{param}.file", f"{exc}.") from None


def with_documents(messages: tuple[ChatMessage, ...], attached: list[Attached], n_ctx: int,
                   max_tokens: int | None) -> tuple[ChatMessage, ...]:
    """`messages` with the attached documents' block before the text of the last message that carried files.

    Args:
        max_tokens: the request's (None when it set none: the default reply length is kept free).
    """
    if not attached:
        return messages
    question = next((m.content for m in reversed(messages) if m.role == "user"), "")
    conversation = sum(estimate_tokens(m.content) for m in messages)
    budget = document_budget(n_ctx, conversation, min(max_tokens or DEFAULT_MAX_TOKENS, n_ctx))
    documents = [d for a in attached for d in a.documents]
    if budget < MIN_DOCUMENT_BUDGET:
        names = ", ".join(d.name for d in documents)
        raise ApiError(400, f"No room for {names}: the conversation and max_tokens leave {budget} tokens of the "
                            f"{n_ctx}-token context.", param="messages", code="context_length_exceeded")
    context = document_context(documents, question, budget, estimate_tokens)
    at = attached[-1].message
    carrier = messages[at]
    return (*messages[:at], replace(carrier, content=context.message(carrier.content)), *messages[at + 1:])
