"""What the operator decides when starting the MCP server (never the agent).

Tool modules read these flags at registration time. The rule for gated tools:
a module registers a tool that executes code only when ``allow_exec_tools`` is true,
and a tool that writes records only when ``allow_write_tools`` is true; otherwise the
tool is not registered at all (an agent cannot call, or be tempted by, what it cannot
see). The server's instructions and the workflow prompt say which groups are off and
the flag that turns each on, so an agent can tell its user what to ask for.

What a client may send (files it names, uploads, verifier options) is the
``ClientPolicy`` built from these settings; tools pass ``settings.client`` to the service.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from skill_server.policy.client_policy import DEFAULT_MAX_PROFILE_BYTES, DEFAULT_MAX_UPLOAD_BYTES, ClientPolicy, default_file_roots
from skill_server.policy.confinement import check_roots


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(cached_property,))

    name: str = Field("skill-server", description="server name announced in initialize")
    allow_exec_tools: bool = Field(
        False, description="register tools that execute code (run_verifier, ...): `serve --enable-exec-tools`")
    allow_write_tools: bool = Field(
        False, description="register tools that write records (the results ledger): `serve --enable-write-tools`")
    ray_address: str | None = Field(
        None, description="the Ray cluster the reverify tool may run on (`serve --ray-address`, else "
        "$SKILL_SERVER_RAY_ADDRESS); set by the operator only: a client never names an address")
    file_roots: tuple[Path, ...] = Field(
        default_factory=default_file_roots,
        description="folders whose files a client may name (profiles, candidates), symlinks resolved; "
        "(): none, inline content only. Default: the working folder and the profiles folder (`serve --root`)")
    max_upload_bytes: int = Field(DEFAULT_MAX_UPLOAD_BYTES, gt=0,
                                  description="largest inline profile a client may send, decoded (`--max-upload-bytes`)")
    max_profile_bytes: int = Field(DEFAULT_MAX_PROFILE_BYTES, gt=0,
                                   description="largest profile parsed for a client, after gunzip")

    verify_options: dict[str, Any] = Field(
        default_factory=dict, description="VerifyOptions for run_verifier chosen by the operator (`--verify-options`); "
        "clients may change only the effort knobs over them (client_policy.CLIENT_VERIFY_OPTIONS)")

    @field_validator("file_roots")
    @classmethod
    def _safe_roots(cls, roots: tuple[Path, ...]) -> tuple[Path, ...]:
        return check_roots(roots)  # ConfinementError is a ValueError: pydantic reports it

    @cached_property
    def client(self) -> ClientPolicy:
        return ClientPolicy(file_roots=self.file_roots, max_upload_bytes=self.max_upload_bytes,
                            max_profile_bytes=self.max_profile_bytes, verify_defaults=self.verify_options)

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
