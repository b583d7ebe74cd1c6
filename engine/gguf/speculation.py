"""When the GGUF backend drafts, and how much: prompt lookup's policy, measured per reply.

"lookup" always drafts when the conversation offers a match, "draft" whenever its draft model
guesses. "auto" drafts too, but it times
every step: a step that verifies drafts costs more than a plain one (a batch of several tokens),
and pays only when enough drafts are accepted. When the drafted steps of this reply make tokens
slower than its plain steps do, auto stops drafting for a while, then tries again.

Both change the draft length as the reply goes (as transformers' assisted generation does): two
more after a step that kept every draft, one fewer after a miss. On a CPU a batch costs nearly
its length in prefill time, so drafts that will be refuted are not free.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_DRAFT_TOKENS = 8  # drafts per step at most: llama.cpp's lookup decoding verifies about as many
START_DRAFT_TOKENS = 4  # the first step's; the length then follows what is kept
COOLDOWN_STEPS = 32  # plain steps before auto tries drafting again
SMOOTHING = 0.3  # weight of the newest step in the running costs


@dataclass(slots=True)
class DraftPolicy:
    """How many drafts to verify at the next step, from what the reply's steps cost so far.

    Args:
        mode: "off", "lookup", "draft" or "auto".
        max_draft: drafts per step at most.
    """

    mode: str
    max_draft: int = DEFAULT_DRAFT_TOKENS
    drafted: int = 0
    accepted: int = 0
    _plain_s: float | None = None  # running seconds per token of plain steps
    _draft_s: float | None = None  # running seconds per token made by drafted steps
    _cooldown: int = 0
    _length: int = START_DRAFT_TOKENS

    @property
    def active(self) -> bool:
        return self.mode in ("lookup", "draft", "auto") and self.max_draft > 0

    @property
    def acceptance(self) -> float | None:
        """Share of the drafted tokens the model accepted; None when nothing was drafted."""
        return self.accepted / self.drafted if self.drafted else None

    def limit(self, room: int) -> int:
        """Drafts to ask for at the next step, `room` at most (what the context and max tokens leave)."""
        if not self.active or room <= 0:
            return 0
        if self._cooldown > 0:
            self._cooldown -= 1
            return 0
        return min(self._length, self.max_draft, room)

    def record(self, drafted: int, accepted: int, seconds: float) -> None:
        """One step: `drafted` drafts verified, `accepted` of them kept, in `seconds` of decoding."""
        if drafted == 0:
            self._plain_s = _smooth(self._plain_s, seconds)
            return
        self.drafted += drafted
        self.accepted += accepted
        grown = self._length + 2 if accepted == drafted else self._length - 1
        self._length = max(1, min(self.max_draft, grown))
        self._draft_s = _smooth(self._draft_s, seconds / (accepted + 1))  # accepted drafts + the next token
        slower = self._plain_s is not None and self._draft_s > self._plain_s
        if self.mode == "auto" and slower:
            self._cooldown, self._draft_s = COOLDOWN_STEPS, None


def _smooth(running: float | None, value: float) -> float:
    return value if running is None else running + SMOOTHING * (value - running)
