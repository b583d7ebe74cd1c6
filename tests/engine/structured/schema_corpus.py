"""Schemas a user might hand structured output, each with a prompt that invites it.

Strings and arrays carry maxLength/maxItems where the 135M starter model would otherwise
go on until max_tokens (it repeats itself at temperature 0); every keyword structured
output supports is here at least once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    prompt: str
    schema: dict
    max_tokens: int = 160


def _text(most: int) -> dict:
    return {"type": "string", "maxLength": most}


CORPUS: list[Case] = [
    Case("book", "Describe a book as JSON.", {
        "type": "object",
        "properties": {
            "title": _text(60),
            "author": _text(40),
            "year": {"type": "integer", "minimum": 1450, "maximum": 2030},
            "pages": {"type": "integer", "minimum": 1, "maximum": 5000},
        },
        "required": ["title", "author", "year"],
    }),
    Case("person-address", "Give me a person with their home address, as JSON.", {
        "type": "object",
        "properties": {
            "name": _text(40),
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "address": {
                "type": "object",
                "properties": {"street": _text(50), "city": _text(30), "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["street", "city", "zip"],
            },
        },
        "required": ["name", "age", "address"],
    }),
    Case("shopping-list", "Write a shopping list as JSON: each item with a name and a quantity.", {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {"name": _text(24), "quantity": {"type": "integer", "minimum": 1, "maximum": 99}},
                    "required": ["name", "quantity"],
                },
            },
        },
        "required": ["items"],
    }),
    Case("weather-enum", "What is the weather like in Paris today? Answer as JSON.", {
        "type": "object",
        "properties": {
            "city": _text(30),
            "sky": {"enum": ["sunny", "cloudy", "rainy", "snowy"]},
            "celsius": {"type": "integer", "minimum": -60, "maximum": 60},
        },
        "required": ["city", "sky", "celsius"],
    }),
    Case("const-version", "Report the status of the service as JSON.", {
        "type": "object",
        "properties": {"version": {"const": 2}, "status": {"enum": ["ok", "degraded", "down"]}},
        "required": ["version", "status"],
    }),
    Case("optional-fields", "Describe a movie as JSON; add a rating only if you know it.", {
        "type": "object",
        "properties": {
            "title": _text(50),
            "rating": {"type": "number", "minimum": 0, "maximum": 10},
            "director": _text(40),
            "sequel": {"type": "boolean"},
        },
        "required": ["title"],
    }),
    Case("probability", "How likely is rain tomorrow? Answer as JSON with a probability between 0 and 1.", {
        "type": "object",
        "properties": {"probability": {"type": "number", "minimum": 0, "maximum": 1}, "reason": _text(60)},
        "required": ["probability", "reason"],
    }),
    Case("negative-range", "Give the record low temperature of a city as JSON.", {
        "type": "object",
        "properties": {
            "city": _text(30),
            "low": {"type": "integer", "minimum": -90, "maximum": -1},
            "offset": {"type": "number", "exclusiveMinimum": -5, "exclusiveMaximum": 0},
        },
        "required": ["city", "low", "offset"],
    }),
    Case("flight-code", "Give a flight number and the gate as JSON.", {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
            "gate": {"type": "string", "pattern": "^[A-F][1-9]$"},
        },
        "required": ["code", "gate"],
    }),
    Case("event-date", "When and where is the next team meeting? Answer as JSON.", {
        "type": "object",
        "properties": {"date": {"type": "string", "format": "date"}, "room": _text(20)},
        "required": ["date", "room"],
    }),
    Case("record-uuid", "Create a database record for a new user as JSON.", {
        "type": "object",
        "properties": {"id": {"type": "string", "format": "uuid"}, "username": {"type": "string", "pattern": "^[a-z]{3,12}$"}},
        "required": ["id", "username"],
    }),
    Case("timestamps", "Log one event with its time as JSON.", {
        "type": "object",
        "properties": {
            "event": _text(30),
            "at": {"type": "string", "format": "date-time"},
            "local": {"type": "string", "format": "time"},
        },
        "required": ["event", "at", "local"],
    }),
    Case("any-of", "Tell me the answer to life, as JSON.", {
        "type": "object",
        "properties": {"answer": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 100}, _text(20)]}},
        "required": ["answer"],
    }),
    Case("one-of-shapes", "Describe a geometric shape as JSON.", {
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "integer", "minimum": 1, "maximum": 100}},
             "required": ["kind", "radius"]},
            {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 100}},
             "required": ["kind", "side"]},
        ],
    }),
    Case("defs-refs", "List two contacts with their phone as JSON.", {
        "$defs": {"contact": {"type": "object", "properties": {"name": _text(30), "phone": {"type": "string", "pattern": "^\\+?[0-9]{6,12}$"}},
                              "required": ["name", "phone"]}},
        "type": "object",
        "properties": {"first": {"$ref": "#/$defs/contact"}, "second": {"$ref": "#/$defs/contact"}},
        "required": ["first", "second"],
    }),
    Case("recursive-list", 'Write the list 3, 2, 1 as linked JSON like {"value": 3, "next": {"value": 2, "next": null}}.', {
        "$defs": {"node": {"type": "object",
                           "properties": {"value": {"type": "integer", "minimum": 0, "maximum": 9},
                                          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                           "required": ["value", "next"]}},
        "$ref": "#/$defs/node",
    }),
    Case("recursive-tree", 'Ann has two children, Bob and Cy, who have no children. Write this family as JSON like '
         '{"name": "Ann", "children": [{"name": "Bob"}]}.', {
             "$defs": {"person": {"type": "object",
                                  "properties": {"name": _text(20),
                                                 "children": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 3}},
                                  "required": ["name"]}},
             "$ref": "#/$defs/person",
         }),
    Case("expression-tree", 'Write 4 * 5 as a JSON expression tree, e.g. {"op": "+", "left": 1, "right": 2}.', {
        "$defs": {"expr": {"anyOf": [
            {"type": "integer", "minimum": 0, "maximum": 9},
            {"type": "object", "properties": {"op": {"enum": ["+", "-", "*"]}, "left": {"$ref": "#/$defs/expr"},
                                              "right": {"$ref": "#/$defs/expr"}},
             "required": ["op", "left", "right"]},
        ]}},
        "$ref": "#/$defs/expr",
    }),
    Case("point-tuple", "Give the coordinates of a point as a JSON array: x, y and a label.", {
        "type": "array",
        "prefixItems": [{"type": "integer", "minimum": -100, "maximum": 100},
                        {"type": "integer", "minimum": -100, "maximum": 100}, _text(20)],
        "items": False,
        "minItems": 3,
    }),
    Case("closed-object", "Describe a laptop as JSON: brand and price only.", {
        "type": "object",
        "properties": {"brand": _text(20), "price": {"type": "integer", "minimum": 100, "maximum": 9999}},
        "required": ["brand", "price"],
        "additionalProperties": False,
    }),
    Case("open-object", "Describe a car as JSON with its make and year.", {
        "type": "object",
        "properties": {"make": _text(20), "year": {"type": "integer", "minimum": 1900, "maximum": 2030}},
        "required": ["make", "year"],
        "additionalProperties": True,
    }),
    Case("scores-map", "Give the scores of three players as a JSON object mapping names to points.", {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 1000},
    }, max_tokens=120),
    Case("tags", "Suggest tags for a blog post about cooking pasta, as JSON.", {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 15}, "minItems": 2, "maxItems": 4}},
        "required": ["tags"],
    }),
    Case("short-strings", "Give a username and a one-word nickname as JSON.", {
        "type": "object",
        "properties": {"username": {"type": "string", "minLength": 3, "maxLength": 12}, "nickname": {"type": "string", "minLength": 1, "maxLength": 10}},
        "required": ["username", "nickname"],
    }),
    Case("nullable-type-list", "Describe a pet as JSON; the owner may be unknown.", {
        "type": "object",
        "properties": {"name": _text(20), "owner": {"type": ["string", "null"], "maxLength": 20}, "legs": {"type": "integer", "enum": [0, 2, 4]}},
        "required": ["name", "owner", "legs"],
    }),
    Case("all-of-merge", "Describe an employee as JSON.", {
        "allOf": [
            {"type": "object", "properties": {"name": _text(30)}, "required": ["name"]},
            {"properties": {"salary": {"type": "integer", "minimum": 1000, "maximum": 500000}}, "required": ["salary"]},
        ],
    }),
    Case("matrix", "Give a 2 by 2 matrix of small integers as JSON.", {
        "type": "array",
        "items": {"type": "array", "items": {"type": "integer", "minimum": -9, "maximum": 9}, "minItems": 2, "maxItems": 2},
        "minItems": 2,
        "maxItems": 2,
    }),
    Case("boolean-answer", "Is the sky blue? Answer as JSON with yes or no and a short explanation.", {
        "type": "object",
        "properties": {"yes": {"type": "boolean"}, "because": _text(80)},
        "required": ["yes", "because"],
    }),
    Case("plain-string", "What is the capital of France? Answer with a JSON string.", _text(30), max_tokens=40),
    Case("percent-exclusive", "What share of the day do people sleep? Answer as JSON with a percentage.", {
        "type": "object",
        "properties": {"percent": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100}},
        "required": ["percent"],
    }),
]
