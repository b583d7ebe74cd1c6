"""`--mmproj FILE|none` of `tailor chat` and `tailor serve`: the projector that lets a GGUF model see."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from models.formats.projector_pairing import projector_beside


def add_projector_argument(parser: Any) -> None:
    parser.add_argument(
        "--mmproj", metavar="FILE|none",
        help="the model's projector (mmproj-*.gguf), which lets it see images (default: the mmproj*.gguf "
        "beside the model file that fits it, if any; none: load the model without one)",
    )


def chosen_projector(args: argparse.Namespace, model: Path) -> str | None:
    """The projector to load: --mmproj's file, none, or the one beside a GGUF model that fits it."""
    if args.mmproj is not None:
        return None if args.mmproj.lower() == "none" else str(Path(args.mmproj).expanduser())
    if model.suffix.lower() != ".gguf":
        return None
    found = projector_beside(model)
    return str(found) if found is not None else None
