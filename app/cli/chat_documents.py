"""`--file FILE` and `--knowledge NAME` of `tailor chat`: documents for the message.

The files are read and checked (app/services/documents: caps, encryption, binary junk) before any model
loads, so a refused one is one line at once. Once the model is loaded, its context and its tokenizer say
what fits: the files go in whole when all of them fit the context the conversation and the reply leave,
else the passages that answer the question (app/chat/document_context.py); a knowledge index adds its
passages in the room left. What went in is said on stderr: one line per file, then one per passage [n].
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.chat.document_context import DocumentContext, document_budget, document_context
from app.chat.engine_tokens import EngineTokens, TokenCountFailed
from app.cli.errors import CliError
from app.services.documents.document import Document
from app.services.documents.embedder import embedding_models
from app.services.documents.errors import DocumentRefused
from app.services.documents.extract import extract_document
from app.services.documents.index.store import DocumentIndex
from app.services.documents.knowledge import KnowledgeError, open_knowledge
from app.services.documents.semantic import QuestionEmbedders
from engine.protocol import ChatMessage
from models.library import ModelStore


def add_document_arguments(parser: Any) -> None:
    parser.add_argument(
        "--file", type=Path, action="append", default=[], metavar="FILE",
        help="a document the message carries (text, Markdown, code, HTML, PDF, DOCX, CSV; repeatable): whole when "
        "it fits the context, else the passages that answer the prompt, cited as [n]",
    )
    parser.add_argument(
        "--knowledge", metavar="NAME",
        help="answer from the passages of a knowledge index (made by `tailor index FOLDER --name NAME`)",
    )


@dataclass(slots=True)
class MessageDocuments:
    """The --file documents, read, and the --knowledge index, opened (with what embeds questions for it, when its
    passages were embedded); close() closes both."""

    documents: list[Document]
    knowledge: DocumentIndex | None
    questions: QuestionEmbedders | None = None
    _said: set[str] = field(default_factory=set)

    @classmethod
    def read(cls, args: argparse.Namespace, data_dir: Path) -> MessageDocuments | None:
        """The documents of the options (None without any), each checked: CliError, one line, for a refused
        file or an unknown knowledge name."""
        if not args.file and not args.knowledge:
            return None
        try:
            documents = [extract_document(path) for path in args.file]
        except DocumentRefused as exc:
            raise CliError(str(exc)) from None
        for document in documents:
            for warning in document.warnings:
                print(f"tailor: {document.name}: {warning}", file=sys.stderr)
        try:
            knowledge = open_knowledge(data_dir, args.knowledge) if args.knowledge else None
        except KnowledgeError as exc:
            raise CliError(str(exc)) from None
        questions = QuestionEmbedders(lambda: embedding_models(ModelStore(data_dir))) if knowledge is not None else None
        return cls(documents, knowledge, questions)

    def close(self) -> None:
        if self.knowledge is not None:
            self.knowledge.close()
        if self.questions is not None:
            self.questions.close()

    def into(self, messages: list[ChatMessage], engine: Any, n_ctx: int, max_tokens: int) -> list[ChatMessage]:
        """`messages` with the documents put before the last one's text (the question), counted by `engine`'s
        tokenizer; what went in said on stderr."""
        question = messages[-1]
        try:
            tokens = EngineTokens(engine)
            budget = document_budget(n_ctx, tokens.prompt(messages), max_tokens)
            ranking = self._ranking(question.content)
            context = document_context(self.documents, question.content, budget, tokens, knowledge=self.knowledge,
                                       knowledge_ranking=ranking)
        except TokenCountFailed as exc:
            raise CliError(str(exc)) from None
        _say(context)
        return [*messages[:-1], replace(question, content=context.message(question.content))]


    def _ranking(self, question: str) -> list[int] | None:
        """The knowledge's passages nearest the question by meaning (None: by words alone; why is said once)."""
        if self.knowledge is None or self.questions is None:
            return None
        ranking, why = self.questions.ranking(self.knowledge, question)
        if why is not None and why not in self._said:
            self._said.add(why)
            print(f"tailor: knowledge: {why}", file=sys.stderr)
        return ranking


def _say(context: DocumentContext) -> None:
    for note in context.notes:
        print(f"tailor: {note.line()}", file=sys.stderr)
    for source in context.sources:
        print(f"tailor: {source.label()}", file=sys.stderr)
    if not context.sources:
        print("tailor: no document passage went into the message", file=sys.stderr)
