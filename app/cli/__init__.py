"""The `tailor` command line: one module per command, `main.py` parses and dispatches."""
