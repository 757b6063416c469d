"""Import name for the per-card reference kernels that live in ``<repo>/kernels/``.

The folder ``kernels/`` deliberately has no ``__init__.py``: people following the
cards put a FlyDSL source checkout on ``sys.path``, and that checkout ships its own
regular package called ``kernels``. A regular package always wins over a folder
without ``__init__``, so ours can never shadow theirs. Code imports the card
kernels as ``skill_kernels.<folder>.<module>`` instead.
"""
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
__path__ = [str(KERNELS_DIR)]
