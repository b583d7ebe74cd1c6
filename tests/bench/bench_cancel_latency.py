"""Cancel latency: time from EngineClient.cancel to the reply's Done, mid-stream (target <= 200 ms).

    python -m tests.bench.bench_cancel_latency
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, SamplingParams, Token
from engine.starter import starter_model_path
from tests.engine.helpers import collect, load, wait_for

RUNS = 10


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        client = EngineClient(log_path=Path(tmp) / "engine.log")
        client.start()
        try:
            load(client, str(starter_model_path()))
            latencies = []
            for i in range(RUNS):
                rid = client.generate(
                    [ChatMessage("user", f"Tell me a long story number {i}.")], SamplingParams(max_tokens=1000, seed=i)
                )
                for _ in range(10):  # cancel well into the stream
                    wait_for(client, (Token,))
                t0 = time.perf_counter()
                client.cancel(rid)
                end = collect(client, rid).end
                assert isinstance(end, Done) and end.finish_reason == "cancelled", end
                latencies.append((time.perf_counter() - t0) * 1000)
        finally:
            client.shutdown()
    print(f"cancel_latency_ms median={statistics.median(latencies):.1f} max={max(latencies):.1f} (target <= 200)")


if __name__ == "__main__":
    main()
