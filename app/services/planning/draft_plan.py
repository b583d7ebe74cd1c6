"""A GGUF load with a draft model (speculative decoding): the model's plan leaves room for the draft.

The draft goes on the first GPU when the model fits there whole beside it, else on the CPU (the
load request says which: LoadRequest.draft_on_gpu). So the model is planned first as if alone
(for its context), then again with the draft's GPU forecast taken from the first card; if the
model no longer fits there whole, the draft goes to the CPU and the model is planned with the
draft's RAM taken instead. The draft's KV cache is sized at the first plan's context: when Auto then picks a
smaller one, the figure errs high.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from models.plan.candidates import Candidate
from models.plan.decision_tree import Plan, make_plan
from models.plan.forecast import Forecast
from models.plan.machine import Machine
from models.units import human_size

PlanOn = Callable[[Machine], Plan]  # the model's plan on a machine


def _cpu_only(machine: Machine) -> Machine:
    return replace(machine, gpu_name=None, gpu_free_bytes=0, gpu_total_bytes=0, compute_capability=None)


def _draft_forecast(machine: Machine, draft: Candidate, context: int, flash_attn: bool) -> Forecast | None:
    return make_plan(machine, [draft], context=context, flash_attn=flash_attn).forecast


def _all_on_gpu(plan: Plan) -> bool:
    return plan.n_gpu_layers > plan.n_layers


def plan_with_draft(machine: Machine, plan_on: PlanOn, draft: Candidate, name: str) -> tuple[Plan, bool]:
    """The model's plan with room for `draft` (named `name` in the reasons) and a reason saying what the
    draft adds and where; and whether the draft goes on the GPU (the load request says so)."""
    alone = plan_on(machine)
    if alone.forecast is None:
        return alone, False
    on_gpu = None
    if machine.has_gpu and machine.gguf_gpu and _all_on_gpu(alone):
        gpu = _draft_forecast(machine, draft, alone.context, alone.flash_attn)
        need = gpu.devices["cuda:0"].total_bytes if gpu is not None and "cuda:0" in gpu.devices else None
        if need is not None and need < machine.gpu_free_bytes:
            plan = plan_on(replace(machine, gpu_free_bytes=machine.gpu_free_bytes - need))
            if _all_on_gpu(plan):
                on_gpu = (plan, gpu)
    if on_gpu is not None:
        plan, own = on_gpu
        where = "the GPU"
    else:
        own = _draft_forecast(_cpu_only(machine), draft, alone.context, alone.flash_attn)
        if own is None:
            return replace(alone, reasons=(*alone.reasons, f"Draft model {name}: not planned (no forecast).")), False
        room = max(0, machine.ram_available_bytes - own.total("total_bytes"))
        plan, where = plan_on(replace(machine, ram_available_bytes=room)), "the CPU"
    return replace(plan, reasons=(*plan.reasons, (
        f"Draft model {name}: {human_size(own.total('total_bytes'))} more on {where} "
        f"({human_size(own.total('weights_bytes'))} weights, {human_size(own.total('kv_cache_bytes'))} KV cache "
        f"at {alone.context:,} tokens), for speculative decoding; the model's plan leaves room for it."))), \
        on_gpu is not None
