"""``JudgeJob``: what the caller (``verifiers.launch.runner``) asks one judge process to do.

Typed at both ends: the runner builds it from already-validated parts (a parsed candidate,
``VerifyOptions``), sends its JSON in the envelope, and the judge validates it back into
the same model (``verifiers.judge.process``). Nothing on the way is a loose dict.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from verifiers.arms.candidate import CandidateSpec
from verifiers.options import VerifyOptions


class JudgeJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str = Field(description="problem folder name under KERNELS_DIR, or a problem file's absolute path")
    candidate: CandidateSpec = Field(description="parsed once by the caller; a file target is an absolute path")
    baseline: str | None = Field(None, description="an explicit baseline arm: overrides ``baselines``")
    baselines: dict[str, str] = Field(default_factory=dict,
                                      description="platform -> baseline arm: the card's verifier binding")
    shapes: list[str]
    options: VerifyOptions = Field(default_factory=VerifyOptions)
    sys_path: list[str] = Field(default_factory=list)
    cwd: str | None = None
    work_dir: str = Field(description="the caller's temporary folder for this run (removed by the caller)")
    secrets: list[str] = Field(default_factory=list, description="folders no arm may read (``sandbox.secret_paths``)")
