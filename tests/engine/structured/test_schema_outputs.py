"""Structured output end to end: the starter model, held to each corpus schema by its grammar.

Greedy decoding (temperature 0) with llama-cpp-python's own grammar sampler; every reply
must end by itself and be a valid instance of its schema, formats included.
"""

from __future__ import annotations

import datetime
import json

import jsonschema
import llama_cpp
import pytest

from engine.starter import starter_model_path
from engine.structured.json_schema_grammar import schema_grammar
from tests.engine.structured.schema_corpus import CORPUS, Case

# The formats jsonschema checks itself (date, uuid), plus time and date-time, which it checks
# only with a library Tailor does not install; RFC 3339 wants the offset in both.
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or datetime.datetime.fromisoformat(value).tzinfo is not None


@FORMATS.checks("time", raises=ValueError)
def _time(value: object) -> bool:
    return not isinstance(value, str) or datetime.time.fromisoformat(value).tzinfo is not None


@pytest.fixture(scope="module")
def llm() -> llama_cpp.Llama:
    model = llama_cpp.Llama(str(starter_model_path()), n_ctx=2048, verbose=False)
    yield model
    model.close()


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_the_model_replies_with_a_valid_instance_that_ends_by_itself(llm, case: Case):
    grammar = llama_cpp.LlamaGrammar.from_string(schema_grammar(case.schema), verbose=False)
    reply = llm.create_chat_completion(
        messages=[{"role": "user", "content": case.prompt}],
        grammar=grammar,
        temperature=0,
        max_tokens=case.max_tokens,
    )
    choice = reply["choices"][0]
    text = choice["message"]["content"]
    assert choice["finish_reason"] == "stop", f"ran to max_tokens: {text!r}"
    jsonschema.validate(json.loads(text), case.schema, format_checker=FORMATS)
