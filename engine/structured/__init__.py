"""Structured output: JSON Schema turned into a llama.cpp GBNF grammar (see json_schema_grammar)."""
