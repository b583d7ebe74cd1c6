"""Every request the server turns away, with the status and OpenAI-style body it says why with."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import httpx
import openai
import pytest

from app.server.errors import from_engine
from app.server.runner import ServerThread
from engine.chat_template import REFUSED
from engine.protocol import Error
from tests.app.server.conftest import FRANCE, MODEL, SYSTEM

GOOD = {"model": MODEL, "messages": FRANCE, "max_tokens": 4}


def post(server: ServerThread, body: object = None, path: str = "/chat/completions", **kwargs) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=GOOD if body is None else body, timeout=60, **kwargs)


def assert_error(response: httpx.Response, status: int, code: str | None = None, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and error["type"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param


def test_api_key_is_required_when_set(start_server: Callable[..., ServerThread]):
    server = start_server(api_key="s3cret")
    assert_error(post(server), 401, "invalid_api_key")
    wrong = post(server, headers={"Authorization": "Bearer nope"})
    assert_error(wrong, 401, "invalid_api_key")
    assert wrong.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url, api_key="nope", max_retries=0).models.list()
    good = openai.OpenAI(base_url=server.url, api_key="s3cret", max_retries=0)
    assert good.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=4).choices


def test_foreign_host_header_is_refused(server: ServerThread):
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: the Host header gives it away.
    assert_error(post(server, headers={"Host": "attacker.example:8080"}), 403, "host_not_allowed")
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
        assert post(server, headers={"Host": host}).status_code == 200


def test_host_check_comes_before_the_key(start_server: Callable[..., ServerThread]):
    server = start_server(api_key="s3cret")
    assert_error(post(server, headers={"Host": "attacker.example"}), 403, "host_not_allowed")


def test_cross_origin_requests_are_off_by_default(server: ServerThread):
    response = post(server, headers={"Origin": "https://example.com"})
    assert_error(response, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in response.headers
    preflight = httpx.options(
        f"{server.url}/chat/completions",
        headers={"Origin": "https://example.com", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers


def test_allowed_origins_get_cors_headers(start_server: Callable[..., ServerThread]):
    server = start_server(allow_origins=("http://localhost:3000",), api_key="k")
    preflight = httpx.options(
        f"{server.url}/chat/completions",
        headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"},
    )
    assert preflight.status_code == 204  # answered without the key: browsers send none here
    assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = post(server, headers={"Origin": "http://localhost:3000", "Authorization": "Bearer k"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert_error(post(server, headers={"Origin": "http://evil.example", "Authorization": "Bearer k"}), 403)


def test_oversized_bodies_are_refused(start_server: Callable[..., ServerThread]):
    server = start_server(max_body_bytes=10_000)
    big = {**GOOD, "messages": [{"role": "user", "content": "x" * 20_000}]}
    assert_error(post(server, big), 413, "request_too_large")

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b"x" * 1000

    response = httpx.post(f"{server.url}/chat/completions", content=chunks(), timeout=60)
    assert_error(response, 413, "request_too_large")


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 10**9}, "max_tokens"),
        ({"max_tokens": "12"}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_completion_tokens": True}, "max_completion_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": 5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": "abc"}, "seed"),
        ({"stop": 3}, "stop"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"stream": "yes"}, "stream"),
        ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content[0].image_url"),
        ({"model": 7}, "model"),
    ],
)
def test_bad_parameters_are_400_with_the_field_named(server: ServerThread, change: dict, param: str):
    assert_error(post(server, {**GOOD, **change}), 400, param=param)


def test_bad_completion_prompts(server: ServerThread):
    for prompt in ("", None, [1, 2, 3], ["a", "b"]):
        assert_error(post(server, {"model": MODEL, "prompt": prompt}, "/completions"), 400, param="prompt")


def test_unknown_model_is_404(server: ServerThread):
    assert_error(post(server, {**GOOD, "model": "gpt-9"}), 404, "model_not_found", "model")


def test_malformed_json_and_wrong_shapes(server: ServerThread):
    bad_json = httpx.post(f"{server.url}/chat/completions", content=b"{not json", timeout=60)
    assert_error(bad_json, 400)
    assert_error(post(server, ["a list"]), 400)


def test_unknown_routes_and_methods(server: ServerThread):
    assert_error(httpx.get(f"{server.url}/nothing-here"), 404)
    assert_error(httpx.get(f"{server.url}/chat/completions"), 405)


def test_prompt_over_the_context_is_400(server: ServerThread):
    long = {**GOOD, "messages": [{"role": "user", "content": "word " * 5000}]}
    assert_error(post(server, long), 400, "context_length_exceeded")


def post_raw(server: ServerThread, raw: bytes, path: str = "/chat/completions") -> httpx.Response:
    return httpx.post(f"{server.url}{path}", content=raw, headers={"Content-Type": "application/json"}, timeout=60)


def test_deeply_nested_json_is_400(server: ServerThread):
    for depth in (100_000, 70):  # past the parser's recursion, and past the server's own limit
        raw = b'{"model": "x", "messages": ' + b"[" * depth + b"]" * depth + b"}"
        assert_error(post_raw(server, raw), 400, "invalid_json")
    nested_but_fine = {**GOOD, "metadata": {"a": [[[["deep enough"]]]]}}
    assert post(server, nested_but_fine).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/chat/completions", {**GOOD, "messages": [{"role": "user", "content": "@"}]}, "messages[0].content"),
        ("/chat/completions", {**GOOD, "messages": [SYSTEM, {"role": "user", "content": [{"type": "text", "text": "@"}]}]},
         "messages[1].content[0].text"),
        ("/chat/completions", {**GOOD, "model": "@"}, "model"),
        ("/chat/completions", {**GOOD, "stop": ["ok", "@"]}, "stop[1]"),
        ("/chat/completions", {**GOOD, "messages": [{"role": "@", "content": "hi"}]}, "messages[0].role"),
        ("/chat/completions", {**GOOD, "user": "@"}, "user"),
        ("/completions", {"model": MODEL, "prompt": "@", "echo": True}, "prompt"),
    ],
)
def test_a_lone_surrogate_anywhere_is_400_naming_the_field(server: ServerThread, path: str, body: dict, param: str):
    # json.dumps writes the placeholder; the request carries the escape a client would send.
    raw = json.dumps(body).replace('"@"', '"\\ud800"').encode()
    assert b"\\ud800" in raw
    response = post_raw(server, raw, path)
    assert_error(response, 400, "invalid_value", param)
    assert "surrogate" in response.json()["error"]["message"]


def test_a_surrogate_pair_is_ordinary_text(server: ServerThread):
    raw = json.dumps({**GOOD, "messages": [{"role": "user", "content": "smile \U0001f600"}]}).encode()
    assert b"\\ud83d\\ude00" in raw  # json.dumps escapes it as a pair
    assert post_raw(server, raw).status_code == 200


@pytest.mark.parametrize("role", [["user"], {"a": 1}, 3, None])
def test_a_role_that_is_not_a_string_is_400(server: ServerThread, role: object):
    assert_error(post(server, {**GOOD, "messages": [{"role": role, "content": "hi"}]}), 400, param="messages[0].role")


def raw_request(server: ServerThread, authorization: bytes) -> int:
    """The status of GET /v1/models sent with exactly these Authorization bytes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: "
                     + authorization + b"\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_a_non_ascii_key_matches_the_utf8_bytes_a_client_sends(start_server: Callable[..., ServerThread]):
    key = "clé-Schlüssel-ключ"
    server = start_server(api_key=key)
    assert raw_request(server, b"Bearer " + key.encode("utf-8")) == 200
    assert raw_request(server, b"Bearer " + key.encode("utf-8") + b"x") == 401
    assert raw_request(server, b"Bearer " + "clé-Schlüssel".encode("latin-1")) == 401
    assert raw_request(server, b"Bearer " + key.encode("utf-8")[:-1]) == 401


def test_a_conversation_the_template_refuses_is_the_clients_error():
    error = from_engine(Error("template", f"{REFUSED}: Conversation roles must alternate user/assistant"))
    assert (error.status, error.code, error.param) == (400, "chat_template_refused", "messages")
    broken = from_engine(Error("template", "the chat template does not compile: unexpected end"))
    assert broken.status == 500


def test_more_messages_than_the_context_has_tokens_is_400_before_rendering(server: ServerThread):
    many = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(2049)]  # n_ctx is 2048
    assert_error(post(server, {**GOOD, "messages": many}), 400, "context_length_exceeded", "messages")
