"""Packaging layout that pyproject.toml cannot express statically (everything else lives there).

The wheel embeds the repository's ``kernels/`` and ``skills/`` folders inside the
``skill_kernels`` package, with the same layout, so an installed copy finds them beside
its code (see verifiers/locations.py); in the repository they stay top-level folders and
``kernels/`` never becomes an importable top-level ``kernels`` package. They travel as
package data (globs), so a new card folder needs no change here.
"""
from setuptools import find_packages, setup

EMBEDDED = {"skill_kernels.kernels": "kernels", "skill_kernels.skills": "skills"}

setup(
    packages=find_packages(include=["skill_server", "skill_server.*", "verifiers", "verifiers.*", "trace_readers",
                                    "trace_readers.*"])
    + ["skill_kernels", *EMBEDDED],
    package_dir=EMBEDDED,
    package_data={
        "skill_server": ["data/*.yaml"],
        "skill_kernels.kernels": ["**/*.py", "**/*.md"],
        "skill_kernels.skills": ["**/*.md", "**/*.yaml", "**/*.yml"],
    },
    exclude_package_data={"": ["**/__pycache__/*"]},
)
