"""The names the model sees, the schema checks and a result's text: plain functions."""

from __future__ import annotations

import mcp_types as types

from app.mcp.naming import model_names, sanitize
from app.mcp.result_cut import cut, for_model
from app.mcp.results import result_text
from app.mcp.schema_check import arguments_problem, schema_problem, validator


def test_names_are_the_tools_own_unless_two_servers_share_one():
    assert model_names([("a", "read"), ("b", "write")]) == ["read", "write"]
    assert model_names([("a", "read"), ("b", "read"), ("b", "x")]) == ["a__read", "b__read", "x"]


def test_names_follow_openais_rule_and_stay_unique():
    assert sanitize("files.read file") == "files_read_file"
    assert sanitize("") == "tool"
    long = "t" * 100
    names = model_names([("s", long), ("s", "a.b"), ("s", "a_b"), ("my server", "x"), ("my.server", "x")])
    assert names[0] == "t" * 64
    assert names[1:3] == ["a_b", "a_b_2"]
    assert names[3:] == ["my_server__x", "my_server__x_2"]
    assert all(len(n) <= 64 and sanitize(n) == n for n in names)
    cut_names = model_names([("s", "u" * 70), ("s", "u" * 80)])
    assert cut_names == ["u" * 64, "u" * 62 + "_2"]


def test_schema_and_argument_checks_name_the_field():
    assert schema_problem({"type": "object", "properties": {"n": {"type": "integer"}}}) is None
    assert schema_problem({"type": "object", "required": "n"}).startswith(
        "its input schema is not JSON Schema (at required: 'n' is not of type 'array'")
    check = validator({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    assert arguments_problem(check, "count", {"n": 3}) is None
    assert arguments_problem(check, "count", {"n": "3"}) == \
        "count: argument 'n' does not fit its schema: '3' is not of type 'integer'"
    assert arguments_problem(check, "count", []) == "count: the arguments must be a JSON object, not list"


def test_result_text_joins_text_and_names_other_parts():
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="one"),
        types.ImageContent(type="image", data="AAAA", mime_type="image/jpeg"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="hé")),
        types.ResourceLink(type="resource_link", uri="file:///b", name="b"),
        types.TextContent(type="text", text="two")])
    assert result_text(result) == ("one\n[image: JPEG, 3 bytes]\n[resource file:///a.txt, 3 bytes]\n"
                                   "[resource link file:///b]\ntwo")
    assert result_text(types.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'
    assert cut("é" * 3, limit=3) == "é\n[cut: the result was 6 bytes; only the first 3 are kept]"


def test_the_model_reads_a_results_first_64_kib_and_is_told_the_rest_was_cut():
    whole = "word " * 20_000  # 100,000 bytes
    sent = for_model(whole)
    assert sent.startswith(whole[: 64 << 10])
    assert sent.endswith("\n[cut: the result is 100,000 bytes; the model is given the first 65,536]")
    assert for_model("short") == "short"
