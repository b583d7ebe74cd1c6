"""Runs one step of the GPU check in this process and writes its outcome as JSON (tests/gpu/check.py starts it).

    python -m tests.gpu.step_runner NAME CONTEXT_JSON RESULT_JSON
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from tests.gpu.context import CheckContext
from tests.gpu.report import Outcome
from tests.gpu.steps import BY_NAME


def main(argv: list[str]) -> int:
    name, context, result = argv
    step = BY_NAME[name]
    ctx = CheckContext.load(Path(context))
    try:
        outcome = step.run(ctx)
    except Exception as exc:  # noqa: BLE001 - the orchestrator reports it as the step's error
        traceback.print_exc()
        outcome = Outcome("error", message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-4)}")
    Path(result).write_text(json.dumps(outcome.to_dict(), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
