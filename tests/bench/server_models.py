"""Many models behind one `tailor serve`: what switching between loaded models and loading one on demand cost.

Side by side in one run, on the starter model's weights under three names (each its own model of the
library, in an engine process of its own), streamed requests through the real server, greedy, 8 tokens:
- switching: requests alternate A A B B A A B B ...; a request to the other model than the last one
  (a switch) against a request to the same model again, both with their prompts warm in their own
  prefix cache; the difference of the medians is what switching adds to TTFT, target <= 5 ms;
- back to back: a request to a model sent as soon as its previous reply ended, against one sent after its
  engine had been idle 2 s (its after-reply work, the next turn's warm-up, done), alternating; the
  ratio of the medians, target <= 1.0 (the after-reply work waits for a request that comes at once,
  engine/host.py);
- loading on demand: the first request to a third model, C, not loaded: its TTFT against the load time the
  pool logged plus the TTFT of a cold prompt on a loaded model: what a load costs beyond the load itself.

    python -m tests.bench.server_models
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.server.config import ServerConfig
from app.server.model_catalog import ModelCatalog
from app.server.model_pool import ModelPool, PoolSettings
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.library_models import models_on_disk
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.machine import detect_machine
from engine.starter import starter_model_path
from models.library import ModelStore
from tests.bench.server import NODELAY, through_server

PAIRS = 12
MAX_TOKENS = 8
# Longer than the engine's grace and its after-reply work (engine/host.py's AFTER_REPLY_GRACE_S).
IDLE_GAP_S = 2.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = []
        for name in ("model-a", "model-b", "model-c"):
            path = folder / f"{name}.Q4_1.gguf"
            path.symlink_to(starter_model_path())
            paths.append(path)
        profile = detect_machine()
        catalog = ModelCatalog(lambda: models_on_disk(ModelStore(folder / "data"), [str(p) for p in paths]))
        logs = iter(range(100))
        pool = ModelPool(catalog, PoolSettings(LoadSettings(n_ctx=2048)),
                         lambda: OwnEngine(log_path=folder / f"engine-{next(logs)}.log"),
                         lambda reserved: LoadPlanner(profile, status_dir=folder / "status", reserved=reserved),
                         parallel=2)
        server = ServerThread(None, None, ServerConfig(port=0), router=pool).start()
        try:
            with httpx.Client(transport=httpx.HTTPTransport(socket_options=NODELAY)) as http:
                run(http, server.url, pool)
        finally:
            server.stop()


def run(http: httpx.Client, url: str, pool: ModelPool) -> None:
    a, b, c = "model-a.Q4_1", "model-b.Q4_1", "model-c.Q4_1"
    for model in (a, b):  # loaded, and their prompt warm in their prefix caches
        through_server(http, url, model, MAX_TOKENS)
        through_server(http, url, model, MAX_TOKENS)
    switched, same = [], []
    for i in range(PAIRS):
        model = a if i % 2 == 0 else b
        switched.append(through_server(http, url, model, MAX_TOKENS)["ttft_s"])
        same.append(through_server(http, url, model, MAX_TOKENS)["ttft_s"])
    switch_ms = (statistics.median(switched) - statistics.median(same)) * 1000
    print(f"switching between two loaded models: TTFT {statistics.median(switched) * 1000:.1f} ms after the "
          f"other model, {statistics.median(same) * 1000:.1f} ms after the same one: +{switch_ms:.1f} ms "
          f"(target <= 5 ms; medians of {PAIRS})")

    back_to_back, after_idle = [], []
    for _ in range(PAIRS):
        through_server(http, url, a, MAX_TOKENS)
        back_to_back.append(through_server(http, url, a, MAX_TOKENS)["ttft_s"])
        time.sleep(IDLE_GAP_S)
        after_idle.append(through_server(http, url, a, MAX_TOKENS)["ttft_s"])
    b2b, idle = statistics.median(back_to_back), statistics.median(after_idle)
    print(f"back to back: TTFT {b2b * 1000:.1f} ms right after the model's last reply, {idle * 1000:.1f} ms after "
          f"{IDLE_GAP_S:.0f} s idle: ratio {b2b / idle:.2f} (target <= 1.0; medians of {PAIRS})")

    cold_loaded = cold_prompt(http, url, a)
    t0 = time.perf_counter()
    first = cold_prompt(http, url, c)
    wall = time.perf_counter() - t0
    model, load_s = pool.load_log[-1]
    assert model == c, pool.load_log
    beyond = (first - load_s - cold_loaded) * 1000
    print(f"loading on demand: first request to {c} answered its first token in {first:.2f} s "
          f"({wall:.2f} s in all); the load took {load_s:.2f} s (logged), a cold prompt on a loaded model "
          f"{cold_loaded * 1000:.0f} ms: {beyond:+.0f} ms beyond the load itself")


def cold_prompt(http: httpx.Client, url: str, model: str) -> float:
    """TTFT of a prompt no prefix cache holds (a new one each time)."""
    body = {"model": model, "messages": [{"role": "user", "content": f"Name a colour. ({time.time_ns()})"}],
            "max_tokens": 2, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    with http.stream("POST", f"{url}/chat/completions", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - t0
    raise RuntimeError(f"{model}: no content came")


if __name__ == "__main__":
    main()
