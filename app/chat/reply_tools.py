"""ReplyTools: the tool side of one streaming reply: its steps so far, the round that runs, and what the
next request of the reply is made of (the conversation before it, its sampling and shape, the engine).

A reply with tools is several requests to the engine: each that ends with calls becomes a step; the
next one is the conversation, then every step's turns (engine_history.step_messages). The steps are
saved with the message as each changes, so a crash keeps the calls made and their results.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from app.chat.engine_history import step_messages
from app.chat.tool_rounds import ToolHost, ToolRound
from app.chat.tool_set import ToolSet
from app.services.history.tool_steps import ToolCallRecord, ToolStep
from engine.interface import Engine
from engine.protocol import ChatMessage, Done, ReplyShape, SamplingParams

DEFAULT_STEP_CAP = 10


def step_cap_note(cap: int) -> str:
    return f"Not run: the reply reached its cap of {cap} tool steps."


@dataclass(slots=True)
class ReplyTools:
    """What a reply that may call tools keeps between its requests."""

    host: ToolHost
    tools: ToolSet
    engine: Engine
    history: list[ChatMessage]  # the conversation before the reply
    sampling: SamplingParams
    shape: ReplyShape  # the first request's (a tool_choice of "required" or a name holds for it alone)
    cap: int = DEFAULT_STEP_CAP
    allowed_in_chat: set[str] = field(default_factory=set)
    steps: list[ToolStep] = field(default_factory=list)
    round: ToolRound | None = None
    round_ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def takes(self, event: Done) -> bool:
        """Whether the reply goes on in a tool step after this Done (it called tools)."""
        return event.finish_reason == "tool_calls" and bool(event.tool_calls)

    def new_step(self, event: Done, text: str, reasoning: str) -> ToolStep:
        calls = tuple(ToolCallRecord(c.id, c.name, c.arguments, server=self._server_of(c.name))
                      for c in event.tool_calls)
        self.steps.append(ToolStep(text, calls, reasoning))
        return self.steps[-1]

    def _server_of(self, name: str) -> str:
        tool = self.tools.by_name.get(name)
        return tool.server if tool else ""

    @property
    def over_cap(self) -> bool:
        return len(self.steps) > self.cap

    def next_request(self) -> int:
        """Ask the engine for what the model writes after the steps so far (tool_choice back to auto).

        Raises:
            EngineNotRunning: the engine is gone.
        """
        messages = list(self.history)
        for step in self.steps:
            messages.extend(step_messages(step))
        shape = ReplyShape(self.shape.reasoning, self.shape.think_budget, self.shape.json_schema, self.shape.tools,
                           "auto", self.shape.parallel_calls)
        return self.engine.generate(messages, self.sampling, shape=shape)

    def cancel_round(self) -> None:
        """Stop the round that runs, if any (its step keeps how each call ended)."""
        if self.round is not None:
            self.steps[-1] = self.round.cancel()
            self.round = None
