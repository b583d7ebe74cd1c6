"""The body of POST /v1/embeddings checked: every shape of `input` OpenAI takes, and a 400 naming each bad field."""

from __future__ import annotations

import pytest

from app.server.embeddings.params import MAX_INPUTS, parse_embedding, parse_inputs
from app.server.errors import ApiError
from engine.protocol import ModelInfo

BERT = ModelInfo("/m/tiny-bert.gguf", "Tiny BERT", "bert", 512, 512, 1, 1, False, embeddings=True, n_embd=128)


def refused(body: object, model: ModelInfo | None = BERT) -> ApiError:
    with pytest.raises(ApiError) as error:
        parse_embedding(body, model)
    assert error.value.status == 400
    return error.value


@pytest.mark.parametrize(("value", "inputs"), [
    ("hello", ("hello",)),
    (["a", "b"], ("a", "b")),
    ([1, 2, 3], ((1, 2, 3),)),
    ([[1, 2], [3]], ((1, 2), (3,))),
    (["a", [4, 5]], ("a", (4, 5))),
])
def test_inputs_of_every_shape(value, inputs):
    assert parse_inputs(value) == inputs


def test_a_request_defaults_to_floats_and_the_loaded_model():
    params = parse_embedding({"input": "hi", "user": "me"}, BERT)
    assert params.encoding == "float" and params.model is None and params.inputs == ("hi",)
    assert parse_embedding({"input": "hi", "model": "x", "encoding_format": "base64"}, None).encoding == "base64"


@pytest.mark.parametrize(("body", "param", "words"), [
    ({}, "input", "must be a string"),
    ({"input": []}, "input", "empty array"),
    ({"input": ""}, "input", "empty string"),
    ({"input": ["a", ""]}, "input[1]", "empty string"),
    ({"input": [[1], []]}, "input[1]", "empty array of token ids"),
    ({"input": [[1], [-2]]}, "input[1]", "token ids"),
    ({"input": [True]}, "input[0]", "must be a string"),
    ({"input": [{"text": "a"}]}, "input[0]", "must be a string"),
    ({"input": ["a"] * (MAX_INPUTS + 1)}, "input", "at most 2,048"),
    ({"input": "a", "dimensions": 64}, "dimensions", "128-dimensional vectors"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format", "float"),
    ({"input": "a", "model": 3}, "model", "string"),
    ({"input": "a", "truncate": True}, "truncate", "not a field"),
])
def test_each_bad_field_is_named(body, param, words):
    error = refused(body)
    assert error.param == param and words in error.message


def test_dimensions_is_refused_without_a_model_known():
    assert "vectors of its own width" in refused({"input": "a", "dimensions": 8}, None).message
