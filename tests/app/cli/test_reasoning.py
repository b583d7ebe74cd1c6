"""`tailor chat --reasoning / --think-budget / --json-schema`, run as a user runs them, on the starter
model's weights under QwQ's real template (its prompt opens the think block)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.app.cli.test_chat_command import tailor

STORY = "Write a short story about a dragon who bakes bread."


@pytest.fixture(scope="module")
def qwq(format_models: Callable[[str], Path]) -> Path:
    return format_models("qwq")


def test_the_thinking_goes_to_stderr_the_answer_to_stdout_and_the_budget_ends_it(qwq: Path, tmp_path: Path):
    result = tailor("chat", "--model", str(qwq), "--temperature", "0", "--max-tokens", "48", "--think-budget", "10",
                    "--json", STORY, home=tmp_path)
    assert result.returncode == 0, result.stderr
    *answer, last = result.stdout.rstrip("\n").split("\n")
    stats = json.loads(last)
    assert 10 <= stats["reasoning_tokens"] <= 16 and stats["gen_tokens"] > stats["reasoning_tokens"]
    thinking = result.stderr.split("\n", 1)[1]  # after the startup line
    assert thinking.strip() and "</think>" not in thinking
    assert "".join(answer).strip() and "</think>" not in "".join(answer)


def test_reasoning_off_answers_at_once(qwq: Path, tmp_path: Path):
    result = tailor("chat", "--model", str(qwq), "--temperature", "0", "--max-tokens", "24", "--reasoning", "off",
                    "--json", STORY, home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.rstrip("\n").split("\n")[-1])["reasoning_tokens"] == 0
    assert len(result.stderr.strip().splitlines()) == 1  # the startup line alone: no thinking


def test_a_json_schema_answer_follows_it(tmp_path: Path):
    schema = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                               "pages": {"type": "integer", "minimum": 1, "maximum": 2000}},
              "required": ["title", "pages"]}
    path = tmp_path / "book.json"
    path.write_text(json.dumps(schema))
    result = tailor("chat", "--temperature", "0", "--max-tokens", "80", "--json-schema", str(path),
                    "Describe a famous book as JSON.", home=tmp_path)
    assert result.returncode == 0, result.stderr
    jsonschema.validate(json.loads(result.stdout), schema)


@pytest.mark.parametrize(("document", "words"), [
    ('{"type": "array", "uniqueItems": true}', "'uniqueItems' (at #) is not supported"),
    ('{"type": "strng"}', "not a valid"),
    ("{not json", "cannot read it as JSON"),
])
def test_a_schema_it_cannot_follow_is_one_line_and_exit_1(tmp_path: Path, document: str, words: str):
    path = tmp_path / "schema.json"
    path.write_text(document)
    result = tailor("chat", "--json-schema", str(path), "Hi", home=tmp_path)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tailor: error: --json-schema ") and words in line
