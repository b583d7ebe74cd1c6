"""Engine overhead: decode tok/s of `tailor chat` against bare llama_cpp.Llama, side by side.

Both run the starter model with the same prompt tokens (no system prompt), greedy sampling and the
load settings `tailor chat` really uses: the bare side asks the same planner for this machine
(context, GPU layers, flash attention, KV type) and passes them, with the engine's threads and
batch, to llama_cpp.Llama. Each run is a fresh process, as users run either; alternating (ABBA),
5 runs each (TAILOR_BENCH_RUNS); the figure is the ratio of the medians (target >= 0.97).

    python -m tests.bench.bench_engine_overhead
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = int(os.environ.get("TAILOR_BENCH_RUNS", "5"))
MAX_TOKENS = 200
N_CTX = 4096
PROMPT = "Write a long story about a dragon who learns to bake bread."

# The bare side: the same prompt rendered by the model's own template, llama.cpp's
# generate loop with nothing around it; decode rate timed first token to last. Its settings
# are the plan `tailor chat` makes (app/cli/chat.py), as the engine passes them to llama.cpp.
BARE = r"""
import json, sys, tempfile, time
import llama_cpp
from app.services.planning.load_planner import LoadPlanner
from app.services.load_settings import LoadSettings
from engine.chat_template import ChatTemplate
from engine.gguf.load_checks import KV_CACHE_TYPES, default_threads
from engine.protocol import ChatMessage
from engine.starter import starter_model_path

model = str(starter_model_path())
with tempfile.TemporaryDirectory() as status:
    request = LoadPlanner(status_dir=status).plan_load(model, LoadSettings(n_ctx=%(n_ctx)d)).request
settings = {"n_ctx": request.n_ctx, "n_gpu_layers": request.n_gpu_layers, "flash_attn": request.flash_attn,
            "type_k": KV_CACHE_TYPES[request.kv_type], "type_v": KV_CACHE_TYPES[request.kv_type],
            "n_threads": request.n_threads or default_threads(), "n_batch": min(512, request.n_ctx)}
llm = llama_cpp.Llama(model, verbose=False, **settings)
template = ChatTemplate(llm.metadata["tokenizer.chat_template"])
prompt = template.render([ChatMessage("user", %(prompt)r)])
tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
times = []
for token in llm.generate(tokens, temp=0.0, top_k=40, top_p=0.95, min_p=0.05):
    times.append(time.perf_counter())
    if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token) or len(times) > %(max_tokens)d:
        times.pop()
        break
print(json.dumps({"gen_tokens": len(times), "decode_tok_s": (len(times) - 1) / (times[-1] - times[0]),
                  "settings": {**settings, "kv_type": request.kv_type}}))
"""


def run_tailor(home: str) -> dict:
    tailor = str(Path(sys.executable).with_name("tailor"))
    out = subprocess.run(
        [tailor, "chat", "--json", "--system", "", "--temperature", "0", "--ctx", str(N_CTX), "--max-tokens", str(MAX_TOKENS),
         PROMPT],
        capture_output=True, text=True, check=True, env={**os.environ, "TAILOR_HOME": home},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bare(home: str) -> dict:
    code = BARE % {"n_ctx": N_CTX, "prompt": PROMPT, "max_tokens": MAX_TOKENS}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "TAILOR_HOME": home})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    tailor_rates, bare_rates = [], []
    with tempfile.TemporaryDirectory() as home:
        run_tailor(home)  # warm the page cache for both sides
        for i in range(RUNS):
            # ABBA order, so a drift of the machine's speed weighs on both sides alike.
            if i % 2:
                b, t = run_bare(home), run_tailor(home)
            else:
                t, b = run_tailor(home), run_bare(home)
            if i == 0:
                print(f"  settings of both sides (tailor chat's plan): {b['settings']}")
            tailor_rates.append(t["decode_tok_s"])
            bare_rates.append(b["decode_tok_s"])
            print(f"  run {i + 1}: tailor {t['decode_tok_s']:.1f} tok/s ({t['gen_tokens']} tokens), "
                  f"bare {b['decode_tok_s']:.1f} tok/s ({b['gen_tokens']} tokens)")
    ratio = statistics.median(tailor_rates) / statistics.median(bare_rates)
    # Run-to-run noise on a shared 2-core VM is ~10%; the median of the pairs' own ratios
    # is the steadier figure of the two.
    pair_ratio = statistics.median(t / b for t, b in zip(tailor_rates, bare_rates, strict=True))
    print(f"engine_decode_tok_s tailor={statistics.median(tailor_rates):.1f} bare={statistics.median(bare_rates):.1f}")
    print(f"engine_overhead_ratio={ratio:.3f} (target >= 0.97); median of pair ratios={pair_ratio:.3f}")


if __name__ == "__main__":
    main()
