"""The service layer every adapter (MCP tools, CLI) calls."""
