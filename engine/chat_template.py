"""Render a model's own chat template in a Jinja sandbox with time and size limits.

A chat template comes from the model file, so it is untrusted code: it is rendered in
an `ImmutableSandboxedEnvironment` (no dunder attributes, no mutation of our objects),
with a deadline, a cap on the size of what it builds, and bounded string operators.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.protocol import ChatMessage

try:  # POSIX only; elsewhere the deadline and the output cap still hold
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]


class ChatTemplateError(Exception):
    """The template is unsafe, broken, or exceeded its limits; the message says which."""


@dataclass(slots=True, frozen=True)
class TemplateLimits:
    time_s: float = 2.0
    max_output_chars: int = 4_000_000
    max_memory_growth_bytes: int = 256 * 1024 * 1024
    # Largest string or list that `*`, `**` or a padding filter may produce.
    max_operand_len: int = 1_000_000


class _Deadline(BaseException):
    """Raised from the trace hook; a BaseException so templates' own error handling can't swallow it."""


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox plus caps on operators that can build huge values in one step."""

    intercepted_binops = frozenset(["*", "**", "+"])

    def __init__(self, limits: TemplateLimits):
        super().__init__(trim_blocks=True, lstrip_blocks=True, autoescape=False)
        self._limits = limits
        self.filters["center"] = self._bounded_center
        self.filters["indent"] = self._bounded_indent

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        cap = self._limits.max_operand_len
        if operator == "**":
            if isinstance(right, int | float) and abs(right) > 64:
                raise SecurityError("exponent too large in chat template")
        elif operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > cap:
                    raise SecurityError("chat template tried to build a value that is too large")
        elif (
            operator == "+"
            and isinstance(left, str | list | tuple)
            and isinstance(right, str | list | tuple)
            and len(left) + len(right) > cap
        ):
            raise SecurityError("chat template tried to build a value that is too large")
        return super().call_binop(context, operator, left, right)

    def _bounded_center(self, value: str, width: int = 80) -> str:
        if width > self._limits.max_operand_len:
            raise SecurityError("chat template padding too large")
        return str(value).center(width)

    def _bounded_indent(self, value: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
        if isinstance(width, int) and width > 1024:
            raise SecurityError("chat template indent too large")
        return jinja2.filters.do_indent(str(value), width, first, blank)  # type: ignore[arg-type]


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"the chat template refused the conversation: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _peak_rss_bytes() -> int:
    if resource is None:
        return 0
    # ru_maxrss is in KiB on Linux (bytes on macOS; the cap is then only looser).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class ChatTemplate:
    """A compiled chat template.

    Args:
        source: the Jinja source from the model's metadata.
        bos_token / eos_token: the model's special tokens as text.
        limits: time and size limits.

    Raises:
        ChatTemplateError: if the source does not compile.
    """

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", limits: TemplateLimits | None = None):
        self._limits = limits or TemplateLimits()
        self._env = _BoundedSandbox(self._limits)
        self._env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        self._bos, self._eos = bos_token, eos_token
        try:
            self._template = self._env.from_string(source)
        except TemplateError as exc:
            raise ChatTemplateError(f"the chat template does not compile: {exc}") from exc

    def render(self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages`, ready to tokenize.

        Raises:
            ChatTemplateError: unsafe access, a template error, or a limit exceeded.
        """
        context = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self._bos,
            "eos_token": self._eos,
        }
        limits = self._limits
        deadline = time.monotonic() + limits.time_s
        rss_cap = _peak_rss_bytes() + limits.max_memory_growth_bytes
        lines = 0

        def tracer(frame: FrameType, event: str, arg: Any) -> Any:
            nonlocal lines
            lines += 1
            if lines % 32 == 0:
                if time.monotonic() > deadline:
                    raise _Deadline(f"the chat template ran longer than {limits.time_s:g} s")
                if resource is not None and _peak_rss_bytes() > rss_cap:
                    raise _Deadline("the chat template used too much memory")
            return tracer

        parts: list[str] = []
        size = 0
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            for chunk in self._template.generate(**context):
                size += len(chunk)
                if size > limits.max_output_chars:
                    raise ChatTemplateError("the chat template produced too much text")
                parts.append(chunk)
        except _Deadline as exc:
            raise ChatTemplateError(str(exc)) from None
        except SecurityError as exc:
            raise ChatTemplateError(f"the chat template tried something unsafe: {exc}") from None
        except ChatTemplateError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure inside untrusted code is a template error
            raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
        finally:
            sys.settrace(previous)
        return "".join(parts)
