"""Which projector goes with a model file: the `mmproj*.gguf` beside it that fits it.

Repos of vision models on the hub (ggml-org, unsloth, bartowski, lmstudio-community) put the projector
beside the model files, often in several precisions (`mmproj-F16.gguf`, `mmproj-model-Q8_0.gguf`, ...), and a
download keeps them in the same folder; so a model opened by path looks beside itself. A projector is taken
only where its embeddings are as wide as the model's input (one made for another model would be refused at
load anyway); among those that are, the most precise one (F16 first, then BF16, F32, Q8_0: the projector is
small, and its precision shows in what the model sees).
"""

from __future__ import annotations

from pathlib import Path

from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from models.formats.projector_header import ProjectorInfo, read_projector_info, text_model_width

# Most precise first; a type not here comes after these.
_PREFERRED_TYPES = ("F16", "BF16", "F32", "Q8_0")
# A folder of thousands of files (a downloads folder) is not searched through: the projector sits beside its
# model in a model's own folder.
_MAX_CANDIDATES = 32


def is_projector_name(name: str) -> bool:
    """Whether a file name is one the converters give projectors ("mmproj-…gguf", "…-mmproj-f16.gguf")."""
    lower = name.lower()
    return lower.endswith(".gguf") and "mmproj" in lower


def projector_beside(model: Path) -> Path | None:
    """The projector for `model` in its folder, or None (none there, none that fits, the model unreadable).

    Nothing raises: a file that cannot be read is passed over, as a model may well have no projector.
    """
    if is_projector_name(model.name):
        return None
    try:
        width = text_model_width(read_gguf_header(model))
        candidates = sorted(p for p in model.parent.iterdir() if is_projector_name(p.name) and p != model)
    except (InvalidModelFile, OSError):
        return None
    if width is None:
        return None
    fitting: list[tuple[ProjectorInfo, Path]] = []
    for path in candidates[:_MAX_CANDIDATES]:
        try:
            info = read_projector_info(path)
        except (InvalidModelFile, OSError):
            continue
        if info.n_embd_out == width:
            fitting.append((info, path))
    if not fitting:
        return None
    return min(fitting, key=lambda pair: (_precision_rank(pair[0]), pair[1].name))[1]


def _precision_rank(info: ProjectorInfo) -> int:
    """Where a projector's main tensor type comes in _PREFERRED_TYPES (by the bytes of each type)."""
    main = max(info.weights_by_type.items(), key=lambda kv: kv[1])[0] if info.weights_by_type else ""
    return _PREFERRED_TYPES.index(main) if main in _PREFERRED_TYPES else len(_PREFERRED_TYPES)
