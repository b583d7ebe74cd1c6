"""The built-in files server: reads the files of one folder the user chose, and never writes (folder.py
keeps every path inside it and opens regular files only).

Tools (paths relative to the folder):
    list_files(path=".") -> the entries of a folder, one a line (`sub/`, `notes.txt  2,048 bytes`)
    read_file(path, offset=0, length=61440) -> the text of a file, at most 60 KiB a call
    search_files(pattern) -> the files whose name matches a glob (`*.md`), one a line
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from app.mcp.builtin.folder import MAX_READ_BYTES, Folder, FolderError

_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
T = TypeVar("T")


def _answer(work: Callable[[], T]) -> T:
    """What `work` returns; its FolderError as the tool's error (the model reads the one line)."""
    try:
        return work()
    except FolderError as exc:
        raise ToolError(str(exc)) from None


def make_server(root: str | Path) -> MCPServer:
    """The reader of the folder `root` as an MCP server (run it with `.run()`: stdio); FolderError when
    `root` is not a folder."""
    folder = Folder.at(root)
    server = MCPServer("files", instructions=(
        "Reads the files of one folder, and nothing outside it. Paths are relative to that folder; "
        "start with list_files."))

    @server.tool(annotations=_READ_ONLY)
    def list_files(path: str = ".") -> str:
        """List a folder of the folder this server reads.

        One entry a line: folders end in '/', files show their size in bytes. `path` is relative to the
        folder ('.', the default, is the folder itself).
        """
        return _answer(lambda: folder.listing(path))

    @server.tool(annotations=_READ_ONLY)
    def read_file(path: str, offset: int = 0, length: int = MAX_READ_BYTES) -> str:
        """Read a text file of the folder this server reads.

        `length` bytes (at most 61440) from byte `offset`. When the file goes on, the last line says the
        offset to read on from. Binary files are refused.
        """
        return _answer(lambda: folder.read(path, offset, length))

    @server.tool(annotations=_READ_ONLY)
    def search_files(pattern: str) -> str:
        """Find files by name anywhere in the folder this server reads.

        `pattern`: a glob such as '*.md' or 'report*'; one with a '/' matches the path from the folder, as
        'notes/**/*.txt'. Case-insensitive; at most 200 files.
        """
        return _answer(lambda: folder.search(pattern))

    return server
