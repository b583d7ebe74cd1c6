"""POST /v1/embeddings driven by the official `openai` client: a tiny BERT (an embedding model, served alone)
and the starter model (a chat model, which embeds beside its chat). Vectors in floats and in base64, inputs of
every shape OpenAI takes, usage, and the 400s that name what is wrong."""

from __future__ import annotations

import base64
import math
from array import array
from collections.abc import Iterator
from pathlib import Path

import httpx
import ollama as ollama_client
import openai
import pytest

from app.server.config import ServerConfig
from app.server.model_catalog import ModelCatalog
from app.server.model_pool import ModelPool, PoolSettings
from app.server.own_engine import OwnEngine
from app.server.runner import ServerThread
from app.services.library_models import models_on_disk
from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.library import ModelStore
from tests.app.server.conftest import FRANCE, MODEL, format_server

TEXTS = ["The cat sat on the mat.", "Embeddings turn text into vectors.", "Paris is the capital of France."]


@pytest.fixture(scope="module")
def bert_server(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with format_server(tiny_bert, tmp_path_factory.mktemp("logs")) as thread:
        yield thread


@pytest.fixture
def bert(bert_server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=bert_server.url, api_key="unused", max_retries=0, timeout=120)


def as_float32(values: list[float]) -> list[float]:
    return array("f", values).tolist()


def norm(values: list[float]) -> float:
    return math.hypot(*values)


def test_float_vectors_in_order_with_usage(bert: openai.OpenAI):
    answer = bert.embeddings.create(model="tiny-bert", input=TEXTS + [TEXTS[0]], encoding_format="float")
    assert answer.object == "list" and answer.model == "tiny-bert"
    assert [d.index for d in answer.data] == [0, 1, 2, 3] and all(d.object == "embedding" for d in answer.data)
    vectors = [d.embedding for d in answer.data]
    assert all(len(v) == 128 for v in vectors)
    assert all(abs(norm(v) - 1.0) < 1e-5 for v in vectors)
    assert max(abs(a - b) for a, b in zip(vectors[0], vectors[3], strict=True)) < 1e-4  # the same text
    assert max(abs(a - b) for a, b in zip(vectors[0], vectors[1], strict=True)) > 1e-3  # another text
    assert answer.usage.prompt_tokens == answer.usage.total_tokens > 4 * 4


def test_base64_is_the_same_float32_vectors(bert: openai.OpenAI):
    floats = bert.embeddings.create(model="tiny-bert", input=TEXTS, encoding_format="float")
    packed = bert.embeddings.create(model="tiny-bert", input=TEXTS, encoding_format="base64")
    sdk_default = bert.embeddings.create(model="tiny-bert", input=TEXTS)  # the SDK asks for base64 itself
    for a, b, c in zip(floats.data, packed.data, sdk_default.data, strict=True):
        # Asked for, base64 comes as is: little-endian float32. 9 digits in JSON give back every float32.
        assert as_float32(a.embedding) == array("f", base64.b64decode(b.embedding)).tolist() == c.embedding
    assert packed.usage == floats.usage


def test_every_input_shape_openai_takes(bert: openai.OpenAI, bert_server: ServerThread):
    one = bert.embeddings.create(model="tiny-bert", input=TEXTS[2], encoding_format="float")
    assert len(one.data) == 1 and len(one.data[0].embedding) == 128
    ids = httpx.post(f"{bert_server.url}/embeddings", json={"input": [[100, 200, 300], [400, 500]]}, timeout=60)
    assert ids.status_code == 200 and ids.json()["usage"]["prompt_tokens"] == 5
    single = bert.embeddings.create(model="tiny-bert", input=[100, 200, 300], encoding_format="float")
    assert len(single.data) == 1 and single.usage.prompt_tokens == 3
    alone, batched = single.data[0].embedding, ids.json()["data"][0]["embedding"]
    assert max(abs(a - b) for a, b in zip(alone, batched, strict=True)) < 1e-4  # batched with another: float noise
    user = bert.embeddings.create(model="tiny-bert", input="hello", user="someone", encoding_format="float")
    assert len(user.data) == 1


def refusal(call) -> openai.BadRequestError:  # noqa: ANN001 - a call of the client
    with pytest.raises(openai.BadRequestError) as refused:
        call()
    return refused.value


def test_refusals_name_what_is_wrong(bert: openai.OpenAI):
    dims = refusal(lambda: bert.embeddings.create(model="tiny-bert", input="hi", dimensions=64))
    assert dims.param == "dimensions" and "128-dimensional" in dims.message
    many = refusal(lambda: bert.embeddings.create(model="tiny-bert", input=["hi"] * 10_000))
    assert many.param == "input" and "10,000 inputs" in many.message and "2,048" in many.message
    empty = refusal(lambda: bert.embeddings.create(model="tiny-bert", input=["hi", ""]))
    assert empty.param == "input[1]"
    long = refusal(lambda: bert.embeddings.create(model="tiny-bert", input=["hi", "word " * 600]))
    assert long.param == "input" and long.code == "context_length_exceeded"
    assert "Input 1 is" in long.message and "at most 512 tokens" in long.message
    bad_id = refusal(lambda: bert.embeddings.create(model="tiny-bert", input=[[1, 10_000_000]]))
    assert "token id 10000000" in bad_id.message
    unknown = refusal(lambda: bert.embeddings.create(model="tiny-bert", input="hi", extra_body={"truncate": True}))
    assert unknown.param == "truncate"
    fmt = refusal(lambda: bert.embeddings.create(model="tiny-bert", input="hi", encoding_format="int8"))
    assert fmt.param == "encoding_format"


def test_another_model_name_is_a_404(bert: openai.OpenAI):
    with pytest.raises(openai.NotFoundError):
        bert.embeddings.create(model="no-such-model", input="hi")


def test_an_embedding_model_writes_no_replies(bert: openai.OpenAI):
    refused = refusal(lambda: bert.chat.completions.create(model="tiny-bert", messages=FRANCE, max_tokens=4))
    assert "embedding model" in refused.message


def test_a_chat_model_embeds_beside_its_chat(client: openai.OpenAI):
    before = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=16, temperature=0)
    answer = client.embeddings.create(model=MODEL, input=TEXTS, encoding_format="float")
    assert len(answer.data) == 3 and all(len(d.embedding) == 576 for d in answer.data)
    assert all(abs(norm(d.embedding) - 1.0) < 1e-5 for d in answer.data)
    after = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=16, temperature=0)
    assert after.choices[0].message.content == before.choices[0].message.content


def test_a_library_server_loads_an_embedding_model_for_embeddings(tmp_path: Path, tiny_bert: Path,
                                                                   starter_model: Path):
    """`tailor serve` over a library: a request naming the embedding model loads it as the plan says (for
    embeddings, its trained context, no KV cache), beside the chat model another request names."""
    store = ModelStore(tmp_path / "data")
    catalog = ModelCatalog(lambda: models_on_disk(store, [str(tiny_bert), str(starter_model)]))
    logs = iter(range(10))
    pool = ModelPool(catalog, PoolSettings(LoadSettings(n_ctx=1024, n_parallel=1)),
                     lambda: OwnEngine(log_path=tmp_path / f"engine-{next(logs)}.log"),
                     lambda reserved: LoadPlanner(profile_for(ram_gib=32), status_dir=tmp_path / "status",
                                                  reserved=reserved), parallel=1)
    thread = ServerThread(None, None, ServerConfig(port=0), router=pool).start()
    try:
        api = openai.OpenAI(base_url=thread.url, api_key="unused", max_retries=0, timeout=120)
        answer = api.embeddings.create(model="tiny-bert", input=TEXTS, encoding_format="float")
        assert answer.model == "tiny-bert" and len(answer.data[0].embedding) == 128
        chat = api.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=4, temperature=0)
        assert chat.choices[0].message.content
        (bert,) = [m for m in pool.loaded() if m.model.id == "tiny-bert"]
        assert bert.info.embeddings and bert.info.n_ctx == 512
    finally:
        thread.stop()


def test_ollama_s_embed_gives_the_same_vectors_as_openai_s(bert: openai.OpenAI, bert_server: ServerThread):
    model = bert.models.list().data[0].id
    texts = ["a red apple", "the blue sea"]
    openai_vectors = [d.embedding for d in bert.embeddings.create(model=model, input=texts).data]
    ollama = ollama_client.Client(host=bert_server.url.removesuffix("/v1"))
    answer = ollama.embed(model=model, input=texts)
    assert len(answer.embeddings) == 2 and answer.prompt_eval_count > 0
    for mine, theirs in zip(answer.embeddings, openai_vectors, strict=True):
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-6
    legacy = ollama.embeddings(model=model, prompt="a red apple")
    assert len(legacy.embedding) == len(openai_vectors[0])
    with pytest.raises(ollama_client.ResponseError) as missing:
        ollama.embed(model="no-such-model", input="x")
    assert missing.value.status_code == 404
    bad = httpx.post(bert_server.url.removesuffix("/v1") + "/api/embed",
                     json={"model": model, "input": "x", "truncate": "yes"}, timeout=60)
    assert bad.status_code == 400 and "truncate" in bad.json()["error"]  # Ollama's error shape
