"""Real documents written for the tests: PDFs by fpdf2 (and by hand, for ones no writer would make), DOCX
files by python-docx, zips by zipfile. Everything is written under the folder a test passes."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import docx
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

# Filler prose whose words never say what the tests look for: each page gets a different rotation, so
# pages differ without any of them holding a test's distinctive words.
_PROSE = ("The committee reviewed the quarterly schedule and agreed to revisit the budget. Staff noted "
           "that the corridor lighting had been replaced and the parking rota was unchanged. Several "
           "members asked for the minutes to be circulated earlier next time. The library extended its "
           "opening hours during the examination period.")
_FILLER = _PROSE.split()


def filler(seed: int, words: int = 120) -> str:
    return " ".join(_FILLER[(seed * 7 + i) % len(_FILLER)] for i in range(words))


def _pdf() -> FPDF:
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=11)
    return pdf


def pdf_with_pages(path: Path, pages: dict[int, str], count: int, *, sections: dict[int, str] | None = None) -> Path:
    """A PDF of `count` pages; page n holds pages[n] (filler where absent); sections[n] a bookmark on page n."""
    pdf = _pdf()
    for number in range(1, count + 1):
        pdf.add_page()
        if sections and number in sections:
            pdf.start_section(sections[number])
        pdf.multi_cell(0, 6, pages.get(number, filler(number)))
    pdf.output(str(path))
    return path


def pdf_special_pages(path: Path) -> Path:
    """Page 1: two columns; page 2: a table; page 3: a drawing and no text (a scan would be an image)."""
    pdf = _pdf()
    pdf.add_page()
    top = pdf.get_y()
    pdf.set_xy(10, top)
    pdf.multi_cell(90, 6, "Left column begins. Glaciers carve valleys slowly over many thousands of years. "
                          "Left column ends.")
    pdf.set_xy(110, top)
    pdf.multi_cell(90, 6, "Right column begins. Volcanoes build islands from cooled basalt layers. "
                          "Right column ends.")
    pdf.add_page()
    with pdf.table() as table:
        for row in (("Element", "Symbol", "Melting point"), ("Gallium", "Ga", "29.76 C"),
                    ("Tungsten", "W", "3422 C")):
            cells = table.row()
            for cell in row:
                cells.cell(cell)
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    pdf.output(str(path))
    return path


def encrypted_pdf(path: Path, user_password: str = "secret") -> Path:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(bytes(_pdf_bytes_with_text("classified")))))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    with path.open("wb") as out:
        writer.write(out)
    return path


def _pdf_bytes_with_text(text: str) -> bytearray:
    pdf = _pdf()
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    return pdf.output()


def handmade_pdf(path: Path, *, page_count: int = 1, size: int | None = None) -> Path:
    """A one-page PDF whose page tree declares `page_count` pages and whose trailer declares `size`
    objects: what a bomb declares, in a few hundred bytes."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % page_count,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size or len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def word_document(path: Path) -> Path:
    """A DOCX: a title, headings on two levels with body paragraphs, and a table."""
    document = docx.Document()
    document.add_heading("Field Manual", level=0)
    document.add_heading("Setting up camp", level=1)
    document.add_paragraph("Pitch the tent on level ground away from dry riverbeds.")
    document.add_heading("Water", level=2)
    document.add_paragraph("Boil stream water for one minute before drinking it.")
    document.add_heading("Breaking camp", level=1)
    document.add_paragraph("Pack out everything you carried in.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Item", "Weight"
    table.cell(1, 0).text, table.cell(1, 1).text = "Stove", "340 g"
    document.save(str(path))
    return path


def zip_declaring(path: Path, declared: int) -> Path:
    """A zip named as the caller likes whose central directory declares its one member unpacks to
    `declared` bytes (while holding a few): the sizes are patched in the directory, as a bomb's would be."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<w:document/>")
    data = bytearray(buffer.getvalue())
    central = data.rindex(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, declared)  # uncompressed size in the central directory
    path.write_bytes(bytes(data))
    return path


def real_zip_bomb(path: Path, megabytes: int) -> Path:
    """A zip whose member really unpacks to `megabytes` MB of zeros (a few KB each packed)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("word/document.xml", "w", force_zip64=True) as member:
        block = bytes(1 << 20)
        for _ in range(megabytes):
            member.write(block)
    return path
