"""The tools a reply offers the model: those of the chat's MCP servers that are ready, as many as fit.

Tools take context: each one's name, description and JSON Schema are rendered into the prompt by the
chat template. A server that announces hundreds of tools would fill a small context, so the request
carries the tools in the servers' order up to a share of the context (estimated high, as the context
guard estimates a message), and says how many were left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from app.chat.context_guard import estimate_tokens
from app.mcp.types import McpTool

TOOLS_SHARE = 4  # the tools take at most 1/TOOLS_SHARE of the context
UNKNOWN_CONTEXT_BUDGET = 8192  # a remote server's context is not known: tokens the tools may take there


@dataclass(slots=True, frozen=True)
class ToolSet:
    """The tools of one reply: by the name the model is given, as ReplyShape.tools' JSON, their estimated
    tokens, and how many of the servers' tools were left out for the context."""

    by_name: dict[str, McpTool]
    tools_json: str
    tokens: int
    left_out: int = 0

    def summary(self) -> str:
        """A line for the status bar when tools were left out ("" otherwise)."""
        if not self.left_out:
            return ""
        offered = len(self.by_name)
        # One short line: the status bar shares its width with the reply's figures.
        return (f"Tools: {offered:,} of {offered + self.left_out:,} fit the context; {self.left_out:,} left out "
                "(a larger context lets more in)")


def tool_tokens(tool: McpTool) -> int:
    """The tokens a tool takes in the prompt, estimated high."""
    return estimate_tokens(json.dumps(tool.openai_tool(), ensure_ascii=False))


def fit_tools(tools: Sequence[McpTool], n_ctx: int) -> ToolSet | None:
    """The tools that fit a share of an `n_ctx`-token context (0: not known), in order; None when none do."""
    budget = (n_ctx // TOOLS_SHARE) if n_ctx > 0 else UNKNOWN_CONTEXT_BUDGET
    chosen: list[McpTool] = []
    used = 0
    for tool in tools:
        cost = tool_tokens(tool)
        if used + cost > budget:
            break
        chosen.append(tool)
        used += cost
    if not chosen:
        return None
    tools_json = json.dumps([t.openai_tool() for t in chosen], ensure_ascii=False)
    return ToolSet({t.qualified: t for t in chosen}, tools_json, used, len(tools) - len(chosen))
