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
    assert time.monotonic() - t0 < 2.0


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
    assert time.monotonic() - t0 < 5.0


def test_template_that_does_not_compile_is_a_template_error():
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for m in messages %}")


def test_trace_hook_of_the_caller_is_restored():
    import sys

    before = sys.gettrace()
    ChatTemplate(CHATML).render(MESSAGES)
    assert sys.gettrace() is before
