"""Expert-skill knowledge server: cards, matching, ledger, MCP and CLI adapters.

File locations: the code layout (the embedded cards, checkout or wheel) and the cache folder
come from :mod:`verifiers.locations`; where the application's state lives (ledger, signing
key, drafts) from :mod:`skill_server.locations`.
"""
from skill_server.locations import state_dir
from verifiers.locations import (
    INSTALLED,
    PROJECT_ROOT,
    SKILLS_DIR,
    cache_dir,
    embedded_write_problem,
    is_embedded,
)

#: the folder holding the embedded ``skills/`` and ``kernels/`` (the repository root in a checkout)
REPO_ROOT = PROJECT_ROOT
DEFAULT_SKILLS_DIR = SKILLS_DIR

__all__ = ["DEFAULT_SKILLS_DIR", "INSTALLED", "PROJECT_ROOT", "REPO_ROOT", "cache_dir", "embedded_write_problem",
           "is_embedded", "state_dir"]
