"""The responses the server keeps, in memory, for `previous_response_id` and `GET /v1/responses/{id}`.

A response is kept (unless its request said `store: false`) with the conversation that led to it and
its answer, as the engine's ChatMessages: a follow-up naming it continues that conversation. The store
is bounded by count and by bytes; the oldest go first. Nothing survives the server.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from app.server.errors import ApiError
from engine.protocol import ChatMessage

MAX_RESPONSES = 1000
MAX_BYTES = 256 << 20


@dataclass(slots=True, frozen=True)
class StoredResponse:
    """A finished response: its object (as sent) and its conversation (the input turns, then the answer),
    without the request's `instructions` (OpenAI does not carry them over to a follow-up)."""

    response: dict[str, Any]
    conversation: tuple[ChatMessage, ...]
    size: int


def stored(response: dict[str, Any], conversation: tuple[ChatMessage, ...]) -> StoredResponse:
    """A response to keep, with the bytes it holds (its JSON, and the text and media of its turns)."""
    size = len(json.dumps(response, ensure_ascii=False))
    for message in conversation:
        size += len(message.content) + sum(len(m.data) for m in message.media)
        size += sum(len(c.arguments) + len(c.name) + len(c.id) for c in message.tool_calls)
    return StoredResponse(response, conversation, size)


class ResponseStore:
    """Finished responses by id, the newest kept: at most `max_count` of them and `max_bytes` in all."""

    def __init__(self, max_count: int = MAX_RESPONSES, max_bytes: int = MAX_BYTES):
        self.max_count, self.max_bytes = max_count, max_bytes
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # requests with images are parsed off the event loop

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._bytes

    def put(self, item: StoredResponse) -> None:
        """Keep `item` (one larger than the whole store is not kept), dropping the oldest to make room."""
        if item.size > self.max_bytes:
            return
        with self._lock:
            self._items[item.response["id"]] = item
            self._bytes += item.size
            while len(self._items) > self.max_count or self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.size

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            return self._items.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            item = self._items.pop(response_id, None)
            if item is not None:
                self._bytes -= item.size
            return item is not None

    def find(self, response_id: str, param: str | None = None) -> StoredResponse:
        """The stored response `response_id`, or a 404 naming it (and the field that named it)."""
        item = self.get(response_id)
        if item is None:
            raise self.missing(response_id, param)
        return item

    def missing(self, response_id: str, param: str | None = None) -> ApiError:
        """The 404 for a response that is not stored here."""
        return ApiError(404, f"No response '{response_id}' is stored here: responses are kept in memory while the "
                             f"server runs (the newest {self.max_count:,}), and not at all when sent with store: "
                             "false.", param=param, code="response_not_found")
