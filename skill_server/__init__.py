"""Expert-skill knowledge server: cards, matching, ledger, MCP and CLI adapters."""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SKILLS_DIR = REPO_ROOT / "skills"
