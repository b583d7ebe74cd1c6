"""Where `tailor chat` writes a reply's tokens, from the local engine or a remote server alike."""

from __future__ import annotations

import sys

from engine.protocol import Token


def write_token(token: Token) -> None:
    """The answer on stdout, alone, so a script can take it; the model's reasoning on stderr."""
    out = sys.stderr if token.reasoning else sys.stdout
    out.write(token.text)
    out.flush()
