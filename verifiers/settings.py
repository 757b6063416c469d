"""The deployment's ``SKILL_SERVER_*`` environment, as typed models read in one place.

The environment is how settings reach every process of a verification (the judge, the
zygote, the arms start from an allow-listed copy of it), so it stays the carrier; what
reads it is this module. :class:`VerifierSettings` holds the variables the verifier's own
processes use; the application's :class:`skill_server.settings.Settings` extends it with the
server's and the CLI's, so the application sees the whole environment as one object and the
verifier never imports the server. ``trace_readers`` (the layer below both) reads no
environment: its one setting, the profile size limit, is declared here and passed in.

A value that does not parse is a one-line error naming the variable and what it expects;
an empty value counts as unset.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

PREFIX = "SKILL_SERVER_"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A ``SKILL_SERVER_*`` variable holds a value its setting cannot take (``variable``)."""

    def __init__(self, message: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


def env_name(field: str) -> str:
    return PREFIX + field.upper()


class EnvironmentSettings(BaseModel):
    """Fields map to ``SKILL_SERVER_<FIELD>``; :meth:`from_environ` reads them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        data = {name: env[env_name(name)] for name in cls.model_fields
                if env.get(env_name(name), "").strip()}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = env_name(str(err["loc"][0])) if err.get("loc") else PREFIX + "*"
            info = cls.model_fields.get(str(err["loc"][0])) if err.get("loc") else None
            want = f"; expected {info.description}" if info is not None and info.description else ""
            raise SettingsError(f"{name}={str(env.get(name, ''))[:60]!r}: {err['msg']}{want}", name) from None


def _switch(value: object) -> object:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"not one of {', '.join(TRUE_WORDS + FALSE_WORDS)}")
    return value


class VerifierSettings(EnvironmentSettings):
    """What the verifier's processes read from the environment."""

    sandbox: bool = Field(True, description="on/off: confine arm processes with Landlock (off: the operator's choice)")
    require_sandbox: bool = Field(False, description="1/0: refuse to run an arm unconfined")
    warm_judge: bool = Field(True, description="1/0: fork judges from a warm template (0: exec each judge fresh)")
    persist_bytecode: bool = Field(True, description="1/0: keep trusted bytecode in the cache folder across runs "
                                   "(only while arms run under Landlock; 0: in memory only)")
    arm_env: str = Field("", description="extra variable names an arm may see, comma-separated, PREFIX* for a prefix")
    ld_lld: Path | None = Field(None, description="the ld.lld that links gfx950 code objects")
    llvm_objdump: Path | None = Field(None, description="the llvm-objdump (LLVM 22) the gfx950 emulator decodes with")
    cache: Path | None = Field(None, description="a folder for caches (gfx950 compiles, decoded code objects)")
    emulator_lockstep: bool = Field(True, description="1/0: the gfx950 emulator runs waves in lockstep (0: one at a time)")
    emulator_batch_waves: int | None = Field(None, gt=0, description="a positive number of waves per lockstep batch")
    profile_max_bytes: int | None = Field(None, gt=0, description="a positive integer byte count")

    @field_validator("sandbox", "require_sandbox", "warm_judge", "persist_bytecode", "emulator_lockstep", mode="before")
    @classmethod
    def _switches(cls, value: object) -> object:
        return _switch(value)


def verifier_settings(environ: Mapping[str, str] | None = None) -> VerifierSettings:
    """The verifier's settings as the environment holds them now (read on every call: a
    caller may change the environment between verifications)."""
    return VerifierSettings.from_environ(environ)
