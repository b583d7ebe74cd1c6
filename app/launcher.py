"""Entry point of the `tailor` command: no arguments opens the window, otherwise the CLI."""

from __future__ import annotations

import multiprocessing
import sys


def open_gui(args: list[str]) -> int:
    """Open the window; `args` are the window's own options (`--model`, `--db`) and Qt's."""
    from app.gui.main import main as gui_main

    return gui_main([sys.argv[0] if sys.argv else "tailor", *args])


def main() -> int:
    multiprocessing.freeze_support()  # the engine child must start from a frozen bundle too
    argv = sys.argv[1:]
    if not argv:
        return open_gui(argv)
    from app.cli.main import main as cli_main

    return cli_main(argv, open_window=open_gui)


if __name__ == "__main__":
    sys.exit(main())
