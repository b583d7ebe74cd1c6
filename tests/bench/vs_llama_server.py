"""`tailor serve` against llama.cpp's own llama-server, built from the same vendored llama.cpp.

Three servers up at once on loopback, each in its own process as its users start it: llama-server with its
defaults and `-c 8192 -np 4` (plain), the same with `--spec-type ngram-simple` (its n-gram drafting), and
`tailor serve --ctx 8192` (its defaults: 4 parallel replies, drafting on Auto). The starter model, greedy.
The tasks run round by round, each round asking every server in a rotating order, and each figure is the
median of the rounds:
- one request: a 200-token reply, non-streamed, tok/s over the whole wall time (prefill included);
- four at once: four different 200-token requests together, aggregate tok/s;
- rewrite: a 110-word text repeated word for word (where drafting pays), tok/s;
- TTFT of a short new prompt (streamed; a new prompt each time, so no cache holds it);
- prefill of a 1,755-token prompt (streamed, its TTFT → tok/s of prompt);
- a chat's next turn: TTFT of turn 2 after turn 1 (where the cached prefix should pay).
Then which of llama-server's n-gram drafting types is fastest on the rewrite here: each in a server of its own,
the rewrite three times (median). Where llama-server cannot be built here, Tailor's figures alone, with the
reason.

    python -m tests.bench.vs_llama_server
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from engine.starter import starter_model_path
from tests.bench.llama_server import Unavailable, built, free_port, running
from tests.bench.server import NODELAY

ROUNDS = 3
# A pause before each measured request, so none runs while the server asked before it still winds down:
# llama-server's threads keep polling for a moment after a request, and Tailor's engine, which runs on the
# cores other programs leave it (engine/openmp_policy.py), took 124 ms to a short prompt's first token right
# after a llama-server request against 76 ms 1.5 s later (70 ms with no llama-server running).
SETTLE_S = 1.5
CTX = 8192
REPLY_TOKENS = 200
REWRITE_TEXT = (
    "The old lighthouse stood at the edge of the cliff for more than a century, guiding ships through storms "
    "and fog. Its keeper, a quiet man named Elias, climbed the spiral stairs every evening to light the lamp. "
    "He kept a journal of every vessel that passed, noting the weather, the colour of the sea and the songs "
    "the sailors sang. When the town built a modern beacon on the harbour wall, the lighthouse went dark. "
    "Elias stayed on anyway, sweeping the stairs and polishing the great lens, because he believed that one "
    "night, when the new light failed, the ships would need the old one again, and he wanted it to be ready."
)
REWRITE_PROMPT = f"Repeat the following text exactly, word for word, and nothing else:\n\n{REWRITE_TEXT}"
STORY = "Write a long story about a dragon who learns to bake bread."
TOPICS = ("a dragon who learns to bake bread", "a robot lost in a library", "a sailor who maps the stars",
          "a town where it never stops raining")


@dataclass(slots=True)
class Server:
    name: str
    url: str  # the OpenAI API root, .../v1
    model: str
    figures: dict[str, list[float]] = field(default_factory=dict)
    last: str = ""  # what the last task measured, as printed after each task

    def add(self, task: str, value: float) -> None:
        self.figures.setdefault(task, []).append(value)
        if not task.startswith("("):
            self.last = f"{value:.1f}"

    def median(self, task: str) -> float | None:
        values = self.figures.get(task)
        return statistics.median(values) if values else None


def bench_client() -> httpx.Client:
    """One kept-alive client for every server (Nagle off, as tests/bench/server.py has it); a connection that
    cannot be opened is tried once more."""
    return httpx.Client(transport=httpx.HTTPTransport(socket_options=NODELAY, retries=1), timeout=600)


def ask(http: httpx.Client, server: Server, messages: list[dict], max_tokens: int) -> tuple[float, int]:
    """A whole (non-streamed) reply: seconds of wall time and completion tokens."""
    body = {"model": server.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    t0 = time.perf_counter()
    response = http.post(f"{server.url}/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    return time.perf_counter() - t0, response.json()["usage"]["completion_tokens"]


def streamed(http: httpx.Client, server: Server, messages: list[dict], max_tokens: int = 4) -> tuple[float, int]:
    """A streamed request: seconds from sending it to its first content chunk, and its prompt tokens (the
    usage of its last chunk)."""
    body = {"model": server.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    seen, prompt_tokens = None, 0
    with http.stream("POST", f"{server.url}/chat/completions", json=body, timeout=600) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{server.name}: {response.status_code} {response.read().decode()[:300]}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
            choices = chunk.get("choices") or [{}]
            if seen is None and choices[0].get("delta", {}).get("content"):
                seen = time.perf_counter() - t0
    if seen is None:
        raise RuntimeError(f"{server.name}: no content in the stream")
    return seen, prompt_tokens


def first_token_s(http: httpx.Client, server: Server, messages: list[dict]) -> float:
    return streamed(http, server, messages)[0]


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def one_request(http: httpx.Client, server: Server, round_: int) -> None:
    seconds, tokens = ask(http, server, user(f"{STORY} (draft {round_})"), REPLY_TOKENS)
    server.add("one request, tok/s", tokens / seconds)


def four_at_once(http: httpx.Client, server: Server, round_: int) -> None:
    with ThreadPoolExecutor(4) as pool:
        t0 = time.perf_counter()
        done = list(pool.map(lambda t: ask(http, server, user(f"Write a long story about {t}. ({round_})"),
                                           REPLY_TOKENS), TOPICS))
        wall = time.perf_counter() - t0
    server.add("4 at once, aggregate tok/s", sum(tokens for _, tokens in done) / wall)


def rewrite(http: httpx.Client, server: Server, round_: int) -> None:
    seconds, tokens = ask(http, server, user(REWRITE_PROMPT), 160)
    server.add("rewrite 110 words, tok/s", tokens / seconds)


def short_ttft(http: httpx.Client, server: Server, round_: int) -> None:
    server.add("TTFT short new prompt, ms", 1000 * first_token_s(http, server, user(f"Name a colour. ({time.time_ns()})")))


def long_prefill(http: httpx.Client, server: Server, round_: int) -> None:
    # About 1,900 tokens of prose, new each round (its first line differs, so no cache holds any of it): under
    # the 2,048 a slot of llama-server's -c 8192 -np 4 holds (it splits the context among its slots).
    text = f"Note {time.time_ns()}.\n" + " ".join([REWRITE_TEXT] * 13)
    messages = user(f"{text}\n\nSummarize the text above in one sentence.")
    seconds, prompt_tokens = streamed(http, server, messages)
    server.add("prefill ~1,900 tokens, tok/s", prompt_tokens / seconds)
    server.add("(prompt tokens)", prompt_tokens)


def next_turn(http: httpx.Client, server: Server, round_: int) -> None:
    first = user(f"{REWRITE_TEXT}\n\nWho is the keeper? ({time.time_ns()})")
    body = {"model": server.model, "messages": first, "max_tokens": 40, "temperature": 0}
    reply = http.post(f"{server.url}/chat/completions", json=body, timeout=600).json()
    second = [*first, reply["choices"][0]["message"], {"role": "user", "content": "And what did he keep?"}]
    server.add("next turn TTFT, ms", 1000 * first_token_s(http, server, second))


TASKS: tuple[Callable[[httpx.Client, Server, int], None], ...] = (
    one_request, four_at_once, rewrite, short_ttft, long_prefill, next_turn)


def start_servers(stack: ExitStack, home: Path) -> tuple[list[Server], str | None]:
    """Tailor's server and, where it can be built, llama-server plain and with n-gram drafting."""
    model = starter_model_path()
    servers: list[Server] = []
    why_not = None
    try:
        binary = built()
    except Unavailable as exc:
        binary, why_not = None, str(exc)
    if binary is not None:
        for name, extra in (("llama-server", []), ("llama-server ngram", ["--spec-type", "ngram-simple"])):
            port = free_port()
            command = [str(binary), "-m", str(model), "-c", str(CTX), "-np", "4", "--host", "127.0.0.1",
                       "--port", str(port), *extra]
            stack.enter_context(running(command, f"http://127.0.0.1:{port}/health", home / f"{name}.log"))
            servers.append(Server(name, f"http://127.0.0.1:{port}/v1", model.stem))
    port = free_port()
    env = {**os.environ, "HOME": str(home), "TAILOR_HOME": str(home / "tailor"), "XDG_CACHE_HOME": str(home / "cache")}
    tailor = [str(Path(sys.executable).with_name("tailor")), "serve", "--model", str(model), "--ctx", str(CTX),
              "--port", str(port)]
    stack.enter_context(running(tailor, f"http://127.0.0.1:{port}/v1/models", home / "tailor.log", env=env))
    listed = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]
    servers.append(Server("tailor serve", f"http://127.0.0.1:{port}/v1", listed[0]["id"]))
    return servers, why_not


NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")


def ngram_types(home: Path) -> None:
    """The rewrite's tok/s under each of llama-server's n-gram drafting types, one server at a time."""
    binary = built()
    model = starter_model_path()
    rates = {}
    with bench_client() as http:
        for kind in ("none", *NGRAM_TYPES):
            port = free_port()
            command = [str(binary), "-m", str(model), "-c", str(CTX), "-np", "4", "--host", "127.0.0.1",
                       "--port", str(port), "--spec-type", kind]
            with running(command, f"http://127.0.0.1:{port}/health", home / f"llama-server-{kind}.log"):
                server = Server(kind, f"http://127.0.0.1:{port}/v1", model.stem)
                ask(http, server, user("Say hi."), 8)
                for _ in range(ROUNDS):
                    rewrite(http, server, 0)
                rates[kind] = server.median("rewrite 110 words, tok/s")
    best = max(NGRAM_TYPES, key=lambda k: rates[k] or 0)
    print("llama-server's --spec-type on the rewrite, tok/s (medians of 3): "
          + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()) + f"; fastest: {best}")


def report(servers: list[Server], why_not: str | None) -> None:
    tasks = list(servers[-1].figures)
    names = [s.name for s in servers]
    print(f"{'':30}" + "".join(f"{n:>20}" for n in names) + ("   tailor ÷ llama-server" if len(servers) > 1 else ""))
    for task in tasks:
        values = [s.median(task) for s in servers]
        row = f"{task:30}" + "".join(f"{v:>20.1f}" if v is not None else f"{'—':>20}" for v in values)
        if len(servers) > 1 and values[0] and values[-1]:
            row += f"   {values[-1] / values[0]:.2f}"
            if values[1]:
                row += f" (÷ ngram {values[-1] / values[1]:.2f})"
        print(row)
    better = "higher is better, but for TTFT rows (lower)"
    print(f"medians of {ROUNDS} rounds, the servers asked in a rotating order each round; {better}")
    if why_not:
        print(f"llama-server: not measured ({why_not})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        home = Path(tmp)
        servers, why_not = start_servers(stack, home)
        with bench_client() as http:
            for server in servers:  # warm: each has answered once before it is measured
                ask(http, server, user("Say hi."), 8)
            for round_ in range(ROUNDS):
                for task in TASKS:
                    order = servers[round_ % len(servers):] + servers[: round_ % len(servers)]
                    for server in order:
                        time.sleep(SETTLE_S)
                        task(http, server, round_)
                    print(f"  round {round_ + 1}, {task.__name__}: " + ", ".join(
                        f"{s.name} {s.last}" for s in servers), flush=True)
        report(servers, why_not)
    if why_not is None:
        with tempfile.TemporaryDirectory() as tmp:
            ngram_types(Path(tmp))


if __name__ == "__main__":
    main()
