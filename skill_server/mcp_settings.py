"""What the operator decides when starting the MCP server (never the agent).

Tool modules read these flags at registration time. The rule for gated tools:
a module registers a tool that executes code only when ``allow_exec_tools`` is true,
and a tool that writes records only when ``allow_write_tools`` is true; otherwise the
tool is not registered at all (an agent cannot call, or be tempted by, what it cannot
see). The server's instructions and the workflow prompt say which groups are off and
the flag that turns each on, so an agent can tell its user what to ask for.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("skill-server", description="server name announced in initialize")
    allow_exec_tools: bool = Field(
        False, description="register tools that execute code (run_verifier, ...): `serve --enable-exec-tools`")
    allow_write_tools: bool = Field(
        False, description="register tools that write records (the results ledger): `serve --enable-write-tools`")
    ray_address: str | None = Field(
        None, description="the Ray cluster the reverify tool may run on (`serve --ray-address`, else "
        "$SKILL_SERVER_RAY_ADDRESS); set by the operator only: a client never names an address")
    profile_roots: tuple[Path, ...] | None = Field(
        None,
        description="folders match_profile may read `path` arguments from; None: any path the server user can "
        "read; (): no paths at all (inline content only)",
    )

    def disabled_groups(self) -> list[str]:
        """One line per gated tool group that is off, naming the flag that enables it."""
        off = []
        if not self.allow_exec_tools:
            off.append("tools that execute code (run_verifier) are off: the operator enables them with "
                       "`skill-server serve --enable-exec-tools`")
        if not self.allow_write_tools:
            off.append("tools that write records (results ledger) are off: the operator enables them with "
                       "`skill-server serve --enable-write-tools`")
        return off
