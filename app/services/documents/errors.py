"""What reading a document raises: one class per reason, each message one line that names the file, says
what is wrong and, where there is a cap, names it with its value, so a user can act on it."""

from __future__ import annotations

from app.services.named_refusal import NamedRefusal


class DocumentRefused(NamedRefusal):
    """A document cannot be read: `str()` is "<name> <problem>" (the problem starts with a verb: "is encrypted")."""


class NotARegularFile(DocumentRefused):
    """A FIFO, a device, a socket or a folder: told by its stat, never opened for reading."""


class DocumentMissing(DocumentRefused):
    """The file is not there (removed between a folder's listing and its reading, or never was)."""


class DocumentUnreadable(DocumentRefused):
    """The system refuses to read it (permissions, an I/O error)."""


class FileTooLarge(DocumentRefused):
    """Larger than the file size cap, told by its stat before it is read."""


class NotText(DocumentRefused):
    """A file that should hold text holds binary data (NUL bytes, or too much invalid UTF-8)."""


class UnsupportedFormat(DocumentRefused):
    """A kind of file Tailor does not read (told by its extension)."""


class EncryptedDocument(DocumentRefused):
    """A password-protected PDF: refused, never asked for a password."""


class DocumentBomb(DocumentRefused):
    """A file that declares far more than a real document holds (pages, objects, unpacked bytes, zip
    members): refused before that much is read.

    Attributes:
        cap: the name of the cap it exceeds ("MAX_PDF_PAGES").
        limit: the cap's value.
    """

    def __init__(self, name: str, problem: str, *, cap: str, limit: int) -> None:
        super().__init__(name, problem)
        self.cap = cap
        self.limit = limit


class DamagedDocument(DocumentRefused):
    """The file is not a valid document of its kind (a truncated PDF, a DOCX that is no zip)."""
