"""No widget writes a colour down: they take the palette's roles (or app.gui.common.theme.status_colors), so a
theme change recolours them. common/theme.py is where the palettes are defined; the other entries of the
allow-list are files still to convert, each of which must still hold a colour (a converted file
leaves the list)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from tests.paths import REPO

GUI = REPO / "app" / "gui"
THEME = "common/theme.py"
NOT_YET_CONVERTED: set[str] = set()
# In string literals: #rgb / #rrggbb / #aarrggbb, rgb(…) / rgba(…), or a colour name in a CSS colour.
_IN_TEXT = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})\b|\brgba?\s*\(|"
                      r"\b(?:color|background(?:-color)?)\s*:\s*(?!palette)[a-z]{3,}\b")
# In code: a QColor made from literal numbers or a name, and Qt's named colours (transparent is none).
_IN_CODE = re.compile(r"\bQColor\s*(?:\.\s*from\w+\s*)?\(\s*(?:\d|['\"]|Qt\b)|"
                      r"\bQt\s*\.\s*(?:GlobalColor\s*\.\s*)?(?!transparent\b)(?:red|green|blue|black|white|gray|"
                      r"darkGray|lightGray|yellow|cyan|magenta|darkRed|darkGreen|darkBlue)\b")


def colours_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of each hard-coded colour in Python `source`; comments and docstrings do not count."""
    found: list[tuple[int, str]] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    code, depth = [], 0  # depth: inside how many brackets (a string starting a line there is an argument)
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type == tokenize.STRING:
            previous = tokens[i - 1].type if i else tokenize.NEWLINE
            if depth == 0 and previous in (tokenize.INDENT, tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT):
                continue  # a docstring (a bare string statement) is prose
            found += [(tok.start[0], m.group()) for m in _IN_TEXT.finditer(tok.string)]
            code.append((tok.start[0], '""'))  # QColor("…") is a literal colour too
        elif tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            code.append((tok.start[0], tok.string))
    # The code as one line of tokens with a space between, each character's source line kept.
    text, lines = "", []
    for line, part in code:
        text += part + " "
        lines += [line] * (len(part) + 1)
    found += [(lines[m.start()], m.group()) for m in _IN_CODE.finditer(text)]
    return sorted(found)


def widget_files() -> dict[str, Path]:
    return {str(p.relative_to(GUI)): p for p in sorted(GUI.rglob("*.py"))}


def test_the_check_finds_what_it_looks_for():
    sample = '''
"""Docstring naming #ffffff is prose."""
label.setStyleSheet("color: #b00020;")  # a comment with #123456 does not count
a = QColor(10, 20, 30)
b = QColor("#4e79a7")
c = QColor.fromHsv(0, 200, 200)
d = Qt.GlobalColor.red
e = f"<span style='color:{role};'>"
f = "background: white"
g = pixmap.fill(Qt.GlobalColor.transparent)
h = self.palette().color(QPalette.ColorRole.Highlight)
i = "#banner { border: 1px solid palette(mid); }"
j = label.setStyleSheet(
    "color: #b3261e;")
'''
    assert [line for line, _ in colours_in(sample)] == [3, 4, 5, 5, 6, 7, 9, 14]


def test_no_widget_file_holds_a_colour():
    offenders = {name: colours_in(path.read_text(encoding="utf-8")) for name, path in widget_files().items()
                 if name != THEME and name not in NOT_YET_CONVERTED}
    assert {name: hits for name, hits in offenders.items() if hits} == {}, \
        "take the colour from the palette (or app.gui.common.theme.status_colors)"


def test_the_allow_list_holds_only_files_still_to_convert():
    files = widget_files()
    assert colours_in(files[THEME].read_text(encoding="utf-8")), "the palettes are written down in theme.py"
    for name in NOT_YET_CONVERTED:
        assert name in files, f"{name} is gone: take it off the list"
        assert colours_in(files[name].read_text(encoding="utf-8")), f"{name} is converted: take it off the list"
