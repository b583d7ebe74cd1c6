"""MCP (Model Context Protocol) servers: their configuration, their connections and their tools. No Qt."""
