"""A plan in a few lines of plain text: what `tailor plan` prints and the window's plan dialog shows."""

from __future__ import annotations

from engine.protocol import DEFAULT_PARALLEL
from models.formats.embedding_models import EMBED_BATCH_INPUTS
from models.plan.decision_tree import Plan


def format_plan(plan: Plan, parallel: int = DEFAULT_PARALLEL) -> str:
    """Fits or not, where the layers go, the forecast per device, parallel replies, and the reasons."""
    gib = 1024**3
    lines = [
        f"{'Fits' if plan.fits else 'Does not fit'}: {plan.format.upper()} {plan.quant or ''} {plan.files[0]}",
        f"  {_layers(plan)}, context {plan.context:,}, KV cache {plan.kv_type}, "
        f"flash attention {'on' if plan.flash_attn else 'off'}",
        f"  largest context that fits: {plan.max_context:,} tokens" if plan.max_context
        else "  not even 256 tokens of context fit",
    ]
    if plan.embedding:
        lines.append(f"  an embedding model: inputs of up to {plan.context:,} tokens, up to {EMBED_BATCH_INPUTS} "
                     "evaluated in one batch")
    elif plan.format == "gguf" and parallel > 1 and plan.context:
        lines.append(f"  {parallel_text(plan.context, parallel)}")
    if plan.forecast:
        for device, d in plan.forecast.devices.items():
            lines.append(
                f"  {device:<7} weights {d.weights_bytes / gib:6.2f} GiB  KV {d.kv_cache_bytes / gib:6.2f} GiB  "
                f"compute {d.compute_bytes / gib:6.2f} GiB  "
                + (f"projector {d.projector_bytes / gib:6.2f} GiB  " if d.projector_bytes else "")
                + f"total {d.total_bytes / gib:6.2f} GiB"
            )
    lines.append("Why:")
    lines += [f"  - {reason}" for reason in plan.reasons]
    return "\n".join(lines)


def _layers(plan: Plan) -> str:
    if plan.n_gpu_layers > plan.n_layers:
        return f"all {plan.n_layers} layers and the output on the GPU"
    if plan.n_gpu_layers == 0:
        return "all layers on the CPU"
    return f"{plan.n_gpu_layers} of {plan.n_layers} layers on the GPU"


def parallel_text(context: int, parallel: int) -> str:
    """How replies running at once share one GGUF context's KV cache (it does not grow with them)."""
    splits = [n for n in (parallel, 2, 1) if n <= parallel]
    ways = " or ".join(f"{n} x {context // n:,}" for n in dict.fromkeys(splits))
    return (f"parallel replies: up to {parallel} at once share these {context:,} tokens of KV cache ({ways} "
            "tokens); sliding-window and recurrent models run one at a time")
