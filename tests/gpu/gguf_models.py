"""The GGUF models of the llama.cpp checks, made on the machine that runs them: no model file travels.

- "twin": the starter model's shape and tensor types (SmolLM2-135M: 30 layers, 576 wide, GQA 9/3, tied
  output; Q4_1 layers, a Q8_0 embedding, 94 MiB) with random weights and the starter's own vocabulary.
  The starter itself (94 MiB) cannot travel with the 64 MiB that reaches the GPU machine, its vocabulary
  does (starter-vocab.json.gz, 0.4 MiB, written by `make gpu-deps`). Random weights answer nothing
  sensible, so `tailor chat` is checked for streaming its tokens on the GPU, not for "Paris". The control
  tokens' embedding rows (the output layer, tied) are zero, so greedy decoding never ends a turn early and
  every decode runs its full length.
- "tiny-gqa", "tiny-mha": tests/bench/forecast_accuracy.py's two other shapes (own output layer; no GQA), F16.

A dry run or a rehearsal makes the twin with SMALL_LAYERS layers unless asked for the full size.
"""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from models.formats.gguf_header import read_gguf_header
from models.plan.forecast import ForecastSettings, forecast, shape_from_gguf
from tests.bench.forecast_accuracy import CONTEXTS, KV_CONFIGS, TINY
from tests.fixtures.tiny_gguf import TinySpec, Tokenizer, borrow_tokenizer, write_tiny_llama

VOCAB_FILE = "starter-vocab.json.gz"
TWIN = TinySpec(n_layers=30, n_embd=576, n_heads=9, n_kv_heads=3, n_ff=1536, n_ctx_train=8192, tied_output=True)
TWIN_QUANT = "Q4_1"
SMALL_LAYERS = 2
CONTROL_TOKEN = 3  # llama.cpp's token type of <|im_end|>, <|endoftext|> and the other specials
# Every layer and the output layer on the GPU, or half the layers (the output layer stays on the CPU).
FULL_OFFLOAD = 999
MANIFEST = "models.json"


def export_vocab(dest: Path, starter: Path | None = None) -> Path:
    """The starter model's vocabulary (tokens, types, merges) as gzipped JSON."""
    if starter is None:
        from engine.starter import starter_model_path

        starter = starter_model_path()
    tok = borrow_tokenizer(starter)
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = {"tokens": tok.tokens, "token_types": tok.token_types, "merges": tok.merges}
    dest.write_bytes(gzip.compress(json.dumps(data).encode(), 9, mtime=0))
    return dest


def load_vocab(path: Path) -> Tokenizer:
    data = json.loads(gzip.decompress(path.read_bytes()))
    return Tokenizer(data["tokens"], data["token_types"], data["merges"])


def find_vocab(deps: Path, work: Path) -> tuple[Tokenizer, str]:
    """The carried vocabulary, else one exported here from the installed starter model; and where it came from."""
    carried = deps / VOCAB_FILE
    if carried.is_file():
        return load_vocab(carried), str(carried)
    made = work / VOCAB_FILE
    if not made.is_file():
        export_vocab(made)
    return load_vocab(made), f"{made} (from the installed starter model: no {carried})"


def silence_control_tokens(path: Path, tokenizer: Tokenizer) -> int:
    """Zero the control tokens' rows of the output layer (the embedding where it is tied), in place.

    Found through models.formats.gguf_header rather than gguf.GGUFReader, which takes seconds to parse a
    49k-token vocabulary."""
    ids = np.array([i for i, t in enumerate(tokenizer.token_types) if t == CONTROL_TOKEN], dtype=np.int64)
    header = read_gguf_header(path)
    tensors = {t.name: t for t in header.tensors}
    output = tensors.get("output.weight") or tensors["token_embd.weight"]
    if output.type_name != "F16":
        raise ValueError(f"{path.name}: {output.name} is {output.type_name}; rows are zeroed before quantizing")
    n_embd, n_vocab = output.shape  # ggml order: the row (n_embd) first
    rows = np.memmap(path, np.float16, "r+", header.data_offset + output.offset, (n_vocab, n_embd))
    rows[ids] = 0
    rows.flush()
    return len(ids)


def load_llama_backends() -> None:
    """Register ggml's backends where they are separate libraries (the CUDA wheel builds them with
    GGML_BACKEND_DL: llama-cpp-python alone loads none, engine/gguf/ggml_libraries.py does)."""
    from engine.gguf.ggml_libraries import load_backends

    load_backends()


def quantize_quietly(src: Path, dst: Path, quant: str) -> Path:
    """llama.cpp's own quantizer (tests/fixtures/hub_repos.py), its log lines kept out of the output."""
    from engine.gguf.log_bridge import LlamaLogBridge
    from tests.fixtures.hub_repos import quantize

    load_llama_backends()
    quiet = logging.getLogger("tests.gpu.quantize")
    quiet.setLevel(logging.CRITICAL)
    bridge = LlamaLogBridge(quiet)  # noqa: F841 - installed as llama.cpp's log callback while it lives
    return quantize(src, dst, quant)


@dataclass(slots=True, frozen=True)
class ModelFile:
    name: str
    path: str
    n_layers: int
    size_bytes: int
    tensor_types: dict[str, str]  # "layers", "embedding", "output": the GGML type of each


def tensor_types(path: Path) -> dict[str, str]:
    header = read_gguf_header(path)
    kinds = {t.name: t.type_name for t in header.tensors}
    return {
        "layers": kinds.get("blk.0.attn_q.weight", "?"),
        "embedding": kinds.get("token_embd.weight", "?"),
        "output": kinds.get("output.weight", "tied"),
    }


def build_models(folder: Path, tokenizer: Tokenizer, full: bool) -> dict[str, ModelFile]:
    """The twin (quantized like the starter) and the two tiny shapes, in `folder`; a manifest beside them."""
    folder.mkdir(parents=True, exist_ok=True)
    twin_spec = TWIN if full else replace(TWIN, n_layers=SMALL_LAYERS)
    specs = {"twin": twin_spec, **TINY}
    out = {}
    for name, spec in specs.items():
        f16 = write_tiny_llama(folder / f"{name}-F16.gguf", spec, tokenizer)
        silence_control_tokens(f16, tokenizer)
        path = f16
        if name == "twin":
            path = quantize_quietly(f16, folder / f"twin-{TWIN_QUANT}.gguf", TWIN_QUANT)
            f16.unlink()
        out[name] = ModelFile(name, str(path), spec.n_layers, path.stat().st_size, tensor_types(path))
    (folder / MANIFEST).write_text(json.dumps({n: asdict(m) for n, m in out.items()}, indent=1))
    return out


def read_models(folder: Path) -> dict[str, ModelFile]:
    data = json.loads((folder / MANIFEST).read_text())
    return {n: ModelFile(**m) for n, m in data.items()}


@dataclass(slots=True, frozen=True)
class Case:
    model: str
    settings: ForecastSettings

    @property
    def label(self) -> str:
        s = self.settings
        return f"{self.model} ctx {s.n_ctx} {s.kv_type} fa {'on' if s.flash_attn else 'off'} gpu layers {s.n_gpu_layers}"


def offload_layers(model: ModelFile, offload: str, on_gpu: bool) -> int:
    """GPU layers of a case: all (and the output layer), half, or none on the CPU."""
    if not on_gpu:
        return 0
    return FULL_OFFLOAD if offload == "full" else model.n_layers // 2


def cases(models: dict[str, ModelFile], offload: str, on_gpu: bool, full: bool) -> list[Case]:
    """forecast_accuracy's contexts and KV configurations for every model; one of each when not `full`."""
    contexts, kv_configs = (CONTEXTS, KV_CONFIGS) if full else (CONTEXTS[:1], KV_CONFIGS[-1:])
    return [
        Case(name, ForecastSettings(n_ctx=n_ctx, kv_type=kv, flash_attn=fa,
                                    n_gpu_layers=offload_layers(model, offload, on_gpu)))
        for name, model in models.items() for n_ctx in contexts for kv, fa in kv_configs
    ]


def forecast_parts(model: ModelFile, settings: ForecastSettings) -> dict[str, dict[str, int]]:
    """{device: {"weights", "kv", "compute"}} as the forecast places them, named as the memory report names them."""
    fc = forecast(shape_from_gguf(read_gguf_header(Path(model.path))), settings)
    return {device: {"weights": d.weights_bytes, "kv": d.kv_cache_bytes, "compute": d.compute_bytes}
            for device, d in fc.devices.items()}
