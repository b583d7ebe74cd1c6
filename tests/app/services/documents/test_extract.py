"""Text and structure out of each kind of file Tailor reads, from real files written here."""

from __future__ import annotations

from pathlib import Path

from app.services.documents.extract import extract_document, kind_of_name
from tests.app.services.documents import makers


def _blocks(document):
    return [(document.block_text(block), block.headings, block.is_heading, block.page) for block in document.blocks]


def test_plain_text_paragraphs_have_offsets_into_the_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("First paragraph\nstill first.\n\n\nSecond one.\r\n\r\nThird.\n", encoding="utf-8")
    document = extract_document(path)
    assert (document.name, document.kind, document.pages) == ("notes.txt", "text", None)
    assert [text for text, *_ in _blocks(document)] == ["First paragraph\nstill first.", "Second one.", "Third."]
    assert all(document.text[b.start:b.end] == document.block_text(b) for b in document.blocks)
    assert document.warnings == ()


def test_markdown_headings_make_the_path_and_a_hash_in_a_fence_is_code(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Install\n\nRun the installer.\n\n## On Linux\n\n```sh\n# not a heading\nmake\n```\n\n"
                    "| a | b |\n|---|---|\n| 1 | 2 |\n\nSetext title\n============\n\nLast words.\n")
    document = extract_document(path)
    assert _blocks(document) == [
        ("Install", ("Install",), True, None),
        ("Run the installer.", ("Install",), False, None),
        ("On Linux", ("Install", "On Linux"), True, None),
        ("```sh\n# not a heading\nmake\n```", ("Install", "On Linux"), False, None),
        ("| a | b |\n|---|---|\n| 1 | 2 |", ("Install", "On Linux"), False, None),
        ("Setext title", ("Setext title",), True, None),
        ("Last words.", ("Setext title",), False, None),
    ]


def test_source_code_is_read_by_extension_as_code(tmp_path: Path) -> None:
    path = tmp_path / "tool.rs"
    path.write_text("fn main() {\n    run();\n}\n\nfn run() {}\n")
    document = extract_document(path)
    assert document.kind == "code" and kind_of_name("x.PY") == "code" and kind_of_name("Makefile") == "text"
    assert [text for text, *_ in _blocks(document)] == ["fn main() {\n    run();\n}", "fn run() {}"]
    assert kind_of_name("photo.png") is None and kind_of_name(".env") is None


def test_html_keeps_headings_and_text_and_drops_scripts_and_styles(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text("<html><head><title>T</title><style>p{color:red}</style><script>var secret=1;</script>"
                    "</head><body><h1>Report</h1><p>Intro <b>bold</b> text &amp; more.</p>"
                    "<h2>Numbers</h2><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>"
                    "<ul><li>one</li><li>two</li></ul><script>alert('x')</script><pre>  keep\n  spacing</pre>"
                    "</body></html>")
    document = extract_document(path)
    assert _blocks(document) == [
        ("Report", ("Report",), True, None),
        ("Intro bold text & more.", ("Report",), False, None),
        ("Numbers", ("Report", "Numbers"), True, None),
        ("k | v", ("Report", "Numbers"), False, None),
        ("a | 1", ("Report", "Numbers"), False, None),
        ("one", ("Report", "Numbers"), False, None),
        ("two", ("Report", "Numbers"), False, None),
        ("  keep\n  spacing", ("Report", "Numbers"), False, None),
    ]
    assert "secret" not in document.text and "color" not in document.text and "alert" not in document.text


def test_pdf_pages_are_numbered_and_bookmarks_give_headings(tmp_path: Path) -> None:
    path = makers.pdf_with_pages(tmp_path / "book.pdf", {2: "Second page words."}, 3,
                                 sections={1: "Opening", 3: "Closing"})
    document = extract_document(path)
    assert document.pages == 3 and document.warnings == ()
    body = [(b.page, b.headings) for b in document.blocks if not b.is_heading]
    assert body == [(1, ("Opening",)), (2, ("Opening",)), (3, ("Closing",))]
    assert "Second page words." in document.block_text(document.blocks[2])


def test_pdf_two_columns_read_column_by_column_a_table_row_by_row_and_a_page_without_text_named(
        tmp_path: Path) -> None:
    document = extract_document(makers.pdf_special_pages(tmp_path / "special.pdf"))
    page1 = " ".join(document.block_text(b).replace("\n", " ") for b in document.blocks if b.page == 1)
    assert page1.index("Left column begins") < page1.index("Left column ends") < page1.index("Right column begins")
    page2 = document.block_text(next(b for b in document.blocks if b.page == 2)).splitlines()
    assert page2 == ["Element Symbol Melting point", "Gallium Ga 29.76 C", "Tungsten W 3422 C"]
    assert not [b for b in document.blocks if b.page == 3]
    assert document.warnings[0].startswith("no text layer: page 3 ")


def test_docx_headings_nest_under_the_title_and_tables_come_where_they_stand(tmp_path: Path) -> None:
    document = extract_document(makers.word_document(tmp_path / "manual.docx"))
    assert document.kind == "docx"
    assert _blocks(document) == [
        ("Field Manual", ("Field Manual",), True, None),
        ("Setting up camp", ("Field Manual", "Setting up camp"), True, None),
        ("Pitch the tent on level ground away from dry riverbeds.", ("Field Manual", "Setting up camp"), False, None),
        ("Water", ("Field Manual", "Setting up camp", "Water"), True, None),
        ("Boil stream water for one minute before drinking it.", ("Field Manual", "Setting up camp", "Water"),
         False, None),
        ("Breaking camp", ("Field Manual", "Breaking camp"), True, None),
        ("Pack out everything you carried in.", ("Field Manual", "Breaking camp"), False, None),
        ("Item | Weight", ("Field Manual", "Breaking camp"), False, None),
        ("Stove | 340 g", ("Field Manual", "Breaking camp"), False, None),
    ]


def test_docx_merged_cells_appear_once_and_equal_cells_twice(tmp_path: Path) -> None:
    import docx

    word = docx.Document()
    table = word.add_table(rows=2, cols=3)
    merged = table.cell(0, 0).merge(table.cell(0, 2))
    merged.text = "Totals"
    for column, value in enumerate(("0", "0", "7")):
        table.cell(1, column).text = value
    word.save(str(tmp_path / "t.docx"))
    document = extract_document(tmp_path / "t.docx")
    assert [document.block_text(b) for b in document.blocks] == ["Totals", "0 | 0 | 7"]


def test_csv_rows_carry_the_header_and_the_dialect_is_sniffed(tmp_path: Path) -> None:
    path = tmp_path / "stock.csv"
    path.write_text("sku;name;count\nA1;bolt;40\nB2;\"nut; hex\";12\n")
    document = extract_document(path)
    assert [(document.block_text(b), b.header) for b in document.blocks] == [
        ("A1 | bolt | 40", "sku | name | count"), ("B2 | nut; hex | 12", "sku | name | count")]


def test_a_few_latin1_bytes_in_a_utf8_log_are_replaced_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_bytes(("line ok\n" * 200).encode() + "caf\xe9\n".encode("latin-1"))
    document = extract_document(path)
    assert document.text.endswith("caf\ufffd") and document.warnings == (
        "1 byte not valid UTF-8 replaced by \ufffd",)


def test_text_past_the_character_cap_is_cut_with_a_warning(tmp_path: Path) -> None:
    from app.services.documents.limits import DocumentLimits

    path = tmp_path / "long.txt"
    path.write_text("word " * 10_000)
    document = extract_document(path, DocumentLimits(max_text_chars=1_000))
    assert len(document.text) <= 1_000
    assert "only the first 1,000 characters were read (MAX_TEXT_CHARS)" in document.warnings
