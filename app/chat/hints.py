"""What the session says when it cannot do what was asked now."""

BUSY_HINT = "A reply is still being written: wait for it, or press Esc to stop it."
DEAD_HINT = "The engine stopped: press Reload to start it again."
