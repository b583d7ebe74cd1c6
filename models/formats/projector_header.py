"""What a multimodal projector file (`mmproj-*.gguf`) is, read from its GGUF header without loading it.

A vision-language model on llama.cpp is two files: the text model, and a projector (an image or audio
encoder plus the layer that maps its output into the text model's embedding space) that libmtmd loads
beside it. This reads the projector's header with the same reader as any GGUF file (gguf_header.py),
so a local path or a hub URL works alike, and answers what the plan and the engine need before
llama.cpp sees the file: which encoder it is, how wide the embeddings it gives are (they must be as
wide as the text model's input), how many tokens one image becomes, and its weights by tensor type.

What counts follows llama.cpp's own loader (tools/mtmd/clip.cpp: keys `clip.*`, the output width
from the projector's last tensor, the merge factor per type) and its image preprocessing
(tools/mtmd/mtmd-image.cpp), so the numbers are the ones libmtmd will use. Values that would make
llama.cpp abort the process rather than refuse (a patch size of 0, a merge factor idefics3 cannot
take, tensors whose shapes cannot meet) are refused here by name.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.formats.byte_source import ByteSource
from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import GgufHeader, read_gguf_header
from models.formats.projector_audio import AudioEncoder, read_audio_encoder
from models.formats.tensor_info import TensorInfo

PROJECTOR_ARCHITECTURE = "clip"  # general.architecture of every mmproj file llama.cpp's converters write

# Per projector type, the tensor whose shape says how wide the output embeddings are, and which of its
# ggml dimensions (ne) to read: clip.cpp's clip_n_mmproj_embd. Types not here fall back to
# `clip.{vision,audio}.projection_dim`, which the converter writes as the text model's width.
_OUTPUT_WIDTH: dict[str, tuple[str, int]] = {
    "idefics3": ("mm.model.fc.weight", 1),
    "gemma3": ("mm.input_projection.weight", 0),
    "gemma3nv": ("mm.input_projection.weight", 0),
    "gemma4v": ("mm.input_projection.weight", 1),
    "gemma4uv": ("mm.input_projection.weight", 1),
    "mlp": ("mm.2.weight", 1),
    "phi4": ("mm.2.weight", 1),
    "pixtral": ("mm.2.weight", 1),
    "lightonocr": ("mm.2.weight", 1),
    "lfm2": ("mm.2.weight", 1),
    "kimivl": ("mm.2.weight", 1),
    "qwen2vl_merger": ("mm.2.bias", 0),
    "qwen2.5vl_merger": ("mm.2.bias", 0),
    "qwen3vl_merger": ("mm.2.bias", 0),  # times (1 + deepstack layers), see _output_width
    "internvl": ("mm.3.weight", 1),
    "ultravox": ("mm.a.mlp.2.weight", 1),
    "voxtral": ("mm.a.mlp.2.weight", 1),
    "qwen2a": ("mm.a.fc.weight", 1),
}

# Patches merged per side into one token where the file does not say (clip.cpp's defaults).
_DEFAULT_MERGE = {"gemma3": 4, "qwen2vl_merger": 2, "qwen2.5vl_merger": 2, "qwen3vl_merger": 2}

# Types whose position embedding is added to the patches as it is (no resizing): its length must be the
# patch grid's, or ggml asserts (aborts) on the first image.
_FIXED_POSITIONS = frozenset({"idefics3", "gemma3"})

# Types whose every image is resized to one square of image_size and becomes a fixed number of tokens:
# the patches divided by this per type (clip.cpp's clip_n_output_tokens). A dict value of None: the
# merge factor squared.
_FIXED_GRID: dict[str, int | None] = {"gemma3": None, "mlp": 1, "mlp_norm": 1, "ldp": 4, "ldpv2": 4}


class NotAProjector(InvalidModelFile):
    """A GGUF file that is not a multimodal projector (a text model picked by mistake, most often)."""

    def __init__(self, source: str, architecture: object):
        shown = architecture if isinstance(architecture, str) else "missing"
        problem = f"not a vision projector (general.architecture is {shown})"
        InvalidModelFile.__init__(self, source, problem)
        self.args = (f"{Path(source).name} is {problem}",)


class ProjectorMismatch(ValueError):
    """A projector whose embeddings are not as wide as the text model's input: made for another model."""

    def __init__(self, projector_width: int, model_width: int):
        super().__init__(f"projector gives {projector_width}-wide embeddings, the model takes {model_width}")
        self.projector_width = projector_width
        self.model_width = model_width


@dataclass(slots=True, frozen=True)
class ImageTokens:
    """The tokens one image becomes: libmtmd cuts some images into tiles, each its own chunk.

    Attributes:
        chunks: The embedding tokens of each image chunk libmtmd makes, in order (an idefics3 image:
            one per tile, then the overview). The text tokens libmtmd puts between them (tile
            markers) come from the text model's vocabulary and are not counted.
    """

    chunks: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.chunks)


@dataclass(slots=True, frozen=True)
class ProjectorInfo:
    """A projector file, as libmtmd will load it.

    Attributes:
        source: The path or URL read.
        projector_type: clip.cpp's name of the projector (`idefics3`, `gemma3`, `qwen2.5vl_merger`):
            the vision encoder's, or the audio encoder's in a file that has only audio.
        audio_projector_type: The audio encoder's type in a file that has both encoders, else None.
        has_vision: The file holds an image encoder (`clip.has_vision_encoder`).
        has_audio: The file holds an audio encoder (`clip.has_audio_encoder`).
        n_embd_out: Width of the embeddings it gives the text model; must equal the text model's
            input width (`llama_model_n_embd_inp`).
        image_size: Side in pixels of the square the encoder sees (one tile); None without vision.
        patch_size: Side in pixels of one patch; None without vision.
        merge: Patches merged per side into one token (idefics3's scale factor, gemma3's pooling); 1: none.
        longest_edge: Longest side an image is resized to before tiling (`clip.vision.preproc_image_size`),
            None where the file does not say.
        has_grid_pinpoints: Images are tiled by candidate resolutions (`clip.vision.image_grid_pinpoints`).
        n_embd: Width of the vision encoder itself; None without vision.
        n_layers: Blocks of the vision encoder; None without vision.
        n_ff: Feed-forward width of the vision encoder (`clip.vision.feed_forward_length`); None where the
            file does not say or without vision.
        weights_by_type: Bytes of tensor data by ggml type name (`F16`, `Q8_0`, `F32`).
        n_heads: Attention heads of the vision encoder (`clip.vision.attention.head_count`); None without
            vision or transformer blocks.
        window_pattern: Qwen2.5-VL's `clip.vision.n_wa_pattern` (every this-many-th layer attends to the
            whole image, the others within windows); 0 where the file has none.
        tensors: The file's tensors (names, types, shapes), which the compute forecast builds its graph of
            (models/plan/projector_forecast.py).
        audio: The audio encoder libmtmd runs (its sample rate, the tokens a window becomes;
            projector_audio.py), None where libmtmd takes no audio from the file.
    """

    source: str
    projector_type: str
    audio_projector_type: str | None
    has_vision: bool
    has_audio: bool
    n_embd_out: int
    image_size: int | None
    patch_size: int | None
    merge: int
    longest_edge: int | None
    has_grid_pinpoints: bool
    n_embd: int | None
    n_layers: int | None
    weights_by_type: dict[str, int]
    n_ff: int | None = None
    n_heads: int | None = None
    window_pattern: int = 0
    tensors: tuple[TensorInfo, ...] = field(default=(), repr=False)  # hundreds: left out of the repr
    audio: AudioEncoder | None = None

    @property
    def audio_sample_rate(self) -> int | None:
        """Samples a second the audio encoder takes (mono); None where the file takes no audio."""
        return self.audio.sample_rate if self.audio is not None else None

    @property
    def weights_bytes(self) -> int:
        return sum(self.weights_by_type.values())

    @property
    def tokens_per_tile(self) -> int | None:
        """Tokens of one image_size square after the merge (clip.cpp: patches // merge²); None without vision."""
        if not self.image_size or not self.patch_size:
            return None
        side = self.image_size // self.patch_size
        return side * side // (self.merge * self.merge)


def read_projector_info(source: str | Path | ByteSource, headers: dict[str, str] | None = None) -> ProjectorInfo:
    """Read and check a projector file's header.

    Raises:
        NotAProjector: A GGUF file of another kind (a text model).
        InvalidModelFile: The file is missing, not GGUF, truncated or corrupt, or holds values llama.cpp
            would refuse or abort on; the message names the file and the problem.
    """
    return projector_info(read_gguf_header(source, headers=headers))


def projector_info(header: GgufHeader) -> ProjectorInfo:
    """The projector a GGUF header describes (see read_projector_info)."""
    if header.architecture != PROJECTOR_ARCHITECTURE:
        raise NotAProjector(header.source, header.architecture)
    md = header.metadata

    def fail(problem: str) -> InvalidModelFile:
        return InvalidModelFile(header.source, problem)

    has_vision = md.get("clip.has_vision_encoder") is True
    has_audio = md.get("clip.has_audio_encoder") is True
    if not has_vision and not has_audio:
        raise fail("a projector with neither a vision nor an audio encoder (clip.has_vision_encoder, "
                   "clip.has_audio_encoder)")
    common = _string(md, "clip.projector_type", fail)
    vision_type = (common or _string(md, "clip.vision.projector_type", fail)) if has_vision else None
    audio_type = (common or _string(md, "clip.audio.projector_type", fail)) if has_audio else None
    if vision_type == "qwen2.5o":  # the omni models' one name for both encoders (clip.cpp renames it so)
        vision_type = "qwen2.5vl_merger"
    if audio_type == "qwen2.5o":
        audio_type = "qwen2a"
    projector_type = vision_type or audio_type
    if not projector_type:
        raise fail("no projector type (clip.projector_type)")
    if vision_type == "mlp" and _has(header, "mm.3.weight"):
        vision_type = projector_type = "mlp_norm"  # Yi-style llava: clip.cpp switches the type so too

    vision: dict[str, Any] = {"image_size": None, "patch_size": None, "n_embd": None, "n_layers": None}
    if has_vision:
        vision = {key: _positive(md, f"clip.vision.{name}", fail)
                  for key, name in (("image_size", "image_size"), ("patch_size", "patch_size"),
                                    ("n_embd", "embedding_length"))}
        vision["n_layers"] = _count(md, "clip.vision.block_count", fail)
        if vision["n_layers"]:  # an encoder without transformer blocks (gemma3n's MobileNet) has no heads
            _check_heads(md, vision["n_embd"], fail)
    merge = _merge(md, vision_type, fail)
    longest_edge = md.get("clip.vision.preproc_image_size")
    info = ProjectorInfo(
        source=header.source,
        projector_type=projector_type,
        audio_projector_type=audio_type if has_vision and audio_type != vision_type else None,
        has_vision=has_vision,
        has_audio=has_audio,
        n_embd_out=_output_width(header, vision_type or projector_type, "vision" if has_vision else "audio", fail),
        image_size=vision["image_size"],
        patch_size=vision["patch_size"],
        merge=merge,
        longest_edge=longest_edge if _is_int(longest_edge) and longest_edge > 0 else None,
        has_grid_pinpoints=bool(md.get("clip.vision.image_grid_pinpoints")),
        n_embd=vision["n_embd"],
        n_layers=vision["n_layers"],
        weights_by_type=_weights_by_type(header.tensors),
        n_ff=n_ff if has_vision and _is_int(n_ff := md.get("clip.vision.feed_forward_length")) and n_ff > 0 else None,
        n_heads=heads if has_vision and _is_int(heads := md.get("clip.vision.attention.head_count")) and heads > 0
        else None,
        window_pattern=wa if has_vision and _is_int(wa := md.get("clip.vision.n_wa_pattern")) and wa > 0 else 0,
        tensors=header.tensors,
        # libmtmd leaves gemma3n's audio encoder unloaded (clip.cpp: "we don't support audio for Gemma 3N").
        audio=read_audio_encoder(header, audio_type, fail) if audio_type and vision_type != "gemma3nv" else None,
    )
    if has_vision:
        _check_vision_shapes(header, info, fail)
    return info


def check_pairs_with(info: ProjectorInfo, model_width: int) -> None:
    """Refuse a projector whose embeddings the text model cannot take.

    `model_width` is the text model's input width: llama_model_n_embd_inp of a loaded model, or
    text_model_width(header) of one not loaded.

    Raises:
        ProjectorMismatch: "projector gives 1152-wide embeddings, the model takes 576".
    """
    if info.n_embd_out != model_width:
        raise ProjectorMismatch(info.n_embd_out, model_width)


def text_model_width(header: GgufHeader) -> int | None:
    """The input width a text model's header gives its embeddings (llama.cpp's n_embd_inp): its
    embedding length, times 1 + its deepstack layers where it has them (Qwen3-VL)."""
    n_embd = header.n_embd
    if not _is_int(n_embd):
        return None
    deepstack = header.metadata.get(f"{header.architecture}.n_deepstack_layers")
    return n_embd * (1 + deepstack) if _is_int(deepstack) and deepstack > 0 else n_embd


def image_tokens(info: ProjectorInfo, width: int, height: int) -> ImageTokens | None:
    """The embedding tokens an image of `width` × `height` pixels becomes, as libmtmd cuts it.

    idefics3 (SmolVLM, Idefics3): tiles of image_size after resizing the longest side to longest_edge,
    then one overview tile; types that resize every image to one square (gemma3, llava-1.5's mlp,
    MobileVLM's ldp): a fixed count. None for a projector without vision, and for types whose count
    depends on the image in ways not modelled here (dynamic resolution, pinpoint tiling).
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"an image of {width} × {height} pixels")
    per_tile = info.tokens_per_tile
    if per_tile is None or not info.has_vision:
        return None
    kind = info.projector_type
    if kind == "idefics3":
        grid_x, grid_y = _idefics3_grid(info, width, height)
        return ImageTokens((per_tile,) * (grid_x * grid_y) + (per_tile,))
    if kind in _FIXED_GRID and not info.has_grid_pinpoints:
        side = info.image_size // info.patch_size
        divisor = _FIXED_GRID[kind] or info.merge * info.merge
        return ImageTokens((side * side // divisor,))
    return None


# ---------------------------------------------------------------- how libmtmd cuts an idefics3 image


def _idefics3_grid(info: ProjectorInfo, width: int, height: int) -> tuple[int, int]:
    """Columns and rows of tiles (mtmd-image.cpp, mtmd_image_preprocessor_idefics3)."""
    tile = info.image_size
    if info.longest_edge:
        # The longest side becomes longest_edge (the other keeps the aspect ratio, rounded up to even),
        # then each side is rounded up to whole tiles.
        edge, aspect = info.longest_edge, width / height
        if width >= height:
            w, h = edge, int(edge / aspect)
            h += h % 2
        else:
            w, h = int(edge * aspect), edge
            w += w % 2
        return -(-w // tile), -(-h // tile)
    # Files without preproc_image_size: each side rounded to the nearest whole tile, at least one.
    return max(1, _round_half_up(width / tile)), max(1, _round_half_up(height / tile))


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)  # C's std::round for a positive number (Python's round() goes to even)


# ---------------------------------------------------------------- reading and checking the keys


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _has(header: GgufHeader, name: str) -> bool:
    return any(t.name == name for t in header.tensors)


def _string(md: dict[str, Any], key: str, fail) -> str | None:
    value = md.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(f"{key} is {value!r}: it must be a projector type name")
    return value or None


def _positive(md: dict[str, Any], key: str, fail) -> int:
    """A key clip.cpp requires, as a whole number above 0 (a 0 there divides by zero in llama.cpp)."""
    value = md.get(key)
    if value is None:
        raise fail(f"{key} is missing")
    if not _is_int(value) or value <= 0:
        raise fail(f"{key} is {value!r}: it must be a whole number above 0")
    return value


def _count(md: dict[str, Any], key: str, fail) -> int:
    """A count clip.cpp requires, 0 or more."""
    value = md.get(key)
    if value is None:
        raise fail(f"{key} is missing")
    if not _is_int(value) or value < 0:
        raise fail(f"{key} is {value!r}: it must be a whole number")
    return value


def _check_heads(md: dict[str, Any], n_embd: int, fail) -> None:
    heads = _positive(md, "clip.vision.attention.head_count", fail)
    if "clip.vision.attention.head_dim" not in md and n_embd % heads:
        raise fail(f"clip.vision.embedding_length {n_embd} is not a multiple of "
                   f"clip.vision.attention.head_count {heads}")


def _merge(md: dict[str, Any], vision_type: str | None, fail) -> int:
    """Patches merged per side into one token, as clip.cpp sets it for the type."""
    merge = _DEFAULT_MERGE.get(vision_type or "", 1)
    for key in ("clip.vision.projector.scale_factor", "clip.vision.spatial_merge_size"):
        value = md.get(key)
        if value is not None:
            if not _is_int(value) or value <= 0:
                raise fail(f"{key} is {value!r}: it must be a whole number above 0")
            merge = value
            break
    if vision_type == "idefics3" and merge < 2:
        # clip.cpp asserts (aborts the process) on the first image when idefics3's pixel shuffle is 1.
        raise fail(f"an idefics3 projector needs clip.vision.projector.scale_factor of 2 or more, not {merge}")
    return merge


def _output_width(header: GgufHeader, kind: str, modality: str, fail) -> int:
    """The width clip.cpp reads off the projector's last tensor (clip_n_mmproj_embd)."""
    md = header.metadata
    where = _OUTPUT_WIDTH.get(kind)
    if kind == "mlp_norm":
        where = ("mm.3.bias", 0)
    if where is not None:
        name, dim = where
        tensor = next((t for t in header.tensors if t.name == name), None)
        if tensor is None:
            raise fail(f"a {kind} projector without its output tensor {name!r}")
        if dim >= len(tensor.shape):
            raise fail(f"tensor {name!r} has shape {tensor.shape}: too few dimensions for a {kind} projector")
        width = tensor.shape[dim]
        if kind == "qwen3vl_merger":
            layers = {t.name.split(".")[2] for t in header.tensors if t.name.startswith("v.deepstack.")}
            width *= 1 + len(layers)
        return width
    return _positive(md, f"clip.{modality}.projection_dim", fail)


def _weights_by_type(tensors: tuple[TensorInfo, ...]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for t in tensors:
        counts[t.type_name] += t.nbytes
    return dict(counts.most_common())


def _check_vision_shapes(header: GgufHeader, info: ProjectorInfo, fail) -> None:
    """Shapes that must meet, where llama.cpp would abort on the first image instead of refusing the file."""
    side = info.image_size // info.patch_size
    if info.projector_type in _FIXED_POSITIONS:
        pos = next((t for t in header.tensors if t.name == "v.position_embd.weight"), None)
        if pos is not None and pos.shape[:2] != (info.n_embd, side * side):
            raise fail(f"v.position_embd.weight has shape {pos.shape}, not ({info.n_embd}, {side * side}): "
                       f"{side}×{side} patches of clip.vision.embedding_length {info.n_embd}")
    if info.projector_type == "idefics3":
        fc = header.tensor("mm.model.fc.weight")
        wanted = info.n_embd * info.merge * info.merge
        if fc.shape[0] != wanted:
            raise fail(f"mm.model.fc.weight takes {fc.shape[0]}-wide input, not {wanted} "
                       f"(clip.vision.embedding_length {info.n_embd} × scale factor {info.merge}²)")
