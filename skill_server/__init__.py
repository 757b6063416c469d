"""Expert-skill knowledge server: cards, matching, ledger, MCP and CLI adapters.

File locations (the embedded cards, the ledger's and caches' defaults) come from
:mod:`verifiers.locations`, the one place that tells a checkout from an installed wheel.
"""
from verifiers.locations import (
    INSTALLED,
    PROJECT_ROOT,
    SKILLS_DIR,
    cache_dir,
    embedded_write_problem,
    is_embedded,
    state_dir,
)

#: the folder holding the embedded ``skills/`` and ``kernels/`` (the repository root in a checkout)
REPO_ROOT = PROJECT_ROOT
DEFAULT_SKILLS_DIR = SKILLS_DIR

__all__ = ["DEFAULT_SKILLS_DIR", "INSTALLED", "PROJECT_ROOT", "REPO_ROOT", "cache_dir", "embedded_write_problem",
           "is_embedded", "state_dir"]
