"""Errors raised by the model-file readers."""

from __future__ import annotations


class InvalidModelFile(ValueError):
    """A model file (or its header) is malformed, truncated or hostile.

    The message names the file and the one problem found, in words a user can act on.

    Attributes:
        source: The file path or URL that was read.
        problem: The problem alone, without the file name.
    """

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem
