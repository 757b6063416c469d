"""The MCP adapter: assembles tools, resources and prompts over one ``SkillService``.

Each group lives in its own ``mcp_*`` module with ``register(server, service, settings)``;
this file only lists them (add yours to ``MCP_MODULES``) and makes argument errors
readable and bounded (no error text echoes a large input whole). Gated groups (code execution, record writing) register their tools only when
``settings`` allows them: see ``mcp_settings.ServerSettings``.

Nothing here imports torch, triton or flydsl; modules that need them import them
inside the tool function that runs them.
"""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import ValidationError

from skill_server.mcp.common import bounded, describe_validation_error
from skill_server.mcp.settings import ServerSettings
from skill_server.service.facade import SkillService

__all__ = ["MCP_MODULES", "ServerSettings", "SkillMCPServer", "build_server", "VERIFY_TOOL", "RECORD_TOOL"]

MCP_MODULES = (
    "skill_server.mcp.tools_catalog",
    "skill_server.mcp.tools_ledger",
    "skill_server.mcp.tools_verify",
    "skill_server.mcp.tools_doctor",
    "skill_server.mcp.resources",
    "skill_server.mcp.prompts",
)

MAX_URI_CHARS = 2048

# Tool names other groups provide; the workflow prompt refers to them by these names.
VERIFY_TOOL = "run_verifier"  # mcp_tools_verify (exec-gated)
RECORD_TOOL = "record_result"  # mcp_tools_ledger (write-gated)

INSTRUCTIONS = """\
Expert skills for GPU kernel hotspots, each with a validated recipe and an executable verifier.
When a profiler shows a hot kernel: match_skill (or match_profile for a whole profile file) ->
get_recipe -> implement the candidate -> verify -> record. The prompt `optimize_hotspot` walks
through it. Matching abstains when evidence is missing: supply what it asks for, never guess.
Parity gates everything: a fast wrong kernel scores 0."""


class SkillMCPServer(MCPServer):
    """``MCPServer`` whose argument errors name the field, what was expected and what came
    in, and which refuses unknown argument names instead of silently ignoring them
    (a misspelt optional argument would otherwise be dropped without a word)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._arg_names: dict[str, set[str]] = {}

    async def list_tools(self) -> Any:
        """As the SDK's, without the titles pydantic derives from argument names (``"Target
        Gen"``, ``"match_skillArguments"``): tools/list is context an agent pays for in every
        session, and the names say the same."""
        tools = await super().list_tools()
        for tool in tools:
            _drop_derived_titles(tool.input_schema)
        return tools

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().add_tool(fn, name, *args, **kwargs)  # a duplicate name keeps the first tool (SDK warns)
        ctx = find_context_parameter(fn)
        self._arg_names.setdefault(name or fn.__name__, {p for p in inspect.signature(fn).parameters if p != ctx})

    def remove_tool(self, name: str) -> None:
        super().remove_tool(name)
        self._arg_names.pop(name, None)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self._arg_names.get(name)
        if known is None:
            raise ToolError(bounded(f"unknown tool {name!r}; tools: {', '.join(sorted(self._arg_names))}"))
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolError(bounded(f"invalid arguments for {name}: unknown argument(s) {unknown}; "
                                    f"{name} takes {sorted(known)}"))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"invalid arguments for {name}: {describe_validation_error(exc.__cause__)}") from None
            raise ToolError(bounded(str(exc))) from None

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """As the SDK's, but a failure is a protocol error whose message and data stay short
        (the SDK would attach the whole URI as error data)."""
        text = str(uri)
        if len(text) > MAX_URI_CHARS:
            raise MCPError(code=INVALID_PARAMS, data={"uri": bounded(repr(text), 200)},
                           message=f"a resource URI of {len(text)} characters: no resource has a URI over "
                           f"{MAX_URI_CHARS}; see skill://index")
        try:
            return await super().read_resource(uri, context)
        except ResourceError as exc:
            code = INVALID_PARAMS if isinstance(exc, ResourceNotFoundError) else INTERNAL_ERROR
            raise MCPError(code=code, message=bounded(str(exc)), data={"uri": bounded(repr(text), 200)}) from exc

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        """As the SDK's, but an unknown prompt or bad arguments are an invalid-params error
        with a short message (the SDK's ValueError reaches the client as 'Internal error')."""
        known = sorted(p.name for p in await self.list_prompts())
        if name not in known:
            raise MCPError(code=INVALID_PARAMS, message=bounded(f"unknown prompt {name!r}; prompts: {', '.join(known)}"))
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            raise MCPError(code=INVALID_PARAMS, message=bounded(str(exc))) from None


def _drop_derived_titles(schema: Any) -> None:
    """Remove ``title`` keywords from a JSON schema in place; a property that is *named*
    title stays (only schema dicts are walked, never the keys of ``properties``)."""
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("title"), str):
        del schema["title"]
    for key in ("properties", "$defs"):
        for sub in (schema.get(key) or {}).values():
            _drop_derived_titles(sub)
    for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
        for sub in schema.get(key) or ():
            _drop_derived_titles(sub)
    for key in ("items", "additionalProperties", "not"):
        _drop_derived_titles(schema.get(key))


def build_server(service: SkillService, settings: ServerSettings | None = None) -> SkillMCPServer:
    settings = settings or ServerSettings()
    off = settings.disabled_groups()
    instructions = INSTRUCTIONS + ("\nOff on this server: " + "; ".join(off) if off else "")
    server = SkillMCPServer(settings.name, title="GPU kernel expert skills", instructions=instructions,
                            version=_version(), log_level="WARNING")
    for name in MCP_MODULES:
        importlib.import_module(name).register(server, service, settings)
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-skill-server")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"
