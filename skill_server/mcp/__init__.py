"""The MCP adapter: tools, resources and prompts over the service (stdio and streamable HTTP)."""
