"""Bare llama-cpp-python decode: what `tailor chat`'s speed is measured against, in its own process.

    python -m tests.gpu.bare_decode MODEL --n-gpu-layers 999 [--ctx 4096] [--max-tokens 200] [--prompt TEXT]

Prints one JSON line: gen_tokens, decode_tok_s. The bare side of tests/bench/bench_engine_overhead.py with
the model file and the GPU layers as arguments: the prompt rendered by the model's template (Tailor's
fallback where it has none, as the engine does), llama.cpp's generate loop with nothing around it, greedy,
the decode rate timed from the first token to the last.
"""

from __future__ import annotations

import argparse
import json
import time

from tests.bench.bench_engine_overhead import MAX_TOKENS, N_CTX, PROMPT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.bare_decode")
    parser.add_argument("model")
    parser.add_argument("--n-gpu-layers", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=N_CTX)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--prompt", default=PROMPT)
    args = parser.parse_args(argv)

    import llama_cpp

    from engine.chat_template import ChatTemplate
    from engine.gguf.backend import FALLBACK_TEMPLATE
    from engine.gguf.load_checks import default_threads
    from engine.protocol import ChatMessage
    from tests.gpu.gguf_models import load_llama_backends

    load_llama_backends()
    llm = llama_cpp.Llama(args.model, n_ctx=args.ctx, n_batch=512, n_threads=default_threads(),
                          n_gpu_layers=args.n_gpu_layers, verbose=False)
    template = ChatTemplate(llm.metadata.get("tokenizer.chat_template") or FALLBACK_TEMPLATE)
    prompt = template.render([ChatMessage("user", args.prompt)])
    tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    times = []
    for token in llm.generate(tokens, temp=0.0, top_k=40, top_p=0.95, min_p=0.05):
        times.append(time.perf_counter())
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token) or len(times) > args.max_tokens:
            times.pop()
            break
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    print(json.dumps({"gen_tokens": len(times), "decode_tok_s": rate}))


if __name__ == "__main__":
    main()
