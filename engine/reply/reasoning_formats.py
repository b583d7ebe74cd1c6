"""How a chat template's model writes its reasoning, and a splitter of the reply into reasoning and answer.

One entry of FORMATS per format: its markers, the substrings of a template's source that identify it,
and how the engine steers it (a template variable, a soft switch in the prompt, text appended after the
generation prompt, the text that ends the thinking when its budget is spent). Adding a format is adding
an entry; only its kind picks the splitting code:

- block: `open` reasoning `close` answer, as `<think>…</think>`; some wrap the answer too
  (`answer_open`/`answer_close`: granite's `<response>`, Command R7B's `<|START_RESPONSE|>`).
- channels (gpt-oss's harmony): the reply is a run of messages, each a header ending in `header_end` and a
  body ending in one of `message_ends`. The analysis channel is reasoning, the final channel is answer;
  a message addressed to a recipient (`to=functions.x`, a tool call) is passed on verbatim in the answer
  text, header and end marker included, for engine/reply/tool_formats.py to parse.

Standard library only: the engine process and the CLI both import this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal


@dataclass(frozen=True, slots=True)
class ReasoningFormat:
    name: str
    open: str  # begins the reasoning (harmony: the analysis channel's header)
    close: str  # ends it
    detect: tuple[str, ...]  # any of these in a template's source identifies the format
    budget_close: str  # forced into the reply when the thinking budget is spent: the model answers next
    answer_open: str = ""  # dropped where the answer begins (harmony: the final channel's header)
    answer_close: str = ""  # dropped where the answer ends
    switch_variable: str | None = None  # template variable that turns thinking on/off, where it reads it
    effort_variable: str | None = None  # template variable taking "low"/"medium"/"high"
    off_prefill: str | None = None  # appended after the generation prompt to skip the thinking
    no_think_switch: str | None = None  # soft switch written into the system prompt to skip it
    special_tokens: bool = False  # markers are control tokens: detokenize with special tokens shown
    # The channels kind only.
    message_start: str = ""  # begins every message after the first (the prompt wrote the first's)
    header_end: str = ""
    message_ends: tuple[str, ...] = ()
    header_starts: tuple[str, ...] = ()  # how a header can begin; anything else is plain answer text

    @property
    def channels(self) -> bool:
        return bool(self.header_end)


FORMATS: tuple[ReasoningFormat, ...] = (
    # gpt-oss-20b/120b (harmony): analysis, then `<|start|>assistant<|channel|>final<|message|>` answer.
    # No off switch: reasoning_effort (low/medium/high, the template's default medium) sets how much.
    ReasoningFormat(
        name="harmony", open="<|channel|>analysis<|message|>", close="<|end|>",
        detect=("<|channel|>analysis",),
        budget_close="<|end|><|start|>assistant<|channel|>final<|message|>",
        answer_open="<|channel|>final<|message|>", answer_close="<|return|>",
        effort_variable="reasoning_effort", special_tokens=True,
        message_start="<|start|>assistant", header_end="<|message|>",
        message_ends=("<|end|>", "<|return|>", "<|call|>"), header_starts=("<|channel|>", "to="),
    ),
    # c4ai-command-r7b-12-2024: thinking and response wrapped in control tokens. Its template closes an
    # empty thought itself unless enable_thinking is true (off by default).
    ReasoningFormat(
        name="command_r7b", open="<|START_THINKING|>", close="<|END_THINKING|>",
        detect=("<|START_THINKING|>",), budget_close="<|END_THINKING|><|START_RESPONSE|>",
        answer_open="<|START_RESPONSE|>", answer_close="<|END_RESPONSE|>",
        switch_variable="enable_thinking", off_prefill="<|START_THINKING|><|END_THINKING|>",
        special_tokens=True,
    ),
    # Ministral-3-*-Reasoning-2512, Magistral: [THINK]…[/THINK] (control tokens). The default system
    # prompt asks for the thinking; nothing in the template turns it off.
    ReasoningFormat(
        name="mistral_think", open="[THINK]", close="[/THINK]", detect=("[THINK]",),
        budget_close="[/THINK]", special_tokens=True,
    ),
    # gemma-4: a thought channel; the template closes an empty one unless enable_thinking is true.
    ReasoningFormat(
        name="gemma_thought", open="<|channel>thought", close="<channel|>", detect=("<|channel>thought",),
        budget_close="<channel|>", switch_variable="enable_thinking",
        off_prefill="<|channel>thought\n<channel|>", special_tokens=True,
    ),
    # granite-3.3-2b/8b-instruct: `thinking=true` asks for <think>…</think><response>…</response>.
    ReasoningFormat(
        name="granite", open="<think>", close="</think>", detect=("<response>",),
        budget_close="\n</think>\n<response>", answer_open="<response>", answer_close="</response>",
        switch_variable="thinking",
    ),
    # Qwen3, Qwen3.5, QwQ-32B, DeepSeek-R1 and its distills, DeepSeek-V3.1, SmolLM3, GLM-4.6,
    # NVIDIA-Nemotron-Nano-v2, LFM2.5, Reka Edge. The variable where the template reads it; "/no_think"
    # where the template looks for it instead (Nemotron-Nano-v2); else an empty block after the prompt.
    ReasoningFormat(
        name="think", open="<think>", close="</think>", detect=("<think>",),
        budget_close="\n</think>\n\n", switch_variable="enable_thinking",
        off_prefill="<think>\n\n</think>\n\n", no_think_switch="/no_think",
    ),
)


def detect_reasoning(template_source: str) -> ReasoningFormat | None:
    """The reasoning format a chat template's model writes, or None (a model that does not reason).

    The entry comes narrowed to the controls this template honours, so that a field set means it
    works: `switch_variable`/`effort_variable` only where the template reads them, `no_think_switch`
    only where it has no variable but looks for the switch (Nemotron-Nano-v2), `off_prefill` only
    where it has neither.
    """
    for fmt in FORMATS:  # in order: the more specific formats come first
        if any(marker in template_source for marker in fmt.detect):
            return _narrowed(fmt, template_source)
    return None


def _narrowed(fmt: ReasoningFormat, source: str) -> ReasoningFormat:
    def read(variable: str | None) -> str | None:
        return variable if variable and template_reads(source, variable) else None

    switch = read(fmt.switch_variable)
    no_think = fmt.no_think_switch if not switch and fmt.no_think_switch and fmt.no_think_switch in source else None
    return replace(
        fmt, switch_variable=switch, effort_variable=read(fmt.effort_variable), no_think_switch=no_think,
        off_prefill=None if switch or no_think else fmt.off_prefill,
    )


def starts_inside(fmt: ReasoningFormat, prompt: str) -> bool:
    """Whether the rendered prompt opened the think block itself (QwQ, DeepSeek-R1's distills, Qwen3.5)."""
    return prompt.rstrip().endswith(fmt.open)


def prompt_closed(fmt: ReasoningFormat, prompt: str) -> bool:
    """Whether the prompt ends with a closed (empty) block, as Qwen3 with enable_thinking=false: answer only."""
    return not fmt.channels and prompt.rstrip().endswith(fmt.close)


OffControl = tuple[Literal["variable", "switch", "prefill"], str]


def off_control(fmt: ReasoningFormat, template_source: str) -> OffControl | None:
    """How this template turns thinking off, or None where it cannot be turned off (an entry of
    FORMATS or one `detect_reasoning` narrowed: the same answer).

    ("variable", name): render with name=False (True turns it on: several templates default to off).
    ("switch", text): append text to the system prompt. ("prefill", text): see `off_prefill_after`.
    """
    if fmt.switch_variable and template_reads(template_source, fmt.switch_variable):
        return ("variable", fmt.switch_variable)
    if fmt.no_think_switch and fmt.no_think_switch in template_source:
        return ("switch", fmt.no_think_switch)
    if fmt.off_prefill:
        return ("prefill", fmt.off_prefill)
    return None


def off_prefill_after(fmt: ReasoningFormat, prompt: str) -> str:
    """What to append to this rendered prompt so the model skips its thinking: the close where the prompt
    opened the block, the format's `off_prefill` where it did not ("" where there is none, or it closed)."""
    if starts_inside(fmt, prompt):
        return fmt.budget_close  # the prompt opened the block: close it at once
    if prompt_closed(fmt, prompt):
        return ""
    return fmt.off_prefill or ""


# Jinja code (`{{ }}`, `{% %}`) token by token: string literals whole, so "}}" inside one ends nothing.
_CODE_OPEN = re.compile(r"\{\{|\{%")
_CODE_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\}\}|%\}|[^'\"}%]+|.", re.DOTALL)


def _template_code(source: str) -> Iterator[str]:
    """The code of each tag, with string literals emptied (their words are text, not variables)."""
    pos = 0
    while (start := _CODE_OPEN.search(source, pos)) is not None:
        close, parts = ("}}" if start.group() == "{{" else "%}"), []
        pos = start.end()
        while (token := _CODE_TOKEN.match(source, pos)) is not None:
            pos = token.end()
            if token.group() == close:
                break
            parts.append("''" if token.group()[0] in "'\"" else token.group())
        yield "".join(parts)


def template_reads(template_source: str, variable: str) -> bool:
    """Whether the template reads a context variable: `enable_thinking is defined`, `if tools`.

    Not an attribute (`ns.enable_thinking`), not an assignment or keyword (`namespace(enable_thinking=…)`),
    not a word inside a string: only those mean the caller's value reaches the template.
    """
    name = re.compile(rf"(?<![\w.]){re.escape(variable)}(?!\w|\s*=(?!=))")
    return any(name.search(code) for code in _template_code(template_source))


# ------------------------------------------------------------------------------------------ splitting


def partial_marker_len(text: str, markers: Iterable[str]) -> int:
    """Length of the longest end of `text` that begins a marker: a marker split across tokens."""
    best = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:size]):
                best = size
                break
    return best


def first_marker(text: str, markers: Iterable[str]) -> tuple[int, str] | None:
    """The earliest marker in text (the longest of those at the same place)."""
    found: tuple[int, str] | None = None
    for marker in markers:
        at = text.find(marker)
        if at >= 0 and (found is None or (at, -len(marker)) < (found[0], -len(found[1]))):
            found = (at, marker)
    return found


_MAX_HEADER = 256  # a harmony header longer than this is not one: the model wrote plain text

# Where the splitter is: before any reasoning, in it, between it and the answer, in the answer; for
# channels also in a header, or in a message passed on verbatim (a tool call).
_State = Literal["start", "reasoning", "answer_start", "answer", "header", "raw"]


class ReasoningSplitter:
    """Splits streamed reply text into reasoning and answer pieces.

    Args:
        fmt: the template's reasoning format.
        inside: the prompt opened the block (`starts_inside`): the reply begins as reasoning.
        closed: the prompt closed an empty block (`prompt_closed`): the reply is answer only.

    Markers are part of neither text; whitespace after the open and the close markers is dropped. Only
    what could be the start of a marker split across tokens is held back (for harmony, a message header
    until its `<|message|>`), so the joined pieces do not depend on how the text was chunked.
    """

    def __init__(self, fmt: ReasoningFormat, inside: bool = False, closed: bool = False):
        self._fmt = fmt
        self._buf = ""
        self._strip = True  # drop whitespace at the start of the current text
        self._state: _State = "start"
        if inside:
            self._state = "reasoning"
        elif fmt.channels:
            self._state = "header"  # the prompt wrote `<|start|>assistant`; the reply begins with a header
        elif closed:
            self._state = "answer_start"
        self.reasoning_closed = False
        self.answer_started = False

    @classmethod
    def for_prompt(cls, fmt: ReasoningFormat, prompt: str) -> ReasoningSplitter:
        return cls(fmt, inside=starts_inside(fmt, prompt), closed=prompt_closed(fmt, prompt))

    @property
    def in_reasoning(self) -> bool:
        return self._state == "reasoning"

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """Pieces (is_reasoning, text), in order, of what can be told apart so far."""
        self._buf += text
        return self._run(final=False)

    def flush(self) -> list[tuple[bool, str]]:
        """The rest at the end of the reply: a held partial marker is text after all."""
        return self._run(final=True)

    def _run(self, final: bool) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        steps = {
            "start": self._start, "reasoning": self._reasoning, "answer_start": self._answer_start,
            "answer": self._answer, "header": self._header, "raw": self._raw,
        }
        while self._buf and steps[self._state](out, final):
            pass
        merged: list[tuple[bool, str]] = []
        for kind, piece in out:
            if not piece:
                continue
            if merged and merged[-1][0] == kind:
                merged[-1] = (kind, merged[-1][1] + piece)
            else:
                merged.append((kind, piece))
        self.answer_started |= any(not kind for kind, _ in merged)
        return merged

    # Each step consumes what it can; True when the state changed and the next step should run.

    def _start(self, out: list[tuple[bool, str]], final: bool) -> bool:
        text = self._buf.lstrip()
        markers = [m for m in (self._fmt.open, self._fmt.answer_open) if m]
        for marker in markers:
            if text.startswith(marker):
                self._buf = text[len(marker):]
                return self._go("reasoning" if marker == self._fmt.open else "answer")
        if not final and (not text or any(m.startswith(text) for m in markers)):
            return False  # whitespace, or the start of a marker: wait
        return self._go("answer_start")  # the model answers without thinking

    def _reasoning(self, out: list[tuple[bool, str]], final: bool) -> bool:
        ends = self._fmt.message_ends or (self._fmt.close,)
        after = "header" if self._fmt.channels else "answer_start"
        if self._body(out, True, ends, final):
            self.reasoning_closed = True
            return self._go(after)
        return False

    def _answer_start(self, out: list[tuple[bool, str]], final: bool) -> bool:
        text, marker = self._buf.lstrip(), self._fmt.answer_open
        if not text:
            self._buf = ""
            return False
        if marker and text.startswith(marker):
            self._buf = text[len(marker):]
            return self._go("answer")
        if marker and marker.startswith(text) and not final:
            self._buf = text
            return False
        self._buf = text
        return self._go("answer", strip=False)

    def _answer(self, out: list[tuple[bool, str]], final: bool) -> bool:
        fmt = self._fmt
        ends = fmt.message_ends or ((fmt.answer_close,) if fmt.answer_close else ())
        if self._body(out, False, ends, final):
            return self._go("header" if fmt.channels else "answer", strip=False)
        return False

    def _raw(self, out: list[tuple[bool, str]], final: bool) -> bool:
        if self._body(out, False, self._fmt.message_ends, final, keep_end=True):
            return self._go("header")
        return False

    def _header(self, out: list[tuple[bool, str]], final: bool) -> bool:
        fmt = self._fmt
        text = self._buf.lstrip()
        if text.startswith(fmt.message_start):
            text = text[len(fmt.message_start):].lstrip()
        elif fmt.message_start.startswith(text) and not final:
            return False
        end = text.find(fmt.header_end)
        if end < 0:
            if final:  # a header cut off is no text
                self._buf = ""
                return False
            if len(text) <= _MAX_HEADER and any(s.startswith(text[: len(s)]) for s in fmt.header_starts):
                return False
            self._buf = text
            return self._go("answer_start")  # not a header: plain text
        header, self._buf = text[:end], text[end + len(fmt.header_end):]
        if "to=" in header:  # addressed to a tool: the tool-call parser's
            out.append((False, header + fmt.header_end))
            return self._go("raw", strip=False)
        if fmt.open == header.strip() + fmt.header_end:
            return self._go("reasoning")
        return self._go("answer")  # the final channel, or a commentary preamble (shown to the user)

    def _body(
        self, out: list[tuple[bool, str]], reasoning: bool, ends: tuple[str, ...], final: bool,
        keep_end: bool = False,
    ) -> bool:
        """Emit the current text up to its first end marker; True when one was found (and dropped)."""
        if self._strip:
            self._buf = self._buf.lstrip()
            if not self._buf:
                return False
            self._strip = False
        hit = first_marker(self._buf, ends) if ends else None
        if hit is not None:
            at, marker = hit
            out.append((reasoning, self._buf[: at + len(marker)] if keep_end else self._buf[:at]))
            self._buf = self._buf[at + len(marker):]
            return True
        keep = 0 if final else partial_marker_len(self._buf, ends)
        out.append((reasoning, self._buf[: len(self._buf) - keep]))
        self._buf = self._buf[len(self._buf) - keep:]
        return False

    def _go(self, state: _State, strip: bool = True) -> bool:
        self._state, self._strip = state, strip
        return True
