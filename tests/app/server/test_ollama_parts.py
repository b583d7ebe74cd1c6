"""The parts of Ollama's API that need no engine: digests, names, request checks against a model's facts."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from app.server.errors import ApiError
from app.server.model_router import ServedModel
from app.server.ollama.facts import FactsCache, file_digest, human_number
from app.server.ollama.names import find_served
from app.server.ollama.pull import hub_name
from app.server.ollama.request import basics, parse_chat, parse_generate
from engine.protocol import ModelInfo

PLAIN = ModelInfo("/m/plain.gguf", "plain", "llama", 2048, 8192, 135_000_000, 10, True)
THINKER = ModelInfo("/m/qwen3.gguf", "qwen3", "qwen3", 2048, 8192, 135_000_000, 10, True,
                    reasoning_format="think-tags", tool_format="hermes")


def test_a_file_in_the_hugging_face_cache_has_its_sha256_as_digest(tmp_path: Path):
    data = b"GGUF and some weights"
    sha = hashlib.sha256(data).hexdigest()
    blob = tmp_path / "models--org--repo" / "blobs" / sha
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    link = tmp_path / "models--org--repo" / "snapshots" / "abc" / "model-Q4_K_M.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    assert file_digest(link, link.stat()) == (sha, True)


def test_elsewhere_the_digest_is_a_stable_id_that_changes_with_the_file(tmp_path: Path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a real model")
    digest, content = file_digest(model, model.stat())
    assert not content and len(digest) == 64 and digest != hashlib.sha256(model.read_bytes()).hexdigest()
    assert FactsCache().facts(str(model)).digest == digest  # an unreadable header costs nothing else
    model.write_bytes(b"another model, longer")
    assert file_digest(model, model.stat())[0] != digest


@pytest.mark.parametrize(("n", "text"), [(8_030_261_248, "8.0B"), (7_000_000_000, "7B"), (494_032_768, "494.03M"),
                                         (135_000_000, "135M"), (12_345, "12K"), (999, "999")])
def test_parameter_sizes_read_as_ollama_writes_them(n: int, text: str):
    assert human_number(n) == text


def test_names_match_with_ollama_s_latest_tag_and_any_case():
    listing = [ServedModel("Qwen3-8B-Q4_K_M", ("Qwen3-8B-Q4_K_M", "qwen3"), "/m/q.gguf", 1)]
    for name in ("Qwen3-8B-Q4_K_M", "Qwen3-8B-Q4_K_M:latest", "qwen3-8b-q4_k_m", "qwen3:latest"):
        assert find_served(listing, name) is listing[0]
    assert find_served(listing, "qwen3:8b") is None


@pytest.mark.parametrize(("name", "repo", "quant"), [
    ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "bartowski/Llama-3.2-1B-Instruct-GGUF", "Q4_K_M"),
    ("huggingface.co/org/Model.v2-GGUF", "org/Model.v2-GGUF", None),
    ("https://hf.co/org/repo:latest", "org/repo", None),
    ("HF.CO/org/repo:iq3_m", "org/repo", "iq3_m"),
])
def test_hugging_face_names_as_ollama_takes_them(name: str, repo: str, quant: str | None):
    assert hub_name(name) == (repo, quant)


@pytest.mark.parametrize("name", ["llama3.2", "qwen3:8b", "hf.co/just-an-org", "hf.co/org/repo/extra"])
def test_other_names_are_a_400_saying_what_to_pull(name: str):
    with pytest.raises(ApiError) as caught:
        hub_name(name)
    assert caught.value.status == 400 and "tailor pull" in caught.value.message


def refusal(call) -> ApiError:  # noqa: ANN001
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_what_a_model_cannot_do_is_refused_in_ollama_s_words():
    ask = {"model": "plain", "messages": [{"role": "user", "content": "hi"}]}
    assert refusal(lambda: parse_chat({**ask, "think": True}, PLAIN, "plain")).message == '"plain" does not support thinking'
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert refusal(lambda: parse_chat({**ask, "tools": tools}, PLAIN, "plain")).message == '"plain" does not support tools'
    assert parse_chat({**ask, "think": False}, PLAIN, "plain").shape.reasoning == "off"  # nothing to switch off
    image = {"role": "user", "content": "hi", "images": ["iVBORw0KGgo="]}
    assert refusal(lambda: parse_chat({**ask, "messages": [image]}, PLAIN, "plain")).param.startswith("messages[0]")


@pytest.mark.parametrize(("think", "reasoning"), [(None, "auto"), (True, "on"), (False, "off"), ("low", "low"),
                                                 ("medium", "medium"), ("high", "high")])
def test_think_maps_to_the_engine_s_reasoning(think, reasoning: str):
    body = {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "think": think}
    assert parse_chat(body, THINKER, "qwen3").shape.reasoning == reasoning


@pytest.mark.parametrize("think", ["yes", 1, [], {}, "none"])
def test_a_think_that_is_none_of_ollama_s_values_is_a_400(think):
    body = {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "think": think}
    assert refusal(lambda: parse_chat(body, THINKER, "qwen3")).param == "think"


def test_tool_calls_and_answers_come_in_ollama_s_shape():
    messages = [
        {"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"function": {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}}]},
        {"role": "tool", "content": "09:00", "tool_name": "get_time"},
        {"role": "tool", "content": "18 C"},
    ]
    params = parse_chat({"model": "qwen3", "messages": messages}, THINKER, "qwen3")
    weather, time = params.messages[1].tool_calls
    assert weather.arguments == '{"city": "Paris"}' and weather.id != time.id
    # Answers find their calls: by the function's name, else the first call still unanswered.
    assert (params.messages[2].tool_call_id, params.messages[2].name) == (time.id, "get_time")
    assert (params.messages[3].tool_call_id, params.messages[3].name) == (weather.id, "get_weather")


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "user", "content": "x"}], "format": "yaml"}, "format"),
    ({"messages": [{"role": "user", "content": "x"}], "options": [1]}, "options"),
    ({"messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs"),
    ({"messages": "hi"}, "messages"),
])
def test_a_bad_chat_field_is_a_400_naming_it(body: dict, param: str):
    assert refusal(lambda: parse_chat({"model": "qwen3", **body}, THINKER, "qwen3")).param == param


@pytest.mark.parametrize(("body", "param"), [
    ({"stream": "yes"}, "stream"), ({"keep_alive": "soon"}, "keep_alive"), ({"model": ""}, "model"),
    ({"model": 3}, "model"),
])
def test_what_every_request_says_is_checked_first(body: dict, param: str):
    assert refusal(lambda: basics({"model": "qwen3", **body}, chat=True)).param == param


def test_generate_takes_system_and_raw_as_ollama_does():
    params = parse_generate({"model": "m", "prompt": "hi", "system": "Be brief."}, PLAIN, "m")
    assert [m.role for m in params.messages] == ["system", "user"] and params.prompt is None
    raw = parse_generate({"model": "m", "prompt": "<|im_start|>user\nhi", "raw": True}, PLAIN, "m")
    assert raw.messages == () and raw.prompt == "<|im_start|>user\nhi"
    assert refusal(lambda: parse_generate({"model": "m", "prompt": "x", "raw": True, "system": "s"}, PLAIN, "m")
                   ).param == "system"
    assert basics({"model": "m", "prompt": ""}, chat=False).load_only
    assert not basics({"model": "m", "prompt": "x"}, chat=False).load_only


@pytest.mark.parametrize(("options", "param"), [
    ({"top_k": 10**400}, "options.top_k"), ({"top_k": -1}, "options.top_k"), ({"temperature": -0.5}, "options.temperature"),
    ({"top_p": 1.5}, "options.top_p"), ({"temperature": 10**400}, "options.temperature"), ({"stop": ["x"] * 17}, "options.stop"),
    ({"stop": [""]}, "options.stop"), ({"num_ctx": "2048"}, "options.num_ctx"),
])
def test_options_out_of_their_range_are_a_400_naming_them(options: dict, param: str):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "options": options}
    assert refusal(lambda: parse_chat(body, PLAIN, "m")).param == param


def test_options_map_onto_the_engine_s_sampling():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "options": {
        "temperature": 0.2, "top_p": 0.5, "top_k": 7, "seed": -1, "num_predict": 99, "stop": "END", "num_ctx": 1024,
        "min_p": 0.1, "unknown": {"nested": True}}}
    sampling = parse_chat(body, PLAIN, "m").sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_tokens, sampling.stop) == \
        (0.2, 0.5, 7, 99, ("END",))
    assert sampling.seed == (1 << 32) - 1  # a 32-bit seed, as llama.cpp takes it
    for num_predict in (-1, -2, 0, 10**6):  # no limit, or more than the context: until the context is full
        body["options"]["num_predict"] = num_predict
        assert parse_chat(body, PLAIN, "m").sampling.max_tokens == PLAIN.n_ctx
    assert parse_chat(body, PLAIN, "m").no_effect == ("min_p",)
