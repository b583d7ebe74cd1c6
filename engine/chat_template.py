"""Render a model's own chat template in a Jinja sandbox with time and size limits.

A chat template comes from the model file, so it is untrusted code: it is rendered in
an `ImmutableSandboxedEnvironment` (no dunder attributes, no mutation of our objects),
with a deadline, a cap on the size of what it builds, and bounded string operators.

The environment is the one the models' authors test their templates with, transformers'
`apply_chat_template` (llama-cpp-python's follows it): `{% break %}`/`{% continue %}`,
a `{% generation %}` block that renders its body, `tojson` as `json.dumps` without HTML
escaping or key sorting, `raise_exception`, `strftime_now`, and `tools`/`documents` always
defined (None when absent). tests/engine/test_real_chat_templates.py renders real templates
of many model families in both and compares the text.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from engine.protocol import ChatMessage

try:  # POSIX only; elsewhere the deadline and the output cap still hold
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]


class ChatTemplateError(Exception):
    """The template is unsafe, broken, or exceeded its limits; the message says which."""


# How the message of a conversation the template itself turns away begins (its
# `raise_exception`, e.g. "roles must alternate"): the request's fault, not the model's.
REFUSED = "the chat template refused the conversation"


@dataclass(slots=True, frozen=True)
class TemplateLimits:
    time_s: float = 2.0
    max_output_chars: int = 4_000_000
    max_memory_growth_bytes: int = 256 * 1024 * 1024
    # Largest string or list that `*`, `**` or a padding filter may produce.
    max_operand_len: int = 1_000_000


# `tojson`'s indent and separators are repeated for every item: real templates use 2 or 4
# spaces and (", ", ": "); longer ones could only serve to blow the output up in C code,
# where the deadline cannot see.
_MAX_JSON_INDENT = 64
_MAX_JSON_SEPARATOR = 16


class _Deadline(BaseException):
    """Raised from the trace hook; a BaseException so templates' own error handling can't swallow it."""


class _GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}`: marks the assistant's text for training tools.

    Rendered as its body, in a scope of its own as transformers does (a `set` inside does not leak).
    """

    tags = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class _Namespace(Namespace):
    """`namespace()` that refuses underscore names, so nothing in it can pose as an internal."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: B902 - `self` may be a keyword, as in Jinja's
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _check_namespace_name(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_namespace_name(name)
        Namespace.__setitem__(self, name, value)


def _check_namespace_name(name: object) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(f"a namespace attribute may not start with '_' ({name!r})")


class _DictGlobal:
    """`dict(...)` and `dict.fromkeys(...)` for templates, without handing them the type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, keys: Any, value: Any = None) -> dict:
        return dict.fromkeys(keys, value)


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox plus caps on operators that can build huge values in one step."""

    intercepted_binops = frozenset(["*", "**", "+"])

    def __init__(self, limits: TemplateLimits):
        super().__init__(
            trim_blocks=True, lstrip_blocks=True, autoescape=False, extensions=[loopcontrols, _GenerationTag]
        )
        self._limits = limits
        self.filters["center"] = self._bounded_center
        self.filters["indent"] = self._bounded_indent
        self.filters["tojson"] = _tojson
        self.globals.update(
            raise_exception=_raise_exception, strftime_now=_strftime_now, namespace=_Namespace, dict=_DictGlobal()
        )

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


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
    separators: tuple[str, str] | None = None, sort_keys: bool = False,
) -> str:
    """`json.dumps` as transformers' templates get it: no HTML escaping, keys in their order."""
    if indent is not None and (
        not isinstance(indent, int | str) or (indent if isinstance(indent, int) else len(indent)) > _MAX_JSON_INDENT
    ):
        raise SecurityError("tojson indent too large in chat template")
    if separators is not None and any(len(str(sep)) > _MAX_JSON_SEPARATOR for sep in separators):
        raise SecurityError("tojson separators too long in chat template")
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    """A message as transformers hands it to templates: tool calls with their arguments as a mapping
    (templates write `arguments | tojson`), tool answers with the call's id and the tool's name."""
    item: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        item["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": _arguments(call.arguments)}}
            for call in message.tool_calls
        ]
    if message.role == "tool":
        item["tool_call_id"] = message.tool_call_id
        item["name"] = message.name
    return item


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # as the client sent it


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"{REFUSED}: {message}")


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
        self._bos, self._eos = bos_token, eos_token
        try:
            self._template = self._env.from_string(source)
        except TemplateError as exc:
            raise ChatTemplateError(f"the chat template does not compile: {exc}") from exc

    def render(
        self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None, variables: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt text for `messages`, ready to tokenize.

        Args:
            messages: the conversation.
            add_generation_prompt: end with the header of the assistant's next turn.
            tools: function definitions in OpenAI's JSON-schema shape, for templates that list them.
            variables: more of the template's variables (`enable_thinking`, `reasoning_effort`); they
                cannot replace the ones above.

        Raises:
            ChatTemplateError: unsafe access, a template error, or a limit exceeded.
        """
        context = {
            **(variables or {}),
            "messages": [_message_dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self._bos,
            "eos_token": self._eos,
            # Always defined, as transformers and llama-cpp-python pass them: templates test `is not none`.
            "tools": None if tools is None else [dict(t) for t in tools],
            "documents": None,
        }
        limits = self._limits
        parts: list[str] = []
        size = 0
        previous = sys.gettrace()
        sys.settrace(_watchdog(limits))
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


def _watchdog(limits: TemplateLimits) -> Callable[[FrameType, str, Any], Any]:
    """A trace function that stops a template run past its time or memory from now (checked every 32
    lines: often enough to stop a loop, rarely enough to cost little)."""
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

    return tracer
