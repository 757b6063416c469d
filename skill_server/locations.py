"""Where the application's state lives (ledger, signing key, drafts): decided here only.

==========================================================  ===============================================
layout                                                      state folder
==========================================================  ===============================================
checkout (clone, ``pip install -e .``)                      ``<repo>/var`` (git-ignored)
installed wheel, its embedded cards                         ``$XDG_STATE_HOME/gpu-skill-server``
                                                            (``~/.local/state/...``)
a card folder of one's own (``--skills-dir DIR``)           ``DIR/../var``
every layout, when set                                      ``$SKILL_SERVER_STATE_DIR``
==========================================================  ===============================================

The code layout (checkout or wheel, where the shipped cards are) and the cache folder are facts
of the code and of the verifier's own files: :mod:`verifiers.locations`. The verifier never
computes this state folder; it keeps arm processes out of what :func:`secret_folders` names
because the application registers them (``skill_server.card_verifier`` through
``verifiers.arms.sandbox.protect``, before every verification).
"""
from __future__ import annotations

from pathlib import Path

from skill_server.settings import env_name, settings
from verifiers.locations import PROJECT_ROOT, is_embedded, user_folder

STATE_ENV = env_name("state_dir")


def state_dir(project_root: Path | str | None = None) -> Path:
    """Where the ledger (and other state) of ``project_root`` lives.

    ``$SKILL_SERVER_STATE_DIR`` when set; else, for the embedded project of an installed
    package, the user's state folder; else ``<project_root>/var`` (a checkout, or a card
    folder of one's own given with ``--skills-dir``).
    """
    chosen = settings().state_dir
    if chosen:
        return Path(chosen).expanduser().resolve()
    root = Path(project_root) if project_root is not None else PROJECT_ROOT
    if is_embedded(root):
        return user_folder("XDG_STATE_HOME", ".local/state")
    return root.resolve() / "var"


def secret_folders() -> list[Path]:
    """The folders of this application's secrets as the settings hold them now: the state
    folder, and the folders of a ledger file and a key file named by ``SKILL_SERVER_LEDGER`` /
    ``SKILL_SERVER_KEY``. (A ledger also registers its own folders when it opens.)"""
    s = settings()
    out = [state_dir()]
    for file in (s.ledger if s.ledger and "://" not in s.ledger else None, s.key):
        if file:
            out.append(Path(file).expanduser().resolve().parent)
    return out
