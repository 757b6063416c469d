"""What a client (an agent over MCP, possibly a stranger on the network) may ask of the
server, as opposed to the operator at the command line.

The MCP adapters pass a ``ClientPolicy`` into the service calls that take paths or
options; the CLI passes none (the operator's own files and flags). The policy:
- files a client names are opened only inside ``file_roots`` (``confinement``);
- inline uploads (a profile's text, or its bytes as base64, gzip allowed) are capped;
- the profile a client makes the server parse is capped after decompression;
- of the verifier's options a client may set only the effort knobs in
  ``CLIENT_VERIFY_OPTIONS``: never an interpreter, an executable, an output path, a
  trace file to read, or a rule that loosens parity, signatures or physical bounds,
  whatever ``VerifyOptions`` grows.
Names, segment lists and shape dimensions are capped by the ``hotspot`` models themselves.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skill_server import REPO_ROOT
from skill_server.matching.hotspot import MAX_NAME_CHARS
from skill_server.policy.confinement import CANDIDATE_FILE, ConfinementError, check_roots, resolve_confined
from skill_server.settings import settings
from verifiers.arms.candidate import parse_candidate

DEFAULT_MAX_UPLOAD_BYTES = 4 << 20
DEFAULT_MAX_PROFILE_BYTES = 256 << 20
PROFILES_DIR_ENV = "SKILL_SERVER_PROFILES_DIR"

# Effort and precision knobs only; everything else in VerifyOptions is the operator's.
CLIENT_VERIFY_OPTIONS = frozenset({
    "rounds", "aa_rounds", "block_ms", "min_calls_per_block", "max_calls_per_block", "warmup_ms",
    "warmup_calls", "bootstrap_samples", "timing", "cpu_threads", "seeds", "profile_calls", "profiler_loads_during_timing",
    "device", "time_limit_s",
})


class ClientInputError(ValueError):
    """A client request over the policy's limits; the message says which and what to do."""


def default_file_roots(project_root: Path | None = None) -> tuple[Path, ...]:
    """The project workspace (the server's working folder) and the profiles folder
    (``$SKILL_SERVER_PROFILES_DIR``, else ``<project>/var/profiles``). A working folder
    that is ``/`` or a system folder is left out rather than opening everything."""

    profiles = Path(settings().profiles_dir or (project_root or REPO_ROOT) / "var" / "profiles")
    roots: list[Path] = []
    for candidate in (Path.cwd(), profiles):
        try:
            roots += check_roots([candidate])
        except ConfinementError:
            continue
    return tuple(dict.fromkeys(roots))


class ClientPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file_roots: tuple[Path, ...] = Field(default_factory=default_file_roots,
                                         description="folders client-named files may be read from; (): none")
    max_upload_bytes: int = Field(DEFAULT_MAX_UPLOAD_BYTES, gt=0, description="inline profile, decoded bytes")
    max_profile_bytes: int = Field(DEFAULT_MAX_PROFILE_BYTES, gt=0, description="profile size after gunzip")
    verify_defaults: dict[str, Any] = Field(default_factory=dict,
                                            description="the operator's VerifyOptions for client runs (any field)")

    def upload(self, content: str | None, content_base64: str | None) -> str | bytes | None:
        """The inline profile: text as given, or the decoded base64 bytes (gzip'd or not)."""
        if content is not None and content_base64 is not None:
            raise ClientInputError("give content (text) or content_base64 (bytes), not both")
        cap = self.max_upload_bytes
        if content is not None:
            size = len(content) if len(content) > cap else len(content.encode("utf-8", "surrogatepass"))
            if size > cap:
                raise ClientInputError(f"content is {size} bytes, over this server's {cap}-byte upload limit: "
                                       "gzip it and send content_base64, or trim the profile")
            return content
        if content_base64 is None:
            return None
        if len(content_base64) > (cap + 2) // 3 * 4 + 8:
            raise ClientInputError(f"content_base64 is {len(content_base64)} characters, over this server's "
                                   f"{cap}-byte upload limit once decoded: gzip the file or trim the profile")
        try:
            return base64.b64decode(content_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ClientInputError("content_base64 is not valid base64 (RFC 4648 alphabet, = padding, "
                                   "no line breaks)") from None

    def candidate(self, spec: str) -> str:
        """``FILE.py:FUNC`` with FILE confined and resolved, or ``arm:NAME`` as given;
        ``package.module:FUNC`` is refused (it would import any module on the server)."""

        if not isinstance(spec, str) or len(spec) > MAX_NAME_CHARS:
            raise ClientInputError(f"candidate: expected FILE.py:FUNC or arm:NAME of at most {MAX_NAME_CHARS} characters")
        parsed = parse_candidate(spec)  # ValueError says what the syntax is
        if parsed.kind == "arm":
            return spec
        if parsed.kind == "module":
            raise ClientInputError(f"candidate {spec[:200]!r}: a client names the candidate by its file "
                                   "(FILE.py:FUNC under the server's roots) or an arm (arm:NAME), not by module")
        real = resolve_confined(parsed.target, self.file_roots, CANDIDATE_FILE)
        if not real.is_file():
            raise ConfinementError(f"candidate file {parsed.target[:200]!r} does not exist (or is not a regular file)")
        return f"{real}:{parsed.function}"

    def verify_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """The operator's verifier options with the client's effort knobs over them; the
        client's are refused whole if any is not an effort knob."""
        if options is None:
            return dict(self.verify_defaults)
        if not isinstance(options, Mapping):
            raise ClientInputError("options: expected an object of VerifyOptions fields")
        refused = sorted(str(k)[:60] for k in options if k not in CLIENT_VERIFY_OPTIONS)
        if refused:
            raise ClientInputError(f"options {refused} cannot be set by a client (the operator's, or not "
                                   f"options at all); a client may set: {', '.join(sorted(CLIENT_VERIFY_OPTIONS))}")
        return {**self.verify_defaults, **options}


def roots_text(roots: tuple[Path, ...]) -> str:
    return ", ".join(str(r) for r in roots) or "none (inline content only)"
