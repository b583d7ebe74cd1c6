"""Real chat templates of popular model families render in our sandbox exactly as in transformers.

The templates are the models' own (tests/fixtures/chat_templates/, README there names each
model). The reference is transformers' `render_jinja_template`, the renderer behind
`apply_chat_template` that the models' authors test with; the two texts must be identical.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from engine.chat_template import ChatTemplate
from engine.protocol import ChatMessage

TEMPLATES = Path(__file__).parent.parent / "fixtures" / "chat_templates"
BOS, EOS = "<s>", "</s>"

# Markup, quotes, non-ASCII and an emoji: what an HTML-escaping or ASCII-only `tojson` would change.
SYSTEM = ChatMessage("system", 'You are terse. Answer in <b>bold</b> & keep "quotes".')
TURNS = [
    ChatMessage("user", "Héllo <there>!"),
    ChatMessage("assistant", "Hi! 😀 How can I help?"),
    ChatMessage("user", "What's the weather in Zürich?"),
]
ANSWERED = [*TURNS, ChatMessage("assistant", "Sunny, 21 °C.")]

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": 'Weather in °C for a <city> & its "region"',
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
        },
    }
]
# Command R+'s tool_use template takes Cohere's own tool shape.
COHERE_TOOLS = [
    {
        "name": "get_weather",
        "description": 'Weather in °C for a <city> & its "region"',
        "parameter_definitions": {
            "city": {"description": "e.g. Zürich", "type": "str", "required": True},
        },
    }
]

# Templates that cannot render the common case: Gemma 2 refuses a system message; the two
# "tool_use" variants are meant for requests with tools only.
NO_SYSTEM = {"google-gemma-2-2b-it"}
TOOLS_ONLY = {"CohereForAI-c4ai-command-r-plus-tool_use", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"}
TOOL_SHAPE = {"CohereForAI-c4ai-command-r-plus-tool_use": COHERE_TOOLS}


def template_names() -> list[str]:
    return sorted(p.stem for p in TEMPLATES.glob("*.jinja"))


def cases() -> list[Any]:
    out = []
    for name in template_names():
        source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
        if name not in TOOLS_ONLY:
            out.append(pytest.param(name, "chat", id=f"{name}-chat"))
            out.append(pytest.param(name, "answered", id=f"{name}-answered"))
        if "tools" in source:
            out.append(pytest.param(name, "tools", id=f"{name}-tools"))
    return out


def conversation(name: str, case: str) -> tuple[list[ChatMessage], bool, list[dict] | None]:
    """(messages, add_generation_prompt, tools) of one case."""
    system = [] if name in NO_SYSTEM else [SYSTEM]
    if case == "answered":  # a finished exchange, as a prefix is rendered: no generation prompt
        return [*system, *ANSWERED], False, None
    tools = TOOL_SHAPE.get(name, OPENAI_TOOLS) if case == "tools" else None
    return [*system, *TURNS], True, tools


def transformers_render(source: str, messages: list[ChatMessage], generation_prompt: bool,
                        tools: list[dict] | None) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    chats = [[{"role": m.role, "content": m.content} for m in messages]]
    rendered, _ = render_jinja_template(
        chats, tools=tools, chat_template=source, add_generation_prompt=generation_prompt,
        bos_token=BOS, eos_token=EOS,
    )
    return rendered[0]


def test_the_fixtures_cover_at_least_fifteen_families_and_each_is_named():
    names = template_names()
    readme = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    assert len(names) >= 15
    assert [n for n in names if f"`{n}.jinja`" not in readme] == []


@pytest.mark.parametrize(("name", "case"), cases())
def test_renders_as_transformers_does(name: str, case: str):
    source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    messages, generation_prompt, tools = conversation(name, case)
    # Some templates print today's date (strftime_now): rendered on both sides of ours, so a
    # midnight in between cannot make them differ.
    before = transformers_render(source, messages, generation_prompt, tools)
    ours = ChatTemplate(source, bos_token=BOS, eos_token=EOS).render(messages, generation_prompt, tools=tools)
    after = transformers_render(source, messages, generation_prompt, tools)
    assert ours in (before, after)
    assert "Zürich" in ours  # the conversation is there, not an empty render that happens to match


def test_the_templates_exercise_the_features_that_were_refused():
    """The fixtures hold what the sandbox once rejected, so the test above covers each."""
    sources = {n: (TEMPLATES / f"{n}.jinja").read_text(encoding="utf-8") for n in template_names()}
    uses = {
        feature: [n for n, s in sources.items() if re.search(pattern, s)]
        for feature, pattern in (("break", r"\{%-?\s*break\s*-?%\}"), ("generation", r"\{%-?\s*generation\s*-?%\}"),
                                 ("tojson", r"\|\s*tojson"))
    }
    assert uses["break"] and uses["generation"] and uses["tojson"], uses
