"""How a chat template's model writes tool calls, and a streaming parser of them out of the answer text.

One entry of FORMATS per format, written for the models its comment names: the substrings of a
template's source that identify it, the text that begins a call in the output, how a call is parsed
back, and how one is written (for a grammar that forces calls: `prefix(name)` + the arguments' JSON +
`call_suffix`, calls joined by `separator`, the whole inside `list_prefix`/`list_suffix`).

Two shapes of call: the JSON object carries the function's name (`{"name": …, "arguments": {…}}`, alone
or in a JSON list), or a header carries it (`headers`: regular expressions with a group `name`) and the
JSON object after it is the arguments. `ends` are markers that close a call; only there does
`ToolCallStream.completed_calls` report it before the reply ends.

For harmony (gpt-oss) the stream expects the answer text of engine/reply/reasoning_formats.py's splitter,
which passes messages addressed to `functions.x` on verbatim and drops the `<|start|>assistant` between
messages. Standard library only, but for jsonschema in `check_calls`, imported there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.reply.reasoning_formats import first_marker, partial_marker_len, template_reads

_JSON_CALL = '{"name": "%(name)s", "arguments": '


@dataclass(frozen=True, slots=True)
class ToolCallFormat:
    name: str
    detect: tuple[str, ...]  # any of these in a template's source identifies the format...
    starts: tuple[str, ...]  # text that begins a call (or the calls) in the output
    call_prefix: str  # what begins one call, %(name)s the function: `prefix(name)`
    call_suffix: str = ""
    separator: str = ""  # between parallel calls
    list_prefix: str = ""
    list_suffix: str = ""
    arguments_key: str = "arguments"
    name_key: str = "name"
    excludes: tuple[str, ...] = ()  # ...unless one of these is there too
    leading: tuple[str, ...] = ()  # begins a call only at the start of the answer (JSON spacing allowed)
    headers: tuple[str, ...] = ()  # regexes of a call's header, group `name`; () the JSON names it
    ends: tuple[str, ...] = ()

    def prefix(self, name: str) -> str:
        return self.call_prefix % {"name": name}


FORMATS: tuple[ToolCallFormat, ...] = (
    # gpt-oss-20b/120b (harmony): a commentary message to functions.NAME, its JSON after <|message|>,
    # then <|call|>. The model writes the recipient after the channel; the template renders history with
    # it before (`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`).
    ToolCallFormat(
        name="harmony", detect=("<|channel|>commentary",), starts=("<|channel|>commentary to=", "to=functions."),
        headers=(
            r"<\|channel\|>commentary to=functions\.(?P<name>[^\s<]+)\s*(?:<\|constrain\|>)?\s*\w*<\|message\|>",
            r"to=functions\.(?P<name>[^\s<]+)\s*<\|channel\|>commentary\s*(?:<\|constrain\|>)?\s*\w*<\|message\|>",
        ),
        ends=("<|call|>", "<|end|>", "<|start|>assistant"),
        call_prefix="<|channel|>commentary to=functions.%(name)s <|constrain|>json<|message|>",
        call_suffix="<|call|>",
    ),
    # Mistral-Small-3.2-24B-Instruct-2506, Ministral-3 (-Reasoning-2512), Magistral, Devstral:
    # [TOOL_CALLS]name[ARGS]{…} for each call (3.2's template adds [CALL_ID]id before [ARGS]).
    ToolCallFormat(
        name="mistral_args", detect=("[ARGS]",), starts=("[TOOL_CALLS]",),
        headers=(r"\[TOOL_CALLS\]\s*(?P<name>[^\s\[\]{}]+)\s*(?:\[CALL_ID\][^\[]*)?\[ARGS\]",),
        call_prefix="[TOOL_CALLS]%(name)s[ARGS]",
    ),
    # Mistral-Nemo-Instruct-2407, Mistral-7B-Instruct-v0.3, Mixtral-8x22B: [TOOL_CALLS] then a JSON list.
    ToolCallFormat(
        name="mistral", detect=("[TOOL_CALLS]",), starts=("[TOOL_CALLS]",),
        call_prefix=_JSON_CALL, call_suffix="}", separator=", ", list_prefix="[TOOL_CALLS][", list_suffix="]",
    ),
    # Kimi-K2-Instruct: a section of calls, each `functions.NAME:INDEX` then its JSON.
    ToolCallFormat(
        name="kimi_k2", detect=("<|tool_calls_section_begin|>",),
        starts=("<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
        headers=(
            r"<\|tool_call_begin\|>\s*(?:functions\.)?(?P<name>[^\s:<]+)(?::\d+)?\s*<\|tool_call_argument_begin\|>",
        ),
        ends=("<|tool_call_end|>", "<|tool_calls_section_end|>"),
        # The index after the name is the call's place; the parser ignores it, so a grammar writes 0.
        call_prefix="<|tool_call_begin|>functions.%(name)s:0<|tool_call_argument_begin|>",
        call_suffix="<|tool_call_end|>", list_prefix="<|tool_calls_section_begin|>",
        list_suffix="<|tool_calls_section_end|>",
    ),
    # NVIDIA-Nemotron-Nano-9B-v2 / 12B-v2: <TOOLCALL>[{"name": …, "arguments": …}, …]</TOOLCALL>.
    ToolCallFormat(
        name="nemotron", detect=("<TOOLCALL>",), starts=("<TOOLCALL>",), ends=("</TOOLCALL>",),
        call_prefix=_JSON_CALL, call_suffix="}", separator=", ", list_prefix="<TOOLCALL>[",
        list_suffix="]</TOOLCALL>",
    ),
    # granite-3.3-2b/8b-instruct (and 3.1, 3.2): <|tool_call|> then a JSON list.
    ToolCallFormat(
        name="granite", detect=("<|tool_call|>",), starts=("<|tool_call|>",),
        call_prefix=_JSON_CALL, call_suffix="}", separator=", ", list_prefix="<|tool_call|>[", list_suffix="]",
    ),
    # c4ai-command-r7b-12-2024 (its tool_use template): a JSON list of tool_name/parameters in an action.
    ToolCallFormat(
        name="command_r7b", detect=("<|START_ACTION|>",), starts=("<|START_ACTION|>",),
        ends=("<|END_ACTION|>",), name_key="tool_name", arguments_key="parameters",
        call_prefix='{"tool_call_id": "0", "tool_name": "%(name)s", "parameters": ', call_suffix="}",
        separator=", ", list_prefix="<|START_ACTION|>[", list_suffix="]<|END_ACTION|>",
    ),
    # Qwen2.5, Qwen3, QwQ-32B, Hermes-2-Pro/Hermes-3 (tool_use), granite-4.0, Reka Edge: one
    # <tool_call> block of JSON per call. Qwen3-Coder, Qwen3.5 and GLM-4.5/4.6 use the same tag around
    # XML parameters, a format of their own not parsed here.
    ToolCallFormat(
        name="hermes", detect=("<tool_call>",), excludes=("<function=", "<arg_key>"), starts=("<tool_call>",),
        ends=("</tool_call>",), call_prefix="<tool_call>\n" + _JSON_CALL, call_suffix="}\n</tool_call>",
        separator="\n",
    ),
    # Llama-3.1/3.2/3.3-Instruct: the templates ask for a bare {"name": …, "parameters": …}; 3.1 and 3.3
    # may write <|python_tag|> first. Several are separated by ";".
    ToolCallFormat(
        name="llama3", detect=('{"name": function name, "parameters"', "<|python_tag|>"),
        starts=("<|python_tag|>",), leading=('{"name"', '{"type":"function"'),
        call_prefix='{"name": "%(name)s", "parameters": ', call_suffix="}", separator="; ",
        arguments_key="parameters",
    ),
)


def template_supports_tools(template_source: str) -> bool:
    """Whether the template reads the `tools` variable (shows the model the functions it may call)."""
    return template_reads(template_source, "tools")


def detect_tool_format(template_source: str) -> ToolCallFormat | None:
    """The tool-call format of a template that takes tools, or None (no tools, or a format not known)."""
    if not template_supports_tools(template_source):
        return None
    for fmt in FORMATS:  # in order: the more specific formats come first
        if any(d in template_source for d in fmt.detect) and not any(x in template_source for x in fmt.excludes):
            return fmt
    return None


@dataclass(frozen=True, slots=True)
class ParsedCall:
    name: str
    arguments: str  # JSON text of an object, normalized with json.dumps


class ToolCallParseError(ValueError):
    """The model's tool call is malformed, or does not fit the request's tools; the message says how.

    `text` is the tool-call text that failed (from the first start marker), for the caller to return
    as plain content.
    """

    def __init__(self, message: str, text: str = ""):
        super().__init__(message)
        self.text = text


class ToolCallStream:
    """Separates the answer's content from its tool calls as the text streams.

    `feed` returns the content safe to show now: all but a possible partial start marker; once a call
    starts, everything after it is held. `finish` parses the calls.
    """

    def __init__(self, fmt: ToolCallFormat):
        self._fmt = fmt
        self._held = ""
        self._calls_text: str | None = None  # from the first start marker on
        self._at_start = bool(fmt.leading)
        self._completed: tuple[int, list[ParsedCall]] = (-1, [])

    @property
    def in_call(self) -> bool:
        return self._calls_text is not None

    def feed(self, text: str) -> str:
        if self._calls_text is not None:
            self._calls_text += text
            return ""
        text = self._held + text
        if self._at_start:
            at = _leading_call(text, self._fmt.leading)
            if at is None:
                self._held = text
                return ""
            self._at_start = False
            if at >= 0:
                return self._begin_calls(text, at)
        hit = first_marker(text, self._fmt.starts)
        if hit is not None:
            return self._begin_calls(text, hit[0])
        keep = partial_marker_len(text, self._fmt.starts)
        self._held = text[len(text) - keep:]
        return text[: len(text) - keep]

    def completed_calls(self) -> list[ParsedCall]:
        """The calls so far whose end marker has come (all of them, each time; none for formats without)."""
        if self._calls_text is None:
            return []
        if self._completed[0] != len(self._calls_text):
            calls: list[tuple[ParsedCall, bool]] = []
            try:
                _parse_calls(self._fmt, self._calls_text, calls)
            except ToolCallParseError:
                pass  # cut off mid-call so far; only what closed before counts
            closed = [call for call, done in calls if done]
            self._completed = (len(self._calls_text), closed)
        return list(self._completed[1])

    def finish(self) -> tuple[str, list[ParsedCall]]:
        """The content not yet returned (text after the calls, if any) and the calls.

        Raises:
            ToolCallParseError: a call is malformed; its `text` is the held tool-call text.
        """
        if self._calls_text is None:
            rest, self._held = self._held, ""
            return rest, []
        calls: list[tuple[ParsedCall, bool]] = []
        trailing = _parse_calls(self._fmt, self._calls_text, calls)
        return trailing, [call for call, _ in calls]

    def _begin_calls(self, text: str, at: int) -> str:
        self._calls_text, self._held = text[at:], ""
        return text[:at]


def check_calls(calls: Iterable[ParsedCall], tools: Sequence[dict[str, Any]]) -> None:
    """Each call names a function of `tools` (OpenAI's shape) and its arguments fit its parameters.

    Raises:
        ToolCallParseError: an unknown function, or arguments that do not validate.
    """
    import jsonschema  # only a server checking calls needs it

    functions = {t["function"]["name"]: t["function"] for t in tools if isinstance(t.get("function"), dict)}
    for call in calls:
        function = functions.get(call.name)
        if function is None:
            raise ToolCallParseError(f"unknown function '{call.name}'")
        schema = function.get("parameters") or {"type": "object"}
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ToolCallParseError(f"the parameters of '{call.name}' are not a valid JSON schema: {exc.message}") from None
        validator = validator_class(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(call.arguments)))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            detail = f"{where}: {error.message}" if where else error.message
            raise ToolCallParseError(f"arguments of '{call.name}' do not match its parameters: {detail}")


# ------------------------------------------------------------------------------------------ parsing

_DECODER = json.JSONDecoder()


def _parse_calls(fmt: ToolCallFormat, text: str, calls: list[tuple[ParsedCall, bool]]) -> str:
    """Parse the tool-call text into `calls` (each with whether an end marker closed it).

    Returns the text after the calls that is none of theirs (content the model wrote after them).
    Raises ToolCallParseError at the first malformed call; `calls` then holds those before it.
    """
    headers = [re.compile(h) for h in fmt.headers]
    separator = fmt.separator.strip()
    pos, expecting = 0, True  # the text begins with a start marker (or a leading call)
    while (pos := _skip_space(text, pos)) < len(text):
        if marker := _at(text, pos, fmt.ends):
            calls[:] = [(call, True) for call, _ in calls]
            pos, expecting = pos + len(marker), False
        elif match := _header_at(headers, text, pos):
            arguments, pos = _decode(text, _skip_space(text, match.end()))
            calls.append((_call(match["name"], arguments, text), False))
            expecting = False
        elif marker := _at(text, pos, (*fmt.starts, separator) if separator else fmt.starts):
            pos, expecting = pos + len(marker), True
        elif expecting and not headers and text[pos] in "{[":
            value, pos = _decode(text, pos)
            for item in value if isinstance(value, list) else [value]:
                calls.append((_named_call(fmt, item, text), False))
            expecting = False
        elif expecting:
            problem = "the tool call names no function" if headers else "invalid JSON in the tool call"
            raise ToolCallParseError(f"{problem}: {text[pos:pos + 40]!r}", text)
        else:
            return text[pos:]
    if expecting:
        raise ToolCallParseError("the tool call ends before its JSON", text)
    return ""


def _header_at(headers: list[re.Pattern[str]], text: str, pos: int) -> re.Match[str] | None:
    return next((m for m in (h.match(text, pos) for h in headers) if m), None)


def _decode(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise ToolCallParseError(f"invalid JSON in the tool call: {exc.msg} (at character {exc.pos})", text) from None


def _named_call(fmt: ToolCallFormat, item: Any, text: str) -> ParsedCall:
    """A call from a JSON object that names its function."""
    if not isinstance(item, dict):
        raise ToolCallParseError(f"invalid JSON in the tool call: expected an object, got {item!r:.40}", text)
    name = item.get(fmt.name_key, item.get("name"))
    for key in (fmt.arguments_key, "arguments", "parameters"):
        if key in item:
            return _call(name, item[key], text)
    return _call(name, {}, text)  # a function without parameters


def _call(name: Any, arguments: Any, text: str) -> ParsedCall:
    if not isinstance(name, str) or not name.strip():
        raise ToolCallParseError("the tool call names no function", text)
    if isinstance(arguments, str):  # some models write the arguments as JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolCallParseError(f"invalid JSON in the arguments of '{name}': {exc.msg}", text) from None
    if not isinstance(arguments, dict):
        raise ToolCallParseError(f"the arguments of '{name}' are not a JSON object", text)
    return ParsedCall(name.strip(), json.dumps(arguments, ensure_ascii=False))


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _at(text: str, pos: int, markers: Iterable[str]) -> str | None:
    return next((m for m in markers if m and text.startswith(m, pos)), None)


def _leading_call(text: str, markers: Sequence[str]) -> int | None:
    """Where a call begins if the answer begins with one of `markers`; -1: it does not; None: can't tell yet.

    JSON may space its tokens: `{ "name"` and `{"type": "function"` match `{"name"` and `{"type":"function"`.
    """
    body = text.lstrip()
    if not body:
        return None
    undecided = False
    for marker in markers:
        pos = 0
        for char in marker:
            pos = _skip_space(body, pos)
            if pos == len(body):
                undecided = True
                break
            if body[pos] != char:
                break
            pos += 1
        else:
            return len(text) - len(body)
    return None if undecided else -1
