"""Documents that are refused (issue 36's hostile input): each with its own error class, one line naming
the file and the cap, and without reading (a 2 GB file, a zip bomb) or opening (a FIFO) what must not be."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from app.services.documents import files
from app.services.documents.errors import (
    DocumentBomb,
    DocumentMissing,
    DocumentRefused,
    EncryptedDocument,
    FileTooLarge,
    NotARegularFile,
    NotText,
    UnsupportedFormat,
)
from app.services.documents.extract import extract_document
from app.services.documents.index.store import DocumentIndex
from app.services.documents.indexing import index_folder
from app.services.documents.limits import MAX_FILE_BYTES, DocumentLimits
from tests.app.services.documents import makers


def _refusal(path: Path, kind: type[DocumentRefused], limits: DocumentLimits | None = None) -> DocumentRefused:
    with pytest.raises(kind) as caught:
        extract_document(path, *([limits] if limits else []))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(path.name + " ")
    return caught.value


def _no_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Make any open of a document fail the test; the paths opened (empty when none was)."""
    opened: list[Path] = []

    def refuse(path, *args, **kwargs):
        opened.append(Path(path))
        raise AssertionError(f"{path} was opened")

    monkeypatch.setattr(files, "open_regular_file", refuse)
    return opened


def test_an_encrypted_pdf_says_so_and_asks_for_nothing(tmp_path: Path) -> None:
    error = _refusal(makers.encrypted_pdf(tmp_path / "locked.pdf"), EncryptedDocument)
    assert "is encrypted (password-protected)" in error.problem and "password" in error.problem


def test_a_pdf_with_only_an_owner_password_opens_like_in_a_viewer(tmp_path: Path) -> None:
    document = extract_document(makers.encrypted_pdf(tmp_path / "printable.pdf", user_password=""))
    assert "classified" in document.text


@pytest.mark.parametrize(("declared", "cap"), [({"page_count": 2_000_000_000}, "MAX_PDF_PAGES"),
                                               ({"size": 50_000_000}, "MAX_PDF_OBJECTS")])
def test_a_pdf_bomb_is_refused_by_what_it_declares_naming_the_cap(tmp_path: Path, declared, cap) -> None:
    path = makers.handmade_pdf(tmp_path / "bomb.pdf", **declared)
    assert path.stat().st_size < 1_000
    error = _refusal(path, DocumentBomb)
    assert error.cap == cap and cap in str(error)


def test_a_real_pdf_over_a_lower_page_cap_is_refused(tmp_path: Path) -> None:
    path = makers.pdf_with_pages(tmp_path / "long.pdf", {}, 12)
    error = _refusal(path, DocumentBomb, DocumentLimits(max_pdf_pages=10))
    assert "declares 12 pages" in str(error) and "up to 10 pages (MAX_PDF_PAGES)" in str(error)


def test_a_zip_bomb_named_docx_is_refused_from_its_directory_before_unpacking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = makers.zip_declaring(tmp_path / "report.docx", 4_000_000_000)
    import zipfile

    def no_unpacking(*args, **kwargs):
        raise AssertionError("a member was opened")

    monkeypatch.setattr(zipfile.ZipFile, "open", no_unpacking)
    error = _refusal(path, DocumentBomb)
    assert error.cap == "MAX_UNZIPPED_BYTES" and "unpacks to 4.0 GB" in str(error)
    assert "200.0 MB (MAX_UNZIPPED_BYTES)" in str(error)


def test_a_real_zip_bomb_over_a_lower_cap_is_refused(tmp_path: Path) -> None:
    path = makers.real_zip_bomb(tmp_path / "bomb.docx", megabytes=12)
    assert path.stat().st_size < 100_000
    error = _refusal(path, DocumentBomb, DocumentLimits(max_unzipped_bytes=10_000_000))
    assert "unpacks to 12.6 MB" in str(error)


def test_a_zip_of_too_many_members_is_refused(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "many.docx"
    with zipfile.ZipFile(path, "w") as archive:
        for number in range(30):
            archive.writestr(f"part{number}.xml", b"")
    error = _refusal(path, DocumentBomb, DocumentLimits(max_zip_members=20))
    assert error.cap == "MAX_ZIP_MEMBERS" and "30 members" in str(error)


def test_a_file_over_the_size_cap_is_refused_by_its_stat_without_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.log"
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    opened = _no_reads(monkeypatch)
    error = _refusal(path, FileTooLarge)
    assert "is 2.0 GB; Tailor reads documents of up to 2.0 GB (MAX_FILE_BYTES)" in str(error)
    assert opened == []


def test_binary_junk_named_txt_is_not_text(tmp_path: Path) -> None:
    junk = random.Random(7)
    with_nul = tmp_path / "junk.txt"
    with_nul.write_bytes(bytes(junk.randrange(256) for _ in range(4096)))
    assert "NUL bytes" in str(_refusal(with_nul, NotText))
    without_nul = tmp_path / "noise.txt"
    without_nul.write_bytes(bytes(junk.randrange(128, 256) for _ in range(4096)))
    assert "are not UTF-8" in str(_refusal(without_nul, NotText))


def test_utf16_with_a_byte_order_mark_is_text(tmp_path: Path) -> None:
    path = tmp_path / "windows.txt"
    path.write_bytes("Hello from Notepad.".encode("utf-16"))
    assert extract_document(path).text == "Hello from Notepad."


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_refused_without_being_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    opened = _no_reads(monkeypatch)
    assert "is a FIFO (named pipe), not a document" in str(_refusal(path, NotARegularFile))
    assert opened == []


@pytest.mark.skipif(sys.platform == "win32", reason="no /dev on Windows")
def test_a_device_is_refused_without_being_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")  # a path the user picked, links followed: still never read
    opened = _no_reads(monkeypatch)
    assert "is a character device, not a document" in str(_refusal(link, NotARegularFile))
    assert opened == []


def test_an_unknown_kind_of_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "movie.mkv"
    path.write_bytes(b"\x1aE\xdf\xa3")
    assert "is not a kind of document Tailor reads" in str(_refusal(path, UnsupportedFormat))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    assert "does not exist" in str(_refusal(tmp_path / "gone.txt", DocumentMissing))


def test_a_link_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.txt").write_text("the launch code is 0000")
    folder = tmp_path / "knowledge"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "notes.txt").write_text("public notes")
    (folder / "leak.txt").symlink_to(outside / "secret.txt")
    (folder / "leakdir").symlink_to(outside, target_is_directory=True)
    with DocumentIndex(tmp_path / "index.db") as index:
        report = index_folder(index, folder)
        assert [Path(o.source).name for o in report.indexed] == ["notes.txt"]
        reasons = {item.path.name: item.reason for item in report.skipped}
        assert reasons["leak.txt"].startswith("is a symbolic link out of the folder")
        assert reasons["leakdir"].startswith("is a symbolic link out of the folder")
        assert index.search("launch code") == []


def test_a_file_deleted_between_listing_and_reading_is_skipped_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha stays")
    (folder / "b.txt").write_text("bravo goes")
    from app.services.documents import indexing

    real_walk = indexing.walk_folder

    def walk_then_delete(root):
        listed = list(real_walk(root))
        (folder / "b.txt").unlink()  # after the listing, before the reading
        return listed

    monkeypatch.setattr(indexing, "walk_folder", walk_then_delete)
    with DocumentIndex(tmp_path / "index.db") as index:
        report = index_folder(index, folder)
        assert [Path(o.source).name for o in report.indexed] == ["a.txt"]
        assert [(s.path.name, s.reason) for s in report.skipped] == [
            ("b.txt", "does not exist (removed before it could be read?)")]
        assert [hit.name for hit in index.search("alpha bravo")] == ["a.txt"]
