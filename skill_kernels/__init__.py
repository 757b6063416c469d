"""Import name for the per-card reference kernels (``skill_kernels.<card>.<module>``).

Their files live in ``kernels/`` of the project that ships with this code
(:data:`verifiers.locations.KERNELS_DIR`): the repository's ``kernels/`` in a checkout,
``skill_kernels/kernels/`` inside an installed wheel. That folder deliberately has no
``__init__.py`` and is never put on ``sys.path`` itself: people following the cards put a
FlyDSL source checkout on ``sys.path``, and that checkout ships its own regular package
called ``kernels``, which ours must never shadow.
"""
from verifiers.locations import KERNELS_DIR

__path__ = [str(KERNELS_DIR)]
