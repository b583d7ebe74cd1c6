"""Markdown to HTML for Qt's rich text (QTextBrowser).

Model output is untrusted: raw HTML in it is escaped, never rendered, unsafe link schemes
(javascript:, file:, ...) are dropped by markdown-it's link validation, and images become
plain links so the view never loads a file or URL on the model's say-so. Fenced code is
highlighted by pygments with inline styles, which Qt's rich text understands (it ignores
CSS classes from a stylesheet it does not have). For the chat view (`code_headers`), each
fenced block gets a header line naming its language, with a Copy link whose href is the
placeholder CODE_COPY_HREF: the view numbers the links of a message and copies the block's
source text from `code_blocks` (the highlighted HTML is never what is copied). No Qt here.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from html import escape

from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

CODE_BACKGROUND = "#f4f5f7"
_PRE_STYLE = f"background-color:{CODE_BACKGROUND}; font-family:monospace; padding:6px; margin:"
# Braces are percent-encoded in every href markdown-it writes, so a link in the model's text never reads so.
CODE_COPY_HREF = "tailor-code:{}"
_FORMATTER = HtmlFormatter(noclasses=True, nowrap=True, style="default")


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Lexer | None:
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def highlight_code(code: str, lang: str, *, under_header: bool = False) -> str:
    """One code block as a `<pre>` with inline-styled spans (escaped plain text for unknown languages);
    `under_header`: no gap above it, where its header line sits."""
    lexer = _lexer(lang.strip().split(" ")[0].lower()) if lang.strip() else None
    body = highlight(code, lexer, _FORMATTER) if lexer is not None else escape(code, quote=False)
    margin = "0px 0px 4px 0px" if under_header else "4px 0px"
    return f'<pre style="{_PRE_STYLE}{margin};">{body.rstrip(chr(10))}</pre>\n'


def fence_language(info: str) -> str:
    """The language a fence names (its info string's first word), "" when it names none."""
    words = unescapeAll(info).split()
    return words[0] if words else ""


def _code_header(lang: str) -> str:
    """The line above a code block in the chat view: its language ("text" when the fence names none) and Copy."""
    return (
        f'<p style="background-color:{CODE_BACKGROUND}; margin:4px 0px 0px 0px;"><small>'
        f'<span style="font-family:monospace;">&nbsp;{escape(lang or "text")}</span>&nbsp;&nbsp;&nbsp;'
        f'<a href="{CODE_COPY_HREF}" title="Copy this code">Copy</a></small></p>\n'
    )


def _render_fence(self, tokens, idx, options, env) -> str:  # noqa: ANN001 (markdown-it renderer rule)
    token = tokens[idx]
    lang = fence_language(token.info)
    if not env.get("code_headers"):
        return highlight_code(token.content, lang)
    return _code_header(lang) + highlight_code(token.content, lang, under_header=True)


def _render_image(self, tokens, idx, options, env) -> str:  # noqa: ANN001 (markdown-it renderer rule)
    """Images become links showing their alt text: the view must not fetch anything itself."""
    token = tokens[idx]
    src = escape(token.attrGet("src") or "")
    alt = escape(self.renderInlineAsText(token.children or [], options, env)) or "image"
    return f'<a href="{src}">[{alt}]</a>'


def _render_table_open(self, tokens, idx, options, env) -> str:  # noqa: ANN001
    return '<table border="1" cellspacing="0" cellpadding="4">\n'


def _make_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("table_open", _render_table_open)
    return md


_MD = _make_parser()
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def split_blocks(text: str) -> list[str]:
    """Cut `text` into top-level Markdown blocks at blank lines outside code fences.

    Lines that are indented after a blank line (list continuations, nested code) stay with
    the block before them. A streaming reply only ever changes its last block, so the
    blocks before it are rendered once and kept.
    """
    blocks: list[str] = []
    current: list[str] = []
    fence = ""
    after_blank = False
    for line in text.splitlines(keepends=True):
        if fence:
            current.append(line)
            stripped = line.strip()
            if (
                stripped.startswith(fence)
                and stripped == stripped[0] * len(stripped)
                and len(line) - len(line.lstrip(" ")) < 4
            ):
                fence = ""
            continue
        if not line.strip():
            current.append(line)
            after_blank = True
            continue
        if after_blank and current and not line[0].isspace():
            blocks.append("".join(current))
            current = []
        after_blank = False
        match = _FENCE.match(line)
        if match and not (match.group(1)[0] == "`" and "`" in line[match.end() :]):
            fence = match.group(1)
        current.append(line)
    if current:
        blocks.append("".join(current))
    return blocks


@lru_cache(maxsize=1024)
def render_block(block: str, code_headers: bool = False) -> str:
    """HTML of one top-level block (cached: finished blocks of a streaming reply repeat); `code_headers`:
    each fenced block under a line with its language and a Copy link (the chat view's)."""
    return _MD.render(block, {"code_headers": code_headers})


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of `text`, in the order `render_markdown` shows them: parsed
    block by block as they are rendered, so the n-th Copy link of a message is the n-th block here. The
    code is the text between the fences, without the line break that ends its last line (a block still
    open, streaming, is what it has so far)."""
    found = []
    for block in split_blocks(text):
        for token in _MD.parse(block):
            if token.type == "fence":
                code = token.content
                found.append((fence_language(token.info), code[:-1] if code.endswith("\n") else code))
    return found


COMMON_LANGUAGES = (
    "python",
    "bash",
    "javascript",
    "typescript",
    "json",
    "c",
    "cpp",
    "rust",
    "go",
    "java",
    "sql",
)
_warm_up_started = threading.Event()
_warm_up_done = threading.Event()


def warm_up(languages: tuple[str, ...] = COMMON_LANGUAGES) -> None:
    """Compile the parser's and the common lexers' regexes now (~100 ms for some lexers)."""
    for lang in languages:
        highlight_code("x = 1\n", lang)
    _MD.render("*a* `b` [c](https://d)\n\n- e\n\n| f |\n|---|\n| g |\n")
    _warm_up_done.set()


def warm_up_in_background() -> None:
    """Run `warm_up` once per process on a daemon thread, so the first code block shown later
    does not stall the window while pygments compiles its lexer."""
    if not _warm_up_started.is_set():
        _warm_up_started.set()
        threading.Thread(target=warm_up, name="markdown-warm-up", daemon=True).start()


def wait_for_warm_up(timeout: float) -> bool:
    """Wait until the background warm-up finished; False after `timeout` seconds."""
    return _warm_up_done.wait(timeout)


def render_markdown(text: str, code_headers: bool = False) -> str:
    """HTML for `text`, safe to give to QTextBrowser.setHtml / QTextCursor.insertHtml (`code_headers`:
    see render_block)."""
    return "".join(render_block(block, code_headers) for block in split_blocks(text))
