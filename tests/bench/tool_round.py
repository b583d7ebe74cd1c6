"""A tool round's own cost, and prefix reuse across tool turns: the engine process and a real MCP server.

The starter model's weights under Qwen3's chat template (tools as Hermes `<tool_call>` JSON) in the engine
process, through EngineClient as the window and `tailor chat` use it: 2 threads, greedy, reasoning off, a
prefix cache; the echo server of tests/fixtures/mcp_servers through McpServers, its `echo` tool offered
(one tool: tool_choice "required" then calls it, never `die` or `sleep`). Each round opens a new
conversation of ~1,500 tokens (a system prompt, the tool, two earlier exchanges; its first request is the
cold figure) and asks its last question three ways, the tool turn first in even rounds and last in odd ones:

- tool turn: the reply must call echo; the call runs through McpServers; at once the conversation goes back
  with the assistant turn's call and the tool turn (step_messages), tool_choice back to "auto", as app/chat
  and `tailor chat` send it;
- plain turn: the reply answers in text (tool_choice "auto"); at once the conversation goes back with that
  answer and a user message of the same tokens as the tool turn (PLAIN_MESSAGE), sent the same way;
- the same plain turn sent 2 s after its reply, as a user types: the engine's idle work (next_turn.py, the
  reply's turn prefilled as the template renders it) is done by then, where after a tool call it is not.

A tool round's cost: from the Done that carries the calls to the next request's first token (Token or Done,
read where the app reads them), less the tool's own time (McpServers.call to its outcome). "TTFT" is the
client's (generate to the first event: idle work it waits for included); "engine" the engine's own.

    python -m tests.bench.tool_round        # TAILOR_BENCH_ROUNDS=3 by default
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from app.chat.engine_history import step_messages
from app.mcp.servers import McpServers
from app.mcp.types import McpTool, ServerConfig, ServerStatus, ToolOutcome
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from engine.client import EngineClient
from engine.protocol import ChatMessage, Done, Error, Loaded, LoadRequest, ReplyShape, SamplingParams, Token
from engine.starter import StarterModelMissing
from tests.fixtures.format_models import format_model
from tests.fixtures.mcp_servers import ECHO, server_command

ROUNDS = int(os.environ.get("TAILOR_BENCH_ROUNDS", "3"))
NOTES = 69  # system prompt notes: with the tool and the earlier turns, a history of ~1,500 tokens
CALL_TOKENS = SamplingParams(temperature=0.0, max_tokens=48, seed=1)  # room for the call's JSON
NEXT_TOKENS = SamplingParams(temperature=0.0, max_tokens=4, seed=1)  # the figure is its first token
EARLIER = (("user", "What is a good way to start the day?"),
           ("assistant", "A glass of water, some daylight and a short walk before the screens."),
           ("user", "And a good way to end it?"),
           ("assistant", "Put the screens away an hour before bed, and read a few pages of a book."))
QUESTION = "Please echo the words 'good morning, sunshine' back to me."
# The plain turn's user message: the tool turn's text as Qwen3's template renders a tool turn (what the model
# echoes, greedy), so both next requests have the same tokens to prefill.
PLAIN_MESSAGE = "<tool_response>\nGood morning, Sunshine\n</tool_response>"
USER_PAUSE_S = 2.0  # a plain next turn sent this long after the reply: its warm-up (next_turn.py) done
WAIT_S = 120.0  # a load, a server start or a reply that takes longer has failed


class BenchError(Exception):
    """A setup or a reply that did not go as the bench needs (one line)."""


@dataclass(slots=True, frozen=True)
class NextTurn:
    """The request after a turn: TTFT seen by the client (generate to its first event) and by the engine."""

    client_s: float
    engine_s: float
    prompt_tokens: int
    cached_tokens: int

    @property
    def prefilled(self) -> int:
        return self.prompt_tokens - self.cached_tokens


@dataclass(slots=True, frozen=True)
class ToolRound:
    """One tool round: the tool's own time, Done to the next request's first token, and that request."""

    tool_s: float
    round_s: float
    next: NextTurn


class Rig:
    """The engine process with the model loaded, and the echo server running."""

    def __init__(self, client: EngineClient, servers: McpServers, tool: McpTool):
        self.client, self.servers, self.tool = client, servers, tool
        self.tools_json = json.dumps([tool.openai_tool()])

    @classmethod
    @contextmanager
    def opened(cls, folder: Path) -> Iterator[Rig]:
        client = EngineClient(log_path=folder / "engine.log")
        statuses: queue.Queue[ServerStatus] = queue.Queue()
        command, args = server_command(ECHO)
        servers = McpServers([ServerConfig("echo", command=command, args=args)], statuses.put)
        try:
            client.start()
            servers.start(["echo"])
            client.load(LoadRequest(str(format_model(folder, "qwen3")), n_ctx=4096, n_threads=2,
                                    prefix_cache_bytes=1 << 30))
            _wait_loaded(client)
            _wait_ready(statuses)
            yield cls(client, servers, next(t for t in servers.tools(["echo"]) if t.name == "echo"))
        finally:
            servers.close()
            client.shutdown()

    def shape(self, tool_choice: str) -> ReplyShape:
        return ReplyShape(reasoning="off", tools=self.tools_json, tool_choice=tool_choice)

    def reply(self, messages: list[ChatMessage], shape: ReplyShape,
              sampling: SamplingParams) -> tuple[Done, float, float]:
        """The reply's Done, when it was asked for and when its first event (Token or Done) came."""
        sent = time.perf_counter()
        first = None
        for event in self.client.stream(self.client.generate(messages, sampling, shape=shape)):
            if first is None and isinstance(event, Token | Done):
                first = time.perf_counter()
            if isinstance(event, Error):
                raise BenchError(f"the engine failed: {event.kind}: {event.message}")
            if isinstance(event, Done):
                return event, sent, first
        raise BenchError("the reply ended without a Done")

    def next_turn(self, messages: list[ChatMessage]) -> tuple[NextTurn, float]:
        """The request after a turn (tool_choice back to auto), and when its first event came."""
        done, sent, first = self.reply(messages, self.shape("auto"), NEXT_TOKENS)
        stats = done.stats
        return NextTurn(first - sent, stats.ttft_s, stats.prompt_tokens or 0, stats.cached_tokens or 0), first

    def run_calls(self, done: Done) -> tuple[ToolStep, float]:
        """Run the reply's calls through McpServers, all at once as the app does; the step, and the time from
        the first call's start to the last outcome."""
        outcomes: queue.Queue[tuple[int, ToolOutcome, float]] = queue.Queue()
        calls = [ToolCallRecord(c.id, c.name, c.arguments, server="echo") for c in done.tool_calls]
        started = time.perf_counter()
        for i, call in enumerate(calls):
            self.servers.call(self.tool, json.loads(call.arguments),
                              lambda outcome, i=i: outcomes.put((i, outcome, time.perf_counter())))
        ended: dict[int, ToolCallRecord] = {}
        last = started
        while len(ended) < len(calls):
            try:
                i, outcome, at = outcomes.get(timeout=WAIT_S)
            except queue.Empty:
                raise BenchError(f"the echo call gave no outcome within {WAIT_S:.0f} s") from None
            if not outcome.ok:
                raise BenchError(f"the echo call failed: {outcome.text}")
            ended[i] = calls[i].ended("ok", outcome.text, outcome.seconds)
            last = max(last, at)
        return ToolStep(done.text, tuple(ended[i] for i in range(len(calls)))), last - started


def _wait_loaded(client: EngineClient) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        event = client.next_event(timeout=1.0)
        if isinstance(event, Loaded):
            return
        if isinstance(event, Error):
            raise BenchError(f"the model did not load: {event.message}")
    raise BenchError(f"the model did not load within {WAIT_S:.0f} s")


def _wait_ready(statuses: queue.Queue[ServerStatus]) -> None:
    deadline = time.monotonic() + WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            status = statuses.get(timeout=left)
        except queue.Empty:
            break
        if status.state == "ready":
            return
        if status.state == "failed":
            raise BenchError(f"the echo server failed: {status.reason}")
    raise BenchError(f"the echo server was not ready within {WAIT_S:.0f} s")


def history(round_no: int) -> list[ChatMessage]:
    """A conversation of its own (the round comes first in the system prompt), ending with the question."""
    notes = " ".join(f"Note {i} of chat {round_no}: keep the answer clear, short and kind." for i in range(NOTES))
    return [ChatMessage("system", notes), *(ChatMessage(role, text) for role, text in EARLIER),
            ChatMessage("user", QUESTION)]


def tool_turn(rig: Rig, messages: list[ChatMessage]) -> tuple[Done, ToolRound]:
    """The reply that calls echo, the call, the next request: the calling reply and the round."""
    done, _, _ = rig.reply(messages, rig.shape("required"), CALL_TOKENS)
    reached = time.perf_counter()
    if done.finish_reason != "tool_calls" or not done.tool_calls:
        raise BenchError(f"the reply called no tool (finish_reason {done.finish_reason}: {done.text[:80]!r})")
    step, tool_s = rig.run_calls(done)
    turn, first = rig.next_turn([*messages, *step_messages(step)])
    return done, ToolRound(tool_s, first - reached, turn)


def plain_turn(rig: Rig, messages: list[ChatMessage], said: str, pause_s: float = 0.0) -> tuple[Done, NextTurn]:
    """The reply in text, then (after `pause_s`) the next request with the user message `said`."""
    done, _, _ = rig.reply(messages, rig.shape("auto"), CALL_TOKENS)
    if done.tool_calls:
        raise BenchError("the plain reply called a tool; the bench needs a text answer there")
    time.sleep(pause_s)
    return done, rig.next_turn([*messages, ChatMessage("assistant", done.text), ChatMessage("user", said)])[0]


@dataclass(slots=True)
class Figures:
    """Every round's figures: the cold first request, the tool rounds, the plain turns at once and later."""

    cold: list[Done] = field(default_factory=list)
    tool: list[ToolRound] = field(default_factory=list)
    plain: list[NextTurn] = field(default_factory=list)
    typed: list[NextTurn] = field(default_factory=list)

    def one_round(self, rig: Rig, r: int) -> None:
        """A new conversation; its turns, the tool turn first in even rounds and last in odd ones."""
        messages, firsts = history(r), []
        for kind in ("tool", "plain", "typed") if r % 2 == 0 else ("plain", "typed", "tool"):
            if kind == "tool":
                first, tool_round = tool_turn(rig, messages)
                self.tool.append(tool_round)
            else:
                first, turn = plain_turn(rig, messages, PLAIN_MESSAGE, USER_PAUSE_S if kind == "typed" else 0.0)
                (self.typed if kind == "typed" else self.plain).append(turn)
            firsts.append(first)
        self.cold.append(firsts[0])
        print(f"  round {r + 1}/{ROUNDS}: cold {firsts[0].stats.ttft_s:.2f} s; next request after a tool turn "
              f"{ms(self.tool[-1].next.client_s)}, after a plain one {ms(self.plain[-1].client_s)} at once, "
              f"{ms(self.typed[-1].client_s)} {USER_PAUSE_S:g} s later", flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def turn_row(name: str, turns: list[NextTurn]) -> str:
    prefilled = median(t.prefilled for t in turns)
    prompt = median(t.prompt_tokens for t in turns)
    return (f"  {name:<32}{ms(median(t.client_s for t in turns)):>10}{ms(median(t.engine_s for t in turns)):>10}"
            f"{prefilled:>12.0f} / {prompt:,.0f}")


def report(f: Figures) -> list[str]:
    tool = [t.next for t in f.tool]
    tool_s, round_s = median(t.tool_s for t in f.tool), median(t.round_s for t in f.tool)
    next_s = median(t.client_s for t in tool)
    added = median(t.round_s - t.tool_s for t in f.tool)
    rest = median(t.round_s - t.tool_s - t.next.client_s for t in f.tool)
    ratio = {name: median(t.client_s for t in tool) / median(t.client_s for t in turns)
             for name, turns in (("at once", f.plain), ("later", f.typed))}
    engine = median(t.engine_s for t in tool) / median(t.engine_s for t in f.plain)
    return [
        f"history of {median(d.stats.prompt_tokens or 0 for d in f.cold):,.0f} tokens (system prompt, the echo "
        f"tool, two earlier exchanges): cold TTFT {median(d.stats.ttft_s for d in f.cold):.2f} s "
        f"(medians of {ROUNDS})",
        f"  {'next request after':<32}{'TTFT':>10}{'engine':>10}{'prefilled':>12} / prompt tokens",
        turn_row("a tool turn", tool),
        turn_row("a plain turn, sent at once", f.plain),
        turn_row(f"a plain turn, {USER_PAUSE_S:g} s later", f.typed),
        f"tool turn TTFT / plain next-turn TTFT: {ratio['at once']:.2f} (engine's own TTFT: {engine:.2f}); "
        f"against the plain turn {USER_PAUSE_S:g} s later: {ratio['later']:.2f} (target <= ~1)",
        f"tool round: the echo call through McpServers {tool_s * 1000:.1f} ms (the tool's own time); Done to the "
        f"next first token {ms(round_s)}; added {ms(added)}: the next request's TTFT {ms(next_s)}, the rest "
        f"{rest * 1000:.1f} ms",
    ]


def main() -> None:
    figures = Figures()
    try:
        with tempfile.TemporaryDirectory() as tmp, Rig.opened(Path(tmp)) as rig:
            for r in range(ROUNDS):
                figures.one_round(rig, r)
    except (BenchError, StarterModelMissing) as exc:
        print(f"tool_round: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    for line in report(figures):
        print(line, flush=True)


if __name__ == "__main__":
    main()
