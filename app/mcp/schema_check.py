"""JSON Schema checks for MCP tools: a tool's input schema must be JSON Schema to be offered, and a call's
arguments must fit it before the call goes to the server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, exceptions, validators
from jsonschema.exceptions import best_match

MAX_DETAIL = 200  # characters of jsonschema's message kept in a reason


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a JSON Schema a model can be given (one line), or None when it is."""
    if not isinstance(schema, Mapping):
        return "its input schema is not an object"
    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "the top level"
        return f"its input schema is not JSON Schema (at {where}: {_short(exc.message)})"
    except Exception as exc:  # noqa: BLE001 - an unknown $schema, a bad $ref...: not usable either
        return f"its input schema is not JSON Schema ({_short(str(exc))})"
    return None


def validator(schema: Mapping[str, Any]) -> Any:
    """A validator for a schema that passed `schema_problem`."""
    return validators.validator_for(schema, default=Draft202012Validator)(schema)


def arguments_problem(check: Any, tool: str, arguments: Any) -> str | None:
    """One line naming the field where `arguments` do not fit the tool's schema, or None when they fit."""
    if not isinstance(arguments, dict):
        return f"{tool}: the arguments must be a JSON object, not {type(arguments).__name__}"
    try:
        error = best_match(check.iter_errors(arguments))
    except Exception as exc:  # noqa: BLE001 - a schema that breaks while validating (a $ref to nowhere)
        return f"{tool}: its schema cannot check arguments ({_short(str(exc))})"
    if error is None:
        return None
    field = ".".join(str(p) for p in error.absolute_path)
    if not field:
        return f"{tool}: the arguments do not fit its schema: {_short(error.message)}"
    return f"{tool}: argument '{field}' does not fit its schema: {_short(error.message)}"


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"
