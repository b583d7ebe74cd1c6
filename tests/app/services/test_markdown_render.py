"""Markdown to Qt rich text: safe, highlighted, fast."""

from __future__ import annotations

from app.services.markdown_render import render_block, render_markdown, split_blocks


def test_basic_markdown():
    html = render_markdown("Hello **bold** and `code`\n\n- one\n- two\n")
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "<li>one</li>" in html


def test_code_blocks_are_highlighted_with_inline_styles():
    html = render_markdown("```python\ndef f(x):\n    return x < 2\n```\n")
    assert html.startswith("<pre style=")
    assert '<span style="color:' in html and "class=" not in html
    assert "&lt;" in html  # code text is escaped


def test_unknown_language_is_plain_escaped_code():
    html = render_markdown("```nosuchlang\n<b>x</b>\n```\n")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html


def test_raw_html_and_scripts_from_the_model_are_escaped():
    html = render_markdown('<script>alert(1)</script>\n\nhi <img src=x onerror="alert(1)"> <b>bold</b>')
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html


def test_dangerous_links_and_images_are_not_live():
    html = render_markdown("[click](javascript:alert(1)) ![pic](/etc/passwd.png)")
    assert 'href="javascript' not in html
    assert "<img" not in html and "[pic]" in html


def test_split_blocks_keeps_fences_and_continuations_whole():
    text = "para\n\n- a\n- b\n\n  still b\n\n```py\nx = 1\n\ny = 2\n```\n\ntail"
    blocks = split_blocks(text)
    assert blocks == ["para\n\n", "- a\n- b\n\n  still b\n\n", "```py\nx = 1\n\ny = 2\n```\n\n", "tail"]
    assert "".join(blocks) == text
    assert render_markdown(text).count("<pre") == 1


def test_unclosed_fence_runs_to_the_end():
    assert split_blocks("intro\n\n```\ncode\n\nmore") == ["intro\n\n", "```\ncode\n\nmore"]


def _reply(n_chars: int) -> str:
    para = "Here is the *approach*, with `inline code` and a [link](https://example.com). " * 3 + "\n\n"
    code = (
        "```python\n" + "".join(f"def f{i}(x):\n    return x * {i}  # note\n" for i in range(10)) + "```\n\n"
    )
    text = ""
    i = 0
    while len(text) < n_chars:
        text += f"{i}. {para}" + (code if i % 3 == 2 else "")
        i += 1
    return text[:n_chars]


def test_a_streaming_frame_renders_only_its_new_block():
    # What keeps an 8,000-character reply cheap to re-render at every frame; the time it takes
    # is a benchmark (tests/bench/markdown_render.py), not a limit a loaded machine could miss.
    text = _reply(8000)
    blocks = split_blocks(text)
    distinct = len(set(blocks))  # the code blocks repeat
    assert len(blocks) > 10
    render_block.cache_clear()
    whole = render_markdown(text)
    assert render_block.cache_info().misses == distinct
    frame = render_markdown(text + " more")  # the next streamed token
    assert render_block.cache_info().misses == distinct + 1  # only the last block is new
    assert frame.startswith(whole[: whole.rindex(render_block(blocks[-1]))])
