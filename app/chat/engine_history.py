"""The conversation as the engine is sent it: the system prompt, then each message, a reply's tool steps
expanded into the turns the model wrote and read (an assistant turn with its calls, a tool turn per call),
a user message's images as its media (read through the caller's loader: stored_images.StoredImages)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.mcp.result_cut import for_model
from app.services.history.store import ImageRef, Message
from app.services.history.tool_steps import ToolStep
from app.services.media.errors import MediaRefused, StoredMediaError
from engine.protocol import ChatMessage, Media, ToolCall

# Reads a stored image for the engine; raises StoredMediaError (missing, damaged), MediaRefused (no image
# the intake takes now) or ValueError (a hash that is none).
ImageLoader = Callable[[ImageRef], Media]


@dataclass(frozen=True, slots=True)
class UnavailableImage:
    """A stored image a message was sent without: which message, which image, and why (one line)."""

    message_id: int
    image: ImageRef
    reason: str

    def __str__(self) -> str:
        return f"{self.image.name}: {self.reason}"


def engine_messages(messages: Iterable[Message], system_prompt: str, images: ImageLoader | None = None,
                    unavailable: list[UnavailableImage] | None = None) -> list[ChatMessage]:
    """What the model reads for the branch `messages`: empty messages are left out (a reply that wrote
    nothing; a message with images is not empty), a reply's steps come before its answer.

    Args:
        images: reads a message's stored images, in order, as its `media` (a StoredImages, which decodes
            each once); None sends none (a model without a projector).
        unavailable: each image that could not be read is added here. A missing or damaged file never loses
            the chat: its message goes without that image (and with its other images and its text), and
            the caller tells the user which (`str()` of each: "photo.jpg: The image … is not in …").
    """
    history = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    for message in messages:
        for step in message.tool_steps:
            history.extend(step_messages(step))
        media = _media(message, images, unavailable) if images is not None and message.images else ()
        if message.content or media:
            history.append(ChatMessage(message.role, message.content, media=media))
    return history


def _media(message: Message, images: ImageLoader, unavailable: list[UnavailableImage] | None) -> tuple[Media, ...]:
    found = []
    for ref in message.images:
        try:
            found.append(images(ref))
        except (StoredMediaError, MediaRefused, ValueError) as exc:
            if unavailable is not None:
                unavailable.append(UnavailableImage(message.id, ref, str(exc)))
    return tuple(found)


def step_messages(step: ToolStep) -> list[ChatMessage]:
    """One tool step as turns: what the model wrote with its calls, then each call's result (in the calls'
    order, which is the order the model gave them), its first 64 KiB: the card keeps the whole."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in step.calls)
    turns = [ChatMessage("assistant", step.text, tool_calls=calls)]
    turns.extend(ChatMessage("tool", for_model(c.result), tool_call_id=c.id, name=c.name) for c in step.calls)
    return turns
