"""The chat template sandbox: real Jinja, hostile templates from model files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.chat_template import ChatTemplate, ChatTemplateError, TemplateLimits
from engine.protocol import ChatMessage

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Far above the 0.3-2 s limits under test, far below what an uncapped template would take.
STOPPED_WITHIN_S = 30.0
MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]


def test_renders_chatml_with_generation_prompt():
    text = ChatTemplate(CHATML).render(MESSAGES)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_bos_token_and_raise_exception_are_available():
    template = ChatTemplate(
        "{{ bos_token }}{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}ok",
        bos_token="<s>",
    )
    assert template.render(MESSAGES) == "<s>ok"
    with pytest.raises(ChatTemplateError, match="system first"):
        template.render([ChatMessage("user", "x")])


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__.os.system('touch {marker}') }}",
        "{{ joiner.__init__.__globals__['os'].system('touch {marker}') }}",
        "{{ messages.__class__.__base__.__subclasses__() }}",
        "{{ namespace.__init__.__globals__.__builtins__['open']('{marker}', 'w') }}",
        "{{ lipsum.__globals__['os'].system('touch {marker}') }}",
    ],
)
def test_sandbox_escapes_are_refused_and_nothing_runs(source: str, tmp_path: Path):
    marker = tmp_path / "escaped"
    template = ChatTemplate(source.replace("{marker}", str(marker)))
    with pytest.raises(ChatTemplateError, match="unsafe|failed"):
        template.render(MESSAGES)
    assert not marker.exists()


def test_mutating_a_message_is_refused():
    template = ChatTemplate("{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages|length }}")
    with pytest.raises(ChatTemplateError):
        template.render(MESSAGES)


def test_endless_loop_is_stopped_by_the_time_limit():
    template = ChatTemplate(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        limits=TemplateLimits(time_s=0.3),
    )
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match="longer than"):
        template.render(MESSAGES)
    # Uncapped, the loop runs for hours: the bound tells "stopped" apart with room for a loaded machine.
    assert time.monotonic() - t0 < STOPPED_WITHIN_S


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * 10000000000 }}",
        "{{ 'ab' ** 1000 }}",
        "{{ 'x' | center(2000000000) }}",
        # Doubling by concatenation: stopped by the output, memory or time cap.
        "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
        "{{ ns.s }}",
        "{% for i in range(100000) %}{{ 'y' * 999 }}{% endfor %}",
    ],
)
def test_huge_output_is_refused(source: str):
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError):
        ChatTemplate(source).render(MESSAGES)
    assert time.monotonic() - t0 < STOPPED_WITHIN_S


def test_template_that_does_not_compile_is_a_template_error():
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for m in messages %}")


def _callers_tracer(frame, event, arg):  # a debugger's or coverage's hook, as far as render can tell
    return None


@pytest.mark.parametrize("source", [CHATML, "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"])
def test_trace_hook_of_the_caller_is_restored(source: str):
    """The deadline's hook replaces the caller's while rendering, and gives it back after, on error too."""
    import sys

    previous = sys.gettrace()
    sys.settrace(_callers_tracer)
    try:
        try:
            ChatTemplate(source, limits=TemplateLimits(time_s=0.2)).render(MESSAGES)
        except ChatTemplateError:
            pass
        after = sys.gettrace()
    finally:
        sys.settrace(previous)
    assert after is _callers_tracer


def test_loop_controls_work_as_in_transformers():
    template = ChatTemplate(
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.content }}"
        "{% if loop.index > 2 %}{% break %}{% endif %}|{% endfor %}"
    )
    messages = [ChatMessage("system", "S"), ChatMessage("user", "a"), ChatMessage("assistant", "b"),
                ChatMessage("user", "c")]
    assert template.render(messages) == "a|b"


def test_generation_block_renders_its_body_in_its_own_scope():
    template = ChatTemplate(
        "{% set x = 'outer' %}{% for m in messages %}{% if m.role == 'assistant' %}"
        "{% generation %}[{{ m.content }}]{% set x = 'inner' %}{% endgeneration %}{% else %}{{ m.content }}"
        "{% endif %}{% endfor %}{{ x }}"
    )
    assert template.render([ChatMessage("user", "q"), ChatMessage("assistant", "a")]) == "q[a]outer"


def test_tojson_is_plain_json_dumps():
    """No HTML escaping, no \\u escapes, keys in their order; indent and separators as json.dumps takes them."""
    template = ChatTemplate(
        "{{ {'z': '<b>&é😀', 'a': 1} | tojson }}\n{{ {'z': [1]} | tojson(indent=2) }}\n"
        "{{ {'k': 1, 'j': 2} | tojson(separators=(',', ':'), sort_keys=true) }}\n{{ 'é' | tojson(ensure_ascii=true) }}"
    )
    assert template.render(MESSAGES) == (
        '{"z": "<b>&é😀", "a": 1}\n{\n  "z": [\n    1\n  ]\n}\n{"j":2,"k":1}\n"\\u00e9"'
    )


@pytest.mark.parametrize(
    "source",
    ["{{ messages | tojson(indent=100000) }}", "{{ messages | tojson(indent=' ' * 1000) }}",
     "{{ messages | tojson(separators=(',' * 1000, ':')) }}"],
)
def test_tojson_cannot_multiply_the_output(source: str):
    with pytest.raises(ChatTemplateError, match="unsafe"):
        ChatTemplate(source).render(MESSAGES)


def test_tools_and_documents_are_defined_as_none_unless_given():
    source = "{{ tools is defined }} {{ tools is none }} {{ documents is none }}{% if tools %} {{ tools[0].name }}{% endif %}"
    assert ChatTemplate(source).render(MESSAGES) == "True True True"
    assert ChatTemplate(source).render(MESSAGES, tools=[{"name": "f"}]) == "True False True f"


def test_namespace_refuses_underscore_names():
    for source in ("{% set ns = namespace(_x=1) %}", "{% set ns = namespace() %}{% set ns._x = 1 %}"):
        with pytest.raises(ChatTemplateError, match="unsafe"):
            ChatTemplate(source).render(MESSAGES)
    assert ChatTemplate("{% set ns = namespace(n=1) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}").render(MESSAGES) == "2"


def test_output_past_the_cap_is_refused():
    template = ChatTemplate("{% for i in range(1000) %}{{ 'y' * 100 }}{% endfor %}",
                            limits=TemplateLimits(max_output_chars=50_000))
    with pytest.raises(ChatTemplateError, match="too much text"):
        template.render(MESSAGES)


def test_dict_and_dict_fromkeys_work_as_in_transformers():
    template = ChatTemplate("{{ dict(a=1, b=[2]) | tojson }} {{ dict.fromkeys(['x'], 0) | tojson }}")
    assert template.render(MESSAGES) == '{"a": 1, "b": [2]} {"x": 0}'
