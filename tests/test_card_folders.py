"""Every card folder in ``kernels/`` follows one layout (``kernels/README.md``): ``problem.py``
defines ``CARD_ID`` (= the folder name) and ``PROBLEM`` and no arm; ``arms.py`` defines
``ARMS``, the very dict the problem uses, and no builder; every arm's builder resolves."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
CARD_FOLDERS = sorted(p.parent.name for p in KERNELS.glob("*/problem.py"))


def _defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _calls(path: Path, name: str) -> int:
    return sum(1 for n in ast.walk(ast.parse(path.read_text()))
               if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == name)


def test_there_are_three_card_folders():
    assert CARD_FOLDERS == ["flydsl_fp8_blockscale_gemm", "flydsl_mxfp8_8wave_gemm",
                            "flydsl_prefill_moe_stage2_fp8partial"]


@pytest.mark.parametrize("folder", CARD_FOLDERS)
def test_card_folder_layout(folder):
    problem = importlib.import_module(f"skill_kernels.{folder}.problem")
    arms = importlib.import_module(f"skill_kernels.{folder}.arms")
    assert problem.CARD_ID == folder == problem.PROBLEM.card_id
    assert not hasattr(problem, "NAME")  # one name for the card constant
    assert problem.PROBLEM.arms is arms.ARMS
    assert _calls(KERNELS / folder / "problem.py", "ArmSpec") == 0  # arms live in arms.py
    assert not [n for n in _defined_names(KERNELS / folder / "arms.py") if n.startswith("build")]  # specs only
    for name, spec in arms.ARMS.items():
        assert spec.name == name
        assert callable(problem.PROBLEM.resolve_builder(spec.build)), (folder, name, spec.build)
