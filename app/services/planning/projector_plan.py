"""A GGUF load with its projector (images, audio): the model's plan leaves room for it where it goes.

The engine puts the projector on the GPU when any of the model's layers are there, else on the CPU
(engine/gguf/backend.py). So the model is planned alone first; the projector's forecast
(models/plan/projector_forecast.py) is then taken from the GPU's free memory when that plan puts layers
there, from the RAM otherwise, and the model planned again in what is left: the plan fits both together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from models.formats.errors import InvalidModelFile
from models.formats.projector_header import read_projector_info
from models.plan.decision_tree import Plan
from models.plan.forecast import DeviceForecast, Forecast
from models.plan.machine import Machine
from models.plan.projector_forecast import ProjectorForecast, projector_forecast
from models.units import human_size

PlanOn = Callable[[Machine], Plan]  # the model's plan on a machine


def plan_with_projector(machine: Machine, plan_on: PlanOn, alone: Plan, projector: str) -> Plan:
    """`alone` (the model's plan on `machine`) made again with room for the projector file `projector`, its
    forecast added to the device it goes on and a reason saying what it takes and where."""
    name = Path(projector).name
    try:
        info = read_projector_info(projector)
    except (InvalidModelFile, OSError) as exc:
        return replace(alone, reasons=(*alone.reasons, f"Projector {name}: not planned ({exc})."))
    own = projector_forecast(info)
    on_gpu = alone.n_gpu_layers > 0 and machine.has_gpu and machine.gguf_gpu
    if on_gpu:
        plan = plan_on(replace(machine, gpu_free_bytes=max(0, machine.gpu_free_bytes - own.total_bytes)))
        if plan.n_gpu_layers == 0:  # no layer is left on the GPU: neither is the projector (the engine's rule)
            on_gpu = False
    if not on_gpu:
        plan = plan_on(replace(machine, ram_available_bytes=max(0, machine.ram_available_bytes - own.total_bytes)))
    device = "cuda:0" if on_gpu else "cpu"
    what = " and audio" if info.has_audio and info.has_vision else ""
    sees = "audio" if not info.has_vision else f"images{what}"
    reason = (f"Projector {name} ({sees}): {human_size(own.total_bytes)} on {'the GPU' if on_gpu else 'the CPU'} "
              f"({human_size(own.weights_bytes)} weights, {human_size(own.compute_bytes)} compute buffer for one "
              f"image), planned beside the model.")
    return replace(plan, forecast=_with_projector(plan.forecast, device, own), reasons=(*plan.reasons, reason))


def _with_projector(forecast: Forecast | None, device: str, own: ProjectorForecast) -> Forecast | None:
    if forecast is None:
        return None
    devices = dict(forecast.devices)
    devices[device] = replace(devices.get(device, DeviceForecast()), projector_bytes=own.total_bytes)
    return replace(forecast, devices=devices)
