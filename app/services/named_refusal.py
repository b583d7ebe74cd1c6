"""The shape every refusal of one named input shares (an image, a clip, a document): one line a user can act on."""

from __future__ import annotations


class NamedRefusal(ValueError):
    """One input is refused: `str()` is "<name> <problem>", e.g. "report.pdf is encrypted: ...".

    Attributes:
        name: the file's name (or the name the caller gave bytes).
        problem: the reason alone, starting with a verb ("is damaged or truncated (...)").
    """

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name
        self.problem = problem
