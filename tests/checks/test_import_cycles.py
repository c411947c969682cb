"""No import cycles in the repository's own packages (issue 24), and the training library's layers.

The graph is read from the source (``ast``), not by importing anything: every ``import`` and
``from ... import`` of a first-party module is an edge, at module level or inside a function (an
import moved into a function to dodge a cycle is still the cycle, met later). Only imports under
``if TYPE_CHECKING:`` are left out: they never run. Importing ``a.b.c`` runs ``a/__init__.py`` and
``a/b/__init__.py`` first, so those are edges too. A cycle fails the test with its modules in order.

The packages: ``torchfleet`` and ``components`` (the repository root on ``sys.path``),
``elastic_trainer`` (``training-image/`` on it, as in the image). tests/ and bench/ import these
and nothing imports them, so they cannot close a cycle through them; their own helpers
(tests/harness) are checked too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.harness import REPO

# (directory on sys.path, top-level package)
PACKAGES = ((REPO, "torchfleet"), (REPO, "components"), (REPO / "training-image", "elastic_trainer"), (REPO, "tests"))

# elastic_trainer's sub-packages, each importing only those listed (its __init__ docstring states
# the contract): the checkpoint store knows nothing of how workers are launched or trained, the
# launcher nothing of in-place recovery's internals, and nothing in the library imports the local
# runs that tests, benches and the demo use. The loop's modules at the top may import store/.
LAYERS = {
    "elastic_trainer.store": {"elastic_trainer.store", "elastic_trainer.events"},
    "elastic_trainer.launch": {"elastic_trainer.launch", "elastic_trainer.events", "elastic_trainer.store",
                               "elastic_trainer.trainer", "elastic_trainer.inplace",
                               "elastic_trainer.hooks"},  # a leaf: the hooks' names, warm.py's stacks_on_sigusr1
    "elastic_trainer.inplace": None,  # the loop's helpers and store/, never launch/ or local/ (checked below)
    "elastic_trainer.local": None,
}


def _modules(root: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts or "modules" in path.relative_to(root / package).parts[:2]:
            continue  # tests/controlplane/modules: vendored Go module sources, not ours
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """Every dotted name ``tree`` imports (``a.b`` and ``a.b.c`` for ``from a.b import c``), TYPE_CHECKING aside."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                anchor = parts if is_package else parts[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the first-party modules its import statements run (parent packages' __init__ included)."""
    modules: dict[str, Path] = {}
    for root, package in PACKAGES:
        modules.update(_modules(root, package))
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set()
        for target in _imported(tree, name, path.name == "__init__.py"):
            parts = target.split(".")
            for end in range(1, len(parts) + 1):  # a.b.c runs a, a.b, a.b.c
                prefix = ".".join(parts[:end])
                if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                    edges.add(prefix)  # a module's own parents are already running when it is imported
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (an iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path, iters = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_check_finds_a_cycle_and_reads_function_level_imports(tmp_path):
    """It can fail: an import inside a function closes a cycle as much as one at the top."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
                                  "def f():\n    from . import a\n")
    (package / "c.py").write_text("import pkg.b\n")
    graph = {}
    for name, path in _modules(tmp_path, "pkg").items():
        graph[name] = {t for t in _imported(ast.parse(path.read_text()), name, path.name == "__init__.py")
                       if t in ("pkg.a", "pkg.b", "pkg.c")}
    assert graph["pkg.b"] == {"pkg.a"}  # the TYPE_CHECKING import is left out
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None


def _layer(module: str) -> str | None:
    return next((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")), None)


@pytest.mark.parametrize("layer", [layer for layer, allowed in LAYERS.items() if allowed is not None])
def test_elastic_trainer_layers(layer):
    allowed = LAYERS[layer]
    graph = import_graph()
    wrong = sorted(f"{module} imports {target}" for module, targets in graph.items() if _layer(module) == layer
                   for target in targets if target.startswith("elastic_trainer.")
                   and not any(target == a or target.startswith(a + ".") for a in allowed))
    assert not wrong, f"{layer} may import only {sorted(allowed)}:\n" + "\n".join(wrong)


def test_nothing_in_the_library_imports_the_local_runs_and_inplace_not_the_launcher():
    graph = import_graph()
    wrong = sorted(
        f"{module} imports {target}" for module, targets in graph.items()
        if module.startswith("elastic_trainer.") and _layer(module) != "elastic_trainer.local"
        for target in targets
        if _layer(target) == "elastic_trainer.local"
        or (_layer(module) == "elastic_trainer.inplace" and _layer(target) == "elastic_trainer.launch"))
    assert not wrong, "\n".join(wrong)
