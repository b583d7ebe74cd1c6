"""Tailor's own MCP servers, off until the user adds one: a clock (clock.py) and a reader of one folder
(files.py, confined by folder.py). They run like any other server, as stdio child processes: the running Tailor
started again as `tailor mcp builtin KIND` (launch.py says how)."""
