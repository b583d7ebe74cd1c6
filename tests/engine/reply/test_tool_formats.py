"""Tool-call formats: which real templates speak which, and parsing the calls back out of streamed answers.

Every reply is fed in chunks of every size from 1 to 5 characters: the content and the calls must not
depend on the cut. Arguments hold nested objects and strings with the markers' own characters.
"""

from __future__ import annotations

import json

import pytest

from engine.reply.reasoning_formats import FORMATS as REASONING_FORMATS
from engine.reply.reasoning_formats import ReasoningSplitter
from engine.reply.tool_formats import (
    FORMATS,
    ParsedCall,
    ToolCallParseError,
    ToolCallStream,
    check_calls,
    detect_tool_format,
    template_supports_tools,
)
from tests.paths import CHAT_TEMPLATES

TEMPLATES = CHAT_TEMPLATES
BY_NAME = {fmt.name: fmt for fmt in FORMATS}

EXPECTED_FORMAT = {
    "CohereForAI-c4ai-command-r-plus-tool_use": None,  # "Action: ```json" lists, not parsed here
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command_r7b",
    "GLM-4.6": None,  # <tool_call>name<arg_key>…: XML arguments
    "HuggingFaceTB-SmolLM2-135M-Instruct": None,
    "HuggingFaceTB-SmolLM3-3B": None,  # this template takes no tools
    "LFM2.5-8B-A1B": None,  # Python-like calls
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral_args",
    "NVIDIA-Nemotron-Nano-v2": "nemotron",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "hermes",
    "Qwen-QwQ-32B": "hermes",
    "Qwen-Qwen2.5-7B-Instruct": "hermes",
    "Qwen-Qwen3-0.6B": "hermes",
    "Qwen3-Coder": None,  # <tool_call><function=…>: XML parameters
    "Qwen3.5-4B": None,
    "Reka-Edge": "hermes",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": None,  # these three templates never show the tools
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": None,
    "deepseek-ai-DeepSeek-V3.1": None,
    "google-gemma-2-2b-it": None,
    "google-gemma-4-31B-it": None,  # call:name{key:<|"|>value<|"|>}: not JSON
    "ibm-granite-granite-3.3-2B-Instruct": "granite",
    "ibm-granite-granite-4.0": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct": "llama3",
    "microsoft-Phi-3.5-mini-instruct": None,
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral_args",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral",
    "moonshotai-Kimi-K2": "kimi_k2",
    "openai-gpt-oss-120b": "harmony",
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
NOTE = {
    "type": "function",
    "function": {"name": "save_note", "parameters": {"type": "object", "properties": {"note": {"type": "object"}}}},
}

# Arguments whose strings hold what the formats use as markers.
TRICKY = {"note": {"title": "</tool_call> & [TOOL_CALLS] <|call|> ]}", "tags": ["a", {"b": "}<|end|>"}]}}
T = json.dumps(TRICKY)
PARIS = ParsedCall("get_weather", '{"city": "Paris"}')
NOTE_CALL = ParsedCall("save_note", json.dumps(TRICKY))


def source(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def test_every_fixture_template_is_in_the_table():
    assert sorted(EXPECTED_FORMAT) == sorted(p.stem for p in TEMPLATES.glob("*.jinja"))


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED_FORMAT.items()))
def test_detection_on_the_real_templates(name: str, expected: str | None):
    fmt = detect_tool_format(source(name))
    assert (fmt.name if fmt else None) == expected


@pytest.mark.parametrize(
    ("name", "supports"),
    [
        ("Qwen-Qwen2.5-7B-Instruct", True), ("Qwen-Qwen3-0.6B", True),
        ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", True), ("meta-llama-Llama-3.1-8B-Instruct", True),
        ("mistralai-Mistral-Nemo-Instruct-2407", True), ("Mistral-Small-3.2-24B-Instruct-2506", True),
        ("openai-gpt-oss-120b", True),
        ("HuggingFaceTB-SmolLM2-135M-Instruct", False), ("google-gemma-2-2b-it", False),
        ("HuggingFaceTB-SmolLM3-3B", False),  # renders role "tool", but never lists tools
    ],
)
def test_template_supports_tools(name: str, supports: bool):
    assert template_supports_tools(source(name)) is supports


# (format, answer, content, calls)
REPLIES = [
    ("hermes", 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     "Let me check.\n", [PARIS]),
    ("hermes",
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
     f'<tool_call>\n{{"name": "save_note", "arguments": {T}}}\n</tool_call>',
     "", [PARIS, NOTE_CALL]),
    ("hermes", "Tags like <tool> or <tool_ are fine in prose.", "Tags like <tool> or <tool_ are fine in prose.", []),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [PARIS]),
    ("llama3", f'\n{{ "type": "function", "name": "get_weather", "parameters": {{"city": "Paris"}}}}; '
     f'{{"name": "save_note", "parameters": {T}}}', "\n", [PARIS, NOTE_CALL]),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [PARIS]),
    ("llama3", '{"answer": 42, "name": "not a call"}', '{"answer": 42, "name": "not a call"}', []),
    ("mistral",
     f'[TOOL_CALLS] [{{"name": "get_weather", "arguments": {{"city": "Paris"}}, "id": "a1b2c3d4e"}}, '
     f'{{"name": "save_note", "arguments": {T}}}]',
     "", [PARIS, NOTE_CALL]),
    ("mistral_args", f'I will look.[TOOL_CALLS]get_weather[ARGS]{{"city": "Paris"}}[TOOL_CALLS]save_note[ARGS]{T}',
     "I will look.", [PARIS, NOTE_CALL]),
    ("mistral_args", '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}', "", [PARIS]),
    ("harmony",
     '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
     "", [PARIS]),
    ("harmony", f"to=functions.save_note<|channel|>commentary json<|message|>{T}", "", [NOTE_CALL]),
    ("harmony", "Checking.<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
     '{"city": "Paris"}<|call|><|start|>assistant<|channel|>commentary to=functions.save_note json'
     f"<|message|>{T}<|call|>",
     "Checking.", [PARIS, NOTE_CALL]),
    ("kimi_k2",
     'Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
     '{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>functions.save_note:1<|tool_call_argument_begin|>'
     f"{T}<|tool_call_end|><|tool_calls_section_end|>",
     "Sure.", [PARIS, NOTE_CALL]),
    ("nemotron",
     f'<TOOLCALL>[{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}, {{"name": "save_note", '
     f'"arguments": {T}}}]</TOOLCALL>',
     "", [PARIS, NOTE_CALL]),
    ("nemotron", '<TOOLCALL>[{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]</TOOLCALL>', "",
     [PARIS]),  # its template shows the arguments as a string: accepted as such
    ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "", [PARIS]),
    ("command_r7b",
     '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}\n]'
     "<|END_ACTION|>",
     "", [PARIS]),
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\nDone.',
     "Done.", [PARIS]),  # text after the calls is content too
]


def stream(fmt: str, answer: str, size: int) -> tuple[str, list[ParsedCall]]:
    parser = ToolCallStream(BY_NAME[fmt])
    shown = "".join(parser.feed(answer[i:i + size]) for i in range(0, len(answer), size))
    rest, calls = parser.finish()
    return shown + rest, calls


@pytest.mark.parametrize(("fmt", "answer", "content", "calls"), REPLIES)
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_calls_are_parsed_whatever_the_chunks(fmt: str, answer: str, content: str, calls: list, size: int):
    assert stream(fmt, answer, size) == (content, calls)


def test_content_is_shown_at_once_but_a_possible_marker():
    parser = ToolCallStream(BY_NAME["hermes"])
    assert parser.feed("Hello <tool") == "Hello "
    assert parser.feed("s are fun") == "<tools are fun"
    assert parser.feed(" <tool_call>\n{") == " " and parser.in_call
    assert parser.feed('"name": "x"}') == ""


def test_a_llama_answer_is_held_only_while_it_could_be_a_call():
    parser = ToolCallStream(BY_NAME["llama3"])
    assert parser.feed(' {"na') == ""
    assert parser.feed("p") == ' {"nap'


def test_each_call_is_reported_when_its_end_marker_arrives():
    parser = ToolCallStream(BY_NAME["hermes"])
    parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_ca')
    assert parser.completed_calls() == []
    parser.feed('ll>\n<tool_call>\n{"name": "save_note", "arguments": {"note"')
    assert parser.completed_calls() == [PARIS]
    parser.feed(': {}}}\n</tool_call>')
    assert parser.completed_calls() == [PARIS, ParsedCall("save_note", '{"note": {}}')]


def test_harmony_reports_a_call_at_its_call_marker_and_a_format_without_end_markers_only_at_the_end():
    harmony = ToolCallStream(BY_NAME["harmony"])
    harmony.feed('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}')
    assert harmony.completed_calls() == []
    harmony.feed("<|call|>")
    assert harmony.completed_calls() == [PARIS]
    mistral = ToolCallStream(BY_NAME["mistral_args"])
    mistral.feed('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}')
    assert mistral.completed_calls() == [] and mistral.finish() == ("", [PARIS])


@pytest.mark.parametrize(
    ("fmt", "answer", "message"),
    [
        ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>',
         "invalid JSON in the tool call: Expecting ',' delimiter"),
        ("hermes", "<tool_call>\nget_weather(city='Paris')\n</tool_call>", "invalid JSON in the tool call"),
        ("hermes", '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>', "the tool call names no function"),
        ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": ["Paris"]}</tool_call>',
         "the arguments of 'get_weather' are not a JSON object"),
        ("hermes", "Let me look that up. <tool_call>\n", "the tool call ends before its JSON"),
        ("mistral_args", '[TOOL_CALLS][ARGS]{"city": "Paris"}', "the tool call names no function"),
        ("mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Par', "invalid JSON in the tool call"),
        ("harmony", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>Paris<|call|>",
         "invalid JSON in the tool call"),
    ],
)
def test_malformed_calls_raise_saying_what_is_wrong(fmt: str, answer: str, message: str):
    parser = ToolCallStream(BY_NAME[fmt])
    shown = parser.feed(answer)
    with pytest.raises(ToolCallParseError, match=message.replace("(", r"\(")) as caught:
        parser.finish()
    assert shown + caught.value.text == answer  # the caller can show the raw text as content


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (ParsedCall("get_time", "{}"), "unknown function 'get_time'"),
        (ParsedCall("get_weather", '{"unit": "c"}'),
         "arguments of 'get_weather' do not match its parameters: 'city' is a required property"),
        (ParsedCall("get_weather", '{"city": "Paris", "unit": "kelvin"}'),
         "arguments of 'get_weather' do not match its parameters: unit: 'kelvin' is not one of"),
        (ParsedCall("save_note", '{"note": "text"}'),
         "arguments of 'save_note' do not match its parameters: note: 'text' is not of type 'object'"),
    ],
)
def test_check_calls_against_the_request_tools(call: ParsedCall, message: str):
    check_calls([PARIS, NOTE_CALL], [WEATHER, NOTE])  # these fit
    with pytest.raises(ToolCallParseError, match=message):
        check_calls([PARIS, call], [WEATHER, NOTE])


def test_a_broken_schema_in_the_request_is_reported_as_such():
    broken = {"type": "function", "function": {"name": "f", "parameters": {"type": "no-such-type"}}}
    with pytest.raises(ToolCallParseError, match="the parameters of 'f' are not a valid JSON schema"):
        check_calls([ParsedCall("f", "{}")], [broken])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_calls_written_from_the_format_data_parse_back(fmt):
    """What a grammar would force (prefix, arguments, suffix, separator, list) is what the parser reads."""
    calls = [PARIS, NOTE_CALL]
    body = fmt.separator.join(fmt.prefix(c.name) + c.arguments + fmt.call_suffix for c in calls)
    written = fmt.list_prefix + body + fmt.list_suffix
    for size in (1, 3, 7):
        assert stream(fmt.name, written, size) == ("", calls)


def test_a_harmony_reply_through_the_reasoning_splitter_then_the_tool_stream():
    reply = (
        "<|channel|>analysis<|message|>Need the weather in Paris.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'
    )
    splitter = ReasoningSplitter(next(f for f in REASONING_FORMATS if f.name == "harmony"))
    parser = ToolCallStream(BY_NAME["harmony"])
    reasoning, shown = "", ""
    for i in range(0, len(reply), 2):
        for is_reasoning, text in splitter.feed(reply[i:i + 2]):
            if is_reasoning:
                reasoning += text
            else:
                shown += parser.feed(text)
    assert splitter.flush() == []
    assert (reasoning, shown, parser.completed_calls(), parser.finish()) == (
        "Need the weather in Paris.", "", [PARIS], ("", [PARIS])
    )
