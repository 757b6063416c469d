"""The layout's rules, checked on the source (docs/architecture.md states them):

- the layers import downwards only: trace_readers <- verifiers <- skill_server;
- no import cycle among the project's modules, counting imports placed inside functions;
- an import inside a function says why on its line (``# lazy: ...``): only to keep torch,
  triton, flydsl or another heavy library off a start-up path, never to dodge a cycle;
- only the settings modules read ``SKILL_SERVER_*`` variables;
- no card id in server or verifier code (adding a card needs no server change).
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("trace_readers", "verifiers", "skill_server")  # each may import only those before it
SETTINGS_READERS = {"verifiers/settings.py", "skill_server/settings.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in LAYERS:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, project module imported, inside a function) for every import in ``path``."""
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only, never executed
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [f"{child.module}.{a.name}" for a in child.names]
            else:
                names = []
            for name in names:
                target = _resolve(name)
                if target is not None:
                    found.append((child.lineno, target, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in MODULES.items():
        for _, target, _ in _imports(path):
            if target != mod and not mod.startswith(target + "."):  # a package's own __init__ is not an edge back
                graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_layers_import_downwards_only():
    wrong = []
    for mod, path in MODULES.items():
        layer = LAYERS.index(mod.split(".")[0])
        for line, target, _ in _imports(path):
            if LAYERS.index(target.split(".")[0]) > layer:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles_counting_imports_inside_functions():
    assert not cycles(_graph()), "\n".join(" <-> ".join(c) for c in cycles(_graph()))


def test_every_import_inside_a_function_says_why():
    unexplained = []
    for mod, path in MODULES.items():
        lines = path.read_text().splitlines()
        for line, target, inside in _imports(path):
            text = lines[line - 1]
            if inside and "# lazy:" not in text and "# lazy:" not in lines[line - 2]:
                unexplained.append(f"{path.relative_to(ROOT)}:{line} {text.strip()}")
    assert not unexplained, f"{len(unexplained)} imports inside functions without '# lazy: why':\n" + "\n".join(
        unexplained[:40])


def _reads_skill_server_env(tree: ast.AST) -> list[int]:
    constants = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
                 and isinstance(n.value.value, str)}

    def named(arg: ast.AST) -> bool:
        value = arg.value if isinstance(arg, ast.Constant) else constants.get(getattr(arg, "id", ""))
        return isinstance(value, str) and value.startswith("SKILL_SERVER_")

    hits = []
    for n in ast.walk(tree):
        src = ast.unparse(n) if isinstance(n, (ast.Call, ast.Subscript)) else ""
        if isinstance(n, ast.Call) and ("environ.get" in src.split("(")[0] or src.startswith("os.getenv")):
            if n.args and named(n.args[0]):
                hits.append(n.lineno)
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and src.startswith("os.environ["):
            if named(n.slice):
                hits.append(n.lineno)
    return hits


def test_only_the_settings_modules_read_skill_server_variables():
    readers = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        if rel not in SETTINGS_READERS:
            readers += [f"{rel}:{line}" for line in _reads_skill_server_env(ast.parse(path.read_text()))]
    assert not readers, "read SKILL_SERVER_* through skill_server.settings / verifiers.settings:\n" + "\n".join(readers)


def test_the_env_reader_check_sees_a_direct_read():
    tree = ast.parse('import os\nX_ENV = "SKILL_SERVER_X"\na = os.environ.get(X_ENV)\nb = os.environ["SKILL_SERVER_Y"]\n')
    assert _reads_skill_server_env(tree) == [3, 4]


def test_no_card_id_in_server_or_verifier_code():
    cards = [p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md")]
    assert cards
    named = []
    for path in MODULES.values():
        text = path.read_text()
        named += [f"{path.relative_to(ROOT)}: {c}" for c in cards if c in text]
    assert not named, "\n".join(named)
