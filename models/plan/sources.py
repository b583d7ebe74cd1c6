"""Candidates for the decision tree from what there is to read: a GGUF file (local or URL) or a hub repo."""

from __future__ import annotations

from pathlib import Path

from models.formats.errors import InvalidModelFile
from models.formats.gguf_header import read_gguf_header
from models.formats.hf_config import HfConfig, read_hf_config
from models.formats.quant_levels import quant_from_name
from models.hub.client import HubClient, HubError, RepoDetails
from models.hub.repo_files import FileGroup, group_files
from models.plan.candidates import NATIVE_FORMATS, Candidate, gguf_candidates
from models.plan.forecast import ModelShape, shape_from_gguf

_EMBED_BYTES = 2  # AWQ, GPTQ and FP8 checkpoints keep the embedding and the output layer in 16 bits


def gguf_file_candidate(source: str | Path, headers: dict[str, str] | None = None) -> Candidate:
    """The one candidate a single GGUF file offers, from its header alone.

    Raises:
        InvalidModelFile: the header is unreadable or hostile.
        ValueError: the header lacks a dimension the forecast needs.
    """
    header = read_gguf_header(source, headers=headers)
    name = str(source).rsplit("/", 1)[-1]
    size = header.file_size or header.data_offset + header.weights_bytes
    quant = quant_from_name(name) or header.quant_name
    return Candidate("gguf", (str(source),), quant, size, shape_from_gguf(header))


def repo_candidates(client: HubClient, repo_id: str, revision: str = "main") -> list[Candidate]:
    """Every runnable choice of a hub repo: its GGUF files (split sets joined) and AWQ/GPTQ/FP8 checkpoint.

    Reads one GGUF header over HTTP (the smallest file, or a split set's first part) and
    scales it to the other files; a checkpoint's shape comes from its config.json.

    Raises:
        HubError: the repo cannot be read (not found, gated, offline, refused names...).
        InvalidModelFile: the header or config.json read is unreadable or hostile.
        ValueError: they lack a dimension the forecast needs.
    """
    details = client.repo_details(repo_id, revision)
    has_tensors = any(f.path.lower().endswith(".safetensors") for f in details.files)
    config = _config(client, details) if has_tensors and details.file("config.json") else None
    groups = group_files(details.files, config)
    out: list[Candidate] = []
    ggufs = [g for g in groups if g.format == "gguf" and g.complete]
    if ggufs:
        probe = min(ggufs, key=lambda g: g.files[0].size).files[0]
        header = _guarded(client, details, lambda: read_gguf_header(
            client.file_url(repo_id, probe.path, details.sha), headers=client.auth_headers()))
        files = [(f.path, f.size) for g in ggufs for f in g.files]
        out += gguf_candidates(files, shape_from_gguf(header))
    for group in groups:
        if group.format in NATIVE_FORMATS and config is not None:
            out.append(checkpoint_candidate(group, config))
    return out


def checkpoint_candidate(group: FileGroup, config: HfConfig) -> Candidate:
    """An AWQ/GPTQ/FP8 checkpoint's candidate: shape from config.json, weights from the safetensors sizes.

    Raises:
        ValueError: config.json lacks a dimension the forecast needs.
    """
    needed = ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size", "vocab_size")
    missing = [n for n in needed if not getattr(config, n)]
    if missing:
        raise ValueError(f"config.json lacks {', '.join(missing)}; cannot forecast the memory of {group.name}")
    n_layers, hidden, vocab = config.n_layers, config.hidden_size, config.vocab_size
    tied = bool(config.raw.get("tie_word_embeddings", False))
    embed = vocab * hidden * _EMBED_BYTES
    output = hidden * _EMBED_BYTES + (0 if tied else embed)
    per_layer = max(0, group.total_size - embed - output) // n_layers
    shape = ModelShape(
        n_layers=n_layers,
        n_embd=hidden,
        n_heads=config.n_heads,
        n_kv_heads=(config.n_kv_heads,) * n_layers,
        head_dim_k=config.head_dim,
        head_dim_v=config.head_dim,
        n_vocab=vocab,
        n_ctx_train=config.max_position_embeddings or 0,
        swa_layers=(False,) * n_layers,
        sliding_window=None,
        layer_weight_bytes=(per_layer,) * n_layers,
        input_weight_bytes=embed,
        output_weight_bytes=output,
        output_tied=tied,
        n_ff=config.intermediate_size or 0,
    )
    return Candidate(group.format, group.paths, group.quant, group.total_size, shape)


def _config(client: HubClient, details: RepoDetails) -> HfConfig:
    url = client.file_url(details.id, "config.json", details.sha)
    return _guarded(client, details, lambda: read_hf_config(url, headers=client.auth_headers()))


def _guarded(client: HubClient, details: RepoDetails, read):  # noqa: ANN001, ANN202 - a reader and its result
    """Run a read of a repo file; a gated repo's refusal becomes HubError("gated")."""
    if details.gated and not client.token:
        raise HubError("gated", f"{details.id}: the repo is gated; accept its terms on the hub and log in "
                                "(hf auth login or HF_TOKEN)")
    try:
        return read()
    except InvalidModelFile as exc:
        if details.gated and ("HTTP 401" in str(exc) or "HTTP 403" in str(exc)):
            raise HubError("gated", f"{details.id}: the hub refused the token for this gated repo") from None
        raise
