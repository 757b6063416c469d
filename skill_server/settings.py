"""The application's settings: every ``SKILL_SERVER_*`` variable, one typed object.

:class:`Settings` extends the verifier's :class:`~verifiers.settings.VerifierSettings` with what
the server and the CLI read, so ``settings()`` is the whole deployment environment. No other
module of the application reads a ``SKILL_SERVER_*`` variable (tests/test_architecture.py checks);
command-line flags override these, and these override the built-in defaults.

==================================  =========================================================
variable                            setting
==================================  =========================================================
``SKILL_SERVER_SKILLS_DIR``         the card folder (default: the project's ``skills/``)
``SKILL_SERVER_LEDGER``             ledger file or ``postgresql://`` URL (default ``var/ledger.sqlite``)
``SKILL_SERVER_STATE_DIR``          ledger, signing key and other state
``SKILL_SERVER_CACHE``              caches (catalog, gfx950 compiles, decoded code objects)
``SKILL_SERVER_KEY``                the shared ledger's signing key file
``SKILL_SERVER_USER``               who records, when nobody says
``SKILL_SERVER_DRAFTS_DIR``         drafted cards (not served)
``SKILL_SERVER_PROFILES_DIR``       profiles a client may name (beside the working folder)
``SKILL_SERVER_PROFILE_MAX_BYTES``  the profile size limit (passed to ``trace_readers``)
``SKILL_SERVER_TOKEN``              the HTTP bearer token
``SKILL_SERVER_RAY_ADDRESS``        the Ray cluster of fleet re-verification
``SKILL_SERVER_HTTP_WORKER``        internal: a ``serve --workers N`` worker's spec
``SKILL_SERVER_SANDBOX`` ...        the verifier's own (``verifiers.settings``)
==================================  =========================================================
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from verifiers.settings import SettingsError, VerifierSettings, env_name

__all__ = ["Settings", "SettingsError", "env_name", "settings"]


class Settings(VerifierSettings):
    # the application's state: where it lives is the application's decision (skill_server.locations)
    state_dir: Path | None = Field(None, description="a folder for state (ledger, signing key)")
    ledger: str | None = Field(None, description="a ledger file or a postgresql:// URL")
    skills_dir: Path | None = Field(None, description="a folder of <card>/SKILL.md")
    key: Path | None = Field(None, description="a signing key file")
    user: str | None = Field(None, description="a name to record results under")
    drafts_dir: Path | None = Field(None, description="a folder for drafted cards")
    profiles_dir: Path | None = Field(None, description="a folder of profiles clients may name")
    token: str | None = Field(None, description="the HTTP bearer token")
    ray_address: str | None = Field(None, description="HOST:PORT of a Ray cluster")
    http_worker: str | None = Field(None, description="a worker spec (set by serve --workers, never by hand)")


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings as the environment holds them now (read on every call)."""
    return Settings.from_environ(environ)
