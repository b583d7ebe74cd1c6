"""The conversation as the engine is sent it: the system prompt, then each message, a reply's tool steps
expanded into the turns the model wrote and read (an assistant turn with its calls, a tool turn per call),
a user message's images and then its audio clips as its media (read through the caller's loaders:
stored_images.StoredImages, stored_clips.StoredClips), and the documents it was sent with before its text."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.mcp.result_cut import for_model
from app.services.history.store import AudioRef, ImageRef, Message
from app.services.history.tool_steps import ToolStep
from app.services.media.errors import MediaRefused, StoredMediaError
from engine.protocol import ChatMessage, Media, ToolCall

# Reads a stored image for the engine; raises StoredMediaError (missing, damaged), MediaRefused (no image
# the intake takes now) or ValueError (a hash that is none).
ImageLoader = Callable[[ImageRef], Media]
# Reads a stored clip for the engine (at the rate the model hears); raises as ImageLoader does.
ClipLoader = Callable[[AudioRef], Media]


@dataclass(frozen=True, slots=True)
class UnavailableMedia:
    """A stored image or clip a message was sent without: which message, which one, and why (one line)."""

    message_id: int
    ref: ImageRef | AudioRef
    reason: str

    def __str__(self) -> str:
        return f"{self.ref.name}: {self.reason}"


def engine_messages(messages: Iterable[Message], system_prompt: str, images: ImageLoader | None = None,
                    unavailable: list[UnavailableMedia] | None = None,
                    clips: ClipLoader | None = None) -> list[ChatMessage]:
    """What the model reads for the branch `messages`: empty messages are left out (a reply that wrote
    nothing; a message with images or clips is not empty), a reply's steps come before its answer.

    Args:
        images: reads a message's stored images, in order, as its `media` (a StoredImages, which decodes
            each once); None sends none (a model without a projector, or one that does not see).
        unavailable: each image or clip that could not be read is added here. A missing or damaged file never
            loses the chat: its message goes without it (and with its other media and its text), and the
            caller tells the user which (`str()` of each: "photo.jpg: The image … is not in …").
        clips: reads a message's stored clips, in order, as its `media` after its images (a StoredClips);
            None sends none (a model that does not hear).
    """
    history = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    for message in messages:
        for step in message.tool_steps:
            history.extend(step_messages(step))
        media = _media(message, message.images, images, unavailable) if images is not None else ()
        media += _media(message, message.clips, clips, unavailable) if clips is not None else ()
        # Documents: the block the message was sent with, before its text, as the model read it then.
        content = message.documents.message(message.content) if message.documents else message.content
        if content or media:
            history.append(ChatMessage(message.role, content, media=media))
    return history


def _media(message: Message, refs: tuple, load: Callable[[object], Media],
           unavailable: list[UnavailableMedia] | None) -> tuple[Media, ...]:
    found = []
    for ref in refs:
        try:
            found.append(load(ref))
        except (StoredMediaError, MediaRefused, ValueError) as exc:
            if unavailable is not None:
                unavailable.append(UnavailableMedia(message.id, ref, str(exc)))
    return tuple(found)


def step_messages(step: ToolStep) -> list[ChatMessage]:
    """One tool step as turns: what the model wrote with its calls, then each call's result (in the calls'
    order, which is the order the model gave them), its first 64 KiB: the card keeps the whole."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in step.calls)
    turns = [ChatMessage("assistant", step.text, tool_calls=calls)]
    turns.extend(ChatMessage("tool", for_model(c.result), tool_call_id=c.id, name=c.name) for c in step.calls)
    return turns
