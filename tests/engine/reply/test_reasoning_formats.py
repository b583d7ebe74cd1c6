"""Reasoning formats: which real templates speak which, where their prompts leave the reply, and the splitter.

The templates are the models' own (tests/fixtures/chat_templates/). The splitter is fed realistic
replies cut every way into small chunks: what it returns must not depend on the cut.
"""

from __future__ import annotations

import inspect

import pytest

from engine.chat_template import ChatTemplate
from engine.protocol import ChatMessage
from engine.reply.reasoning_formats import (
    FORMATS,
    ReasoningSplitter,
    detect_reasoning,
    off_control,
    off_prefill_after,
    prompt_closed,
    starts_inside,
    template_reads,
)
from tests.paths import CHAT_TEMPLATES

TEMPLATES = CHAT_TEMPLATES
BY_NAME = {fmt.name: fmt for fmt in FORMATS}
USER = [ChatMessage("user", "What is 2 + 2?")]

EXPECTED_FORMAT = {
    "CohereForAI-c4ai-command-r-plus-tool_use": None,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command_r7b",
    "GLM-4.6": "think",
    "HuggingFaceTB-SmolLM2-135M-Instruct": None,
    "HuggingFaceTB-SmolLM3-3B": "think",
    "LFM2.5-8B-A1B": "think",
    "Mistral-Small-3.2-24B-Instruct-2506": None,
    "NVIDIA-Nemotron-Nano-v2": "think",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": None,
    "Qwen-QwQ-32B": "think",
    "Qwen-Qwen2.5-7B-Instruct": None,
    "Qwen-Qwen3-0.6B": "think",
    "Qwen3-Coder": None,
    "Qwen3.5-4B": "think",
    "Reka-Edge": "think",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": "think",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "think",
    "deepseek-ai-DeepSeek-V3.1": "think",
    "google-gemma-2-2b-it": None,
    "google-gemma-4-31B-it": "gemma_thought",
    "ibm-granite-granite-3.3-2B-Instruct": "granite",
    "ibm-granite-granite-4.0": None,
    "meta-llama-Llama-3.1-8B-Instruct": None,
    "meta-llama-Llama-3.2-3B-Instruct": None,
    "meta-llama-Llama-3.3-70B-Instruct": None,
    "microsoft-Phi-3.5-mini-instruct": None,
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral_think",
    "mistralai-Mistral-Nemo-Instruct-2407": None,
    "moonshotai-Kimi-K2": None,
    "openai-gpt-oss-120b": "harmony",
}


def source(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def render(name: str, messages: list[ChatMessage] = USER) -> str:
    return ChatTemplate(source(name), bos_token="<s>", eos_token="</s>").render(messages)


def test_every_fixture_template_is_in_the_table():
    assert sorted(EXPECTED_FORMAT) == sorted(p.stem for p in TEMPLATES.glob("*.jinja"))


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED_FORMAT.items()))
def test_detection_on_the_real_templates(name: str, expected: str | None):
    fmt = detect_reasoning(source(name))
    assert (fmt.name if fmt else None) == expected


@pytest.mark.parametrize(
    ("name", "control"),
    [
        ("Qwen-Qwen3-0.6B", ("variable", "enable_thinking")),
        ("HuggingFaceTB-SmolLM3-3B", ("variable", "enable_thinking")),
        ("deepseek-ai-DeepSeek-V3.1", ("variable", "enable_thinking")),
        ("ibm-granite-granite-3.3-2B-Instruct", ("variable", "thinking")),
        # Nemotron keeps its flag in a namespace and looks for "/no_think" in the messages instead.
        ("NVIDIA-Nemotron-Nano-v2", ("switch", "/no_think")),
        ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ("prefill", "<think>\n\n</think>\n\n")),
        ("mistralai-Ministral-3-14B-Reasoning-2512", None),
        ("openai-gpt-oss-120b", None),
    ],
)
def test_how_each_template_turns_thinking_off(name: str, control: tuple[str, str] | None):
    text = source(name)
    assert off_control(detect_reasoning(text), text) == control


@pytest.mark.parametrize(
    ("name", "switch", "no_think", "prefill"),
    [
        ("Qwen-Qwen3-0.6B", "enable_thinking", None, None),
        ("NVIDIA-Nemotron-Nano-v2", None, "/no_think", None),
        ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B", None, None, "<think>\n\n</think>\n\n"),
        ("mistralai-Ministral-3-14B-Reasoning-2512", None, None, None),
    ],
)
def test_detection_narrows_the_controls_to_those_the_template_honours(name, switch, no_think, prefill):
    fmt = detect_reasoning(source(name))
    assert (fmt.switch_variable, fmt.no_think_switch, fmt.off_prefill) == (switch, no_think, prefill)
    assert off_control(fmt, source(name)) == off_control(BY_NAME[fmt.name], source(name))


def test_gpt_oss_takes_an_effort_instead():
    text = source("openai-gpt-oss-120b")
    fmt = detect_reasoning(text)
    assert fmt.effort_variable == "reasoning_effort" and template_reads(text, fmt.effort_variable)


@pytest.mark.parametrize(
    ("template", "reads"),
    [
        ("{% if tools %}x{% endif %}", True),
        ("{%- if enable_thinking is defined and enable_thinking is false %}", True),
        ("{{ '}}' ~ tools }}", True),  # a string holding the tag's end does not end it
        ("{{ 'tools' }} and tools outside any tag", False),
        ("{%- set ns = namespace(enable_thinking=true) %}{{ ns.enable_thinking }}", False),
        ("{{ message.tools }}{{ available_tools }}", False),
    ],
)
def test_template_reads_only_real_variable_uses(template: str, reads: bool):
    variable = "tools" if "tools" in template else "enable_thinking"
    assert template_reads(template, variable) is reads


@pytest.mark.parametrize(
    ("name", "inside", "closed"),
    [
        ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B", True, False),  # ends with "<think>\n"
        ("Qwen3.5-4B", True, False),
        ("NVIDIA-Nemotron-Nano-v2", True, False),
        ("Qwen-Qwen3-0.6B", False, False),  # the model writes <think> itself
        ("GLM-4.6", False, False),
        ("openai-gpt-oss-120b", False, False),  # ends with <|start|>assistant: a header comes first
        # Off unless the caller passes enable_thinking (llama.cpp's revisions of QwQ and the R1 distill).
        ("Qwen-QwQ-32B", False, True),
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", False, True),
        ("deepseek-ai-DeepSeek-V3.1", False, True),
        ("google-gemma-4-31B-it", False, True),
        ("CohereForAI-c4ai-command-r7b-12-2024-tool_use", False, True),
    ],
)
def test_where_the_rendered_prompt_leaves_the_reply(name: str, inside: bool, closed: bool):
    fmt, prompt = detect_reasoning(source(name)), render(name)
    assert (starts_inside(fmt, prompt), prompt_closed(fmt, prompt)) == (inside, closed)


def test_a_soft_switch_in_the_system_prompt_renders_a_closed_block():
    prompt = render("HuggingFaceTB-SmolLM3-3B", [ChatMessage("system", "Be brief. /no_think"), *USER])
    fmt = BY_NAME["think"]
    assert prompt.endswith("<think>\n\n</think>\n") and prompt_closed(fmt, prompt)
    assert joined(ReasoningSplitter.for_prompt(fmt, prompt), "\nFour.") == ("", "Four.")


def test_qwen3_with_enable_thinking_false_is_answer_only():
    if "variables" not in inspect.signature(ChatTemplate.render).parameters:
        pytest.skip("ChatTemplate.render takes no template variables yet")
    prompt = ChatTemplate(source("Qwen-Qwen3-0.6B")).render(USER, variables={"enable_thinking": False})
    fmt = BY_NAME["think"]
    assert prompt.endswith("<think>\n\n</think>\n\n") and not starts_inside(fmt, prompt)
    assert joined(ReasoningSplitter.for_prompt(fmt, prompt), "2 + 2 = 4.") == ("", "2 + 2 = 4.")


def test_off_prefill_closes_an_opened_block_and_adds_nothing_to_a_closed_one():
    fmt = BY_NAME["think"]
    assert off_prefill_after(fmt, render("deepseek-ai-DeepSeek-R1-Distill-Llama-8B")) == "\n</think>\n\n"
    assert off_prefill_after(fmt, render("Qwen-Qwen3-0.6B")) == "<think>\n\n</think>\n\n"
    assert off_prefill_after(fmt, render("Qwen-QwQ-32B")) == ""


# ------------------------------------------------------------------------------------------ splitting

# (format, inside, closed, reply, reasoning, answer, reasoning_closed)
REPLIES = [
    ("think", False, False,
     "<think>\nThe user greets me. I should reply politely.\n</think>\n\nHello! How can I help you today?",
     "The user greets me. I should reply politely.\n", "Hello! How can I help you today?", True),
    ("think", True, False,  # a DeepSeek-R1 distill: the prompt opened the block; "</thin" is not its end
     "Okay, 2 + 2. A stray </thin here, then <think> again.\n</think>\n\nThe answer is **4**.",
     "Okay, 2 + 2. A stray </thin here, then <think> again.\n", "The answer is **4**.", True),
    ("think", False, False, "Paris is the capital of France.", "", "Paris is the capital of France.", False),
    ("think", False, False, "<think>\nLet me count the primes below 100: 2, 3, 5, 7",
     "Let me count the primes below 100: 2, 3, 5, 7", "", False),
    ("think", True, False, "Still thinking when the tokens ran out <", "Still thinking when the tokens ran out <",
     "", False),
    ("think", False, True, "\n\nSure: <think> here is just text.", "", "Sure: <think> here is just text.", False),
    ("harmony", False, False,
     "<|channel|>analysis<|message|>User asks 2+2. Easy: 4.<|end|><|start|>assistant<|channel|>final"
     "<|message|>2 + 2 = 4.<|return|>",
     "User asks 2+2. Easy: 4.", "2 + 2 = 4.", True),
    ("harmony", False, False,
     "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
     'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
     "Need the weather.",
     '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>', True),
    ("harmony", False, False,
     ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>', "",
     'to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>', False),
    ("harmony", False, False,
     "<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking now."
     "<|end|><|start|>assistant<|channel|>final<|message|>Done.",
     "Plan.", "Checking now.Done.", True),
    ("mistral_think", False, False, "[THINK]6 times 7 is 42.[/THINK]The result is 42.", "6 times 7 is 42.",
     "The result is 42.", True),
    ("granite", False, False, "<think>Simple sum.</think>\n<response>It is 4.</response>", "Simple sum.",
     "It is 4.", True),
    ("command_r7b", False, False,
     "<|START_THINKING|>Plan: answer.<|END_THINKING|><|START_RESPONSE|>Four.<|END_RESPONSE|>", "Plan: answer.",
     "Four.", True),
    ("gemma_thought", False, False, "<|channel>thought\nAdd them.<channel|>It is 4.", "Add them.", "It is 4.", True),
]


def chunkings(text: str) -> list[list[str]]:
    """Fixed chunks of 1, 2 and 3 characters at every offset, and every cut into three pieces."""
    out = []
    for size in (1, 2, 3):
        for offset in range(size):
            out.append([text[:offset]] + [text[i:i + size] for i in range(offset, len(text), size)])
    for a in range(len(text) + 1):
        for b in range(a, len(text) + 1, 3):
            out.append([text[:a], text[a:b], text[b:]])
    return out


def split(splitter: ReasoningSplitter, chunks: list[str]) -> list[tuple[bool, str]]:
    pieces = [piece for chunk in chunks for piece in splitter.feed(chunk)] + splitter.flush()
    merged: list[tuple[bool, str]] = []
    for kind, text in pieces:
        assert text
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def joined(splitter: ReasoningSplitter, reply: str) -> tuple[str, str]:
    pieces = split(splitter, [reply])
    return "".join(t for r, t in pieces if r), "".join(t for r, t in pieces if not r)


@pytest.mark.parametrize(("fmt", "inside", "closed", "reply", "reasoning", "answer", "was_closed"), REPLIES)
def test_the_split_does_not_depend_on_the_chunks(
    fmt: str, inside: bool, closed: bool, reply: str, reasoning: str, answer: str, was_closed: bool
):
    reference = split(ReasoningSplitter(BY_NAME[fmt], inside, closed), [reply])
    assert "".join(t for r, t in reference if r) == reasoning
    assert "".join(t for r, t in reference if not r) == answer
    for chunks in chunkings(reply):
        splitter = ReasoningSplitter(BY_NAME[fmt], inside, closed)
        assert split(splitter, chunks) == reference, chunks
        assert splitter.reasoning_closed is was_closed
        assert splitter.answer_started is bool(answer)


def test_only_a_possible_marker_is_held_back():
    splitter = ReasoningSplitter(BY_NAME["think"], inside=True)
    assert splitter.feed("Adding 2 and 2</thi") == [(True, "Adding 2 and 2")]
    assert splitter.in_reasoning and not splitter.reasoning_closed
    assert splitter.feed("nk>\n\n") == []
    assert splitter.reasoning_closed and not splitter.in_reasoning and not splitter.answer_started
    assert splitter.feed("4 <") == [(False, "4 <")]  # the answer has no marker to wait for
    assert splitter.answer_started


def test_the_start_waits_only_while_it_could_be_the_open_marker():
    splitter = ReasoningSplitter(BY_NAME["think"])
    assert splitter.feed("\n<thi") == []
    assert splitter.feed("s is an answer") == [(False, "<this is an answer")]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_budget_close_ends_the_reasoning_of_every_format(fmt):
    splitter = ReasoningSplitter(fmt, inside=True)
    pieces = split(splitter, ["Thinking hard", fmt.budget_close, "The answer."])
    # Whitespace before the close marker stays in the reasoning: only a marker is ever held back.
    assert [(kind, text.rstrip()) for kind, text in pieces] == [(True, "Thinking hard"), (False, "The answer.")]
    assert splitter.reasoning_closed


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_is_whole(fmt):
    assert fmt.open and fmt.close and fmt.detect and fmt.budget_close
    assert fmt.channels == (fmt.name == "harmony")
    assert fmt.special_tokens or "<|" not in fmt.open
