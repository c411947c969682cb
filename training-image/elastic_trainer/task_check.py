"""A training script's Task checked by reading it, before any process starts (issue 32).

A Task whose ``loss_sum`` is spelt ``loss``, whose ``build_scheduler`` lacks ``total_steps``, or a script
whose import fails used to surface only inside the workers: torchrun restarted each one until the
run gave up, and the cause sat in a node log under torch's own lines. ``check_script`` finds these by
parsing the script (never running it), so ``torchfleet run --local``, ``submit``, ``sweep`` and the
launcher itself refuse it at once, each problem as ``FILE:LINE: what is wrong``.

What is a Task here: the class the script passes as ``train``'s first argument (or ``task=``) where
that can be read; otherwise a class that defines ``build_model``, or two of the Task's methods
(trainer.py's ``Task`` protocol), and that no other class of the script extends. A class's methods
include those of its bases defined in the script or imported by name from a module file beside it
(``from base import BaseTask``, base.py in the same folder: read, not imported); a base found nowhere
(a library's class, a package's, ``import base`` then ``base.BaseTask``) may provide the methods it lacks,
so then only the methods found are checked.
Imports are resolved (``importlib.util.find_spec`` of the top-level name, next to the script first,
as Python's ``sys.path[0]`` is) only where asked: the command line checks a script bound for a cluster's
image on a laptop without torch.

No torch import: the launcher and the slim command line use it.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

# name -> positional arguments the trainer passes (trainer.py, schedule.py, inplace/group.py call them so)
TASK_METHODS: dict[str, tuple[str, ...]] = {
    "build_model": (),
    "build_optimizer": ("model",),
    "build_scheduler": ("optimizer", "total_steps"),
    "loss_sum": ("model", "batch", "device"),
}
# a base named Task may be the user's own, imported: its methods are unknown here
_TRIVIAL_BASES = {"object", "Protocol", "Generic", "ABC"}


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def check_script(path: str | Path, *, resolve_imports: bool = True) -> list[Problem]:
    """Every problem found in the script's Task classes (and its imports), in line order."""
    path = Path(path)
    shown = str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [Problem(shown, 1, f"cannot be read: {exc}")]
    try:
        tree = ast.parse(source, filename=shown)
    except SyntaxError as exc:
        return [Problem(shown, exc.lineno or 1, f"SyntaxError: {exc.msg}")]
    problems: list[Problem] = []
    own = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    where: dict[int, str] = {}  # id of a method read from a module beside the script -> that file
    classes = {**_local_bases(tree, path.parent, where), **own}
    for node in _task_classes(tree, own, classes):
        methods = _methods(node, classes)
        for name, wanted in TASK_METHODS.items():
            if name in methods:
                problem = _signature_problem(node.name, methods[name], wanted)
                if problem:
                    problems.append(Problem(where.get(id(methods[name]), shown), methods[name].lineno, problem))
            elif _bases_all_known(node, classes):
                near = difflib.get_close_matches(name, [m for m in methods if m not in TASK_METHODS], n=1, cutoff=0.5)
                hint = f"; rename {near[0]} to {name}?" if near else ""
                call = f"{name}(self{''.join(', ' + a for a in wanted)})"
                at = methods[near[0]] if near else node
                problems.append(Problem(where.get(id(at), shown), at.lineno,
                                        f"Task {node.name} has no method {name} (the trainer calls {call}){hint}"))
    if resolve_imports:
        problems.extend(_import_problems(tree, shown, path.resolve().parent))
    # a base's wrong signature, reached through two of its subclasses, is one problem
    return sorted(dict.fromkeys(problems), key=lambda p: p.line)


def _local_bases(tree: ast.Module, folder: Path, where: dict[int, str]) -> dict[str, ast.ClassDef]:
    """Classes the script imports by name from a module file beside it (``from base import BaseTask`` with
    base.py in the script's folder, as ``sys.path[0]`` finds it), under the name the script uses, with that
    module's other classes for their own bases. Read, never imported; ``where`` gets each of their methods'
    file. A module elsewhere (a package, a subfolder, an installed library) is not read (issue 32: such a
    base's methods were unknown, so a misspelled method in it passed the check)."""
    found: dict[str, ast.ClassDef] = {}
    for node in _top_level_imports(tree.body):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module or "." in node.module:
            continue
        module = folder / f"{node.module}.py"
        try:
            body = ast.parse(module.read_text(encoding="utf-8"), filename=str(module)).body
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue  # not beside the script, or unreadable: its classes stay unknown (only found methods checked)
        defined = {item.name: item for item in body if isinstance(item, ast.ClassDef)}
        for cls in defined.values():
            for item in cls.body:
                where[id(item)] = str(module)
        found.update({name: cls for name, cls in defined.items() if name not in found})
        found.update({alias.asname or alias.name: defined[alias.name] for alias in node.names if alias.name in defined})
    return found


def _task_classes(tree: ast.Module, own: dict[str, ast.ClassDef], classes: dict[str, ast.ClassDef]
                  ) -> list[ast.ClassDef]:
    """The classes checked as whole Tasks: the ones the script hands to ``train`` where it can be read
    which; otherwise each class that looks like a Task (``build_model``, or two of the Task's methods,
    its bases' included) and that no other class of the script extends. A shared base holding
    ``build_optimizer`` and ``build_scheduler`` is part of a Task, not one: it was checked as one and
    refused for lacking ``build_model`` and ``loss_sum``, which its subclass defines (issue 32)."""
    passed = [own[name] for name in sorted(_classes_passed_to_train(tree)) if name in own]
    if passed:
        return passed
    extended = {base.id for node in own.values() for base in node.bases if isinstance(base, ast.Name)}
    found = []
    for node in own.values():  # the script's own classes: a module beside it is only read for their bases
        defined = set(_methods(node, classes)) & set(TASK_METHODS)
        if node.name not in extended and ("build_model" in defined or len(defined) >= 2):
            found.append(node)
    return found


def _classes_passed_to_train(tree: ast.Module) -> set[str]:
    """Classes constructed as ``train``'s first argument, directly or through a local name."""
    made: dict[str, str] = {}  # variable -> class it was assigned from
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    made[target.id] = node.value.func.id
    names: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
                and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "train"):
            task = [k.value for k in node.keywords if k.arg == "task"]
            if not node.args and not task:
                continue
            first = node.args[0] if node.args else task[0]
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Name):
                names.add(first.func.id)
            elif isinstance(first, ast.Name) and first.id in made:
                names.add(made[first.id])
    return names


def _methods(node: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset[str] = frozenset()
             ) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The class's methods, with those of its bases defined in the same script (its own win)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            found.update(_methods(classes[base.id], classes, seen | {node.name}))
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            found[item.name] = item
    return found


def _bases_all_known(node: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        if name in classes:
            if not _bases_all_known(classes[name], {k: v for k, v in classes.items() if k != name}):
                return False
        elif name not in _TRIVIAL_BASES:
            return False
    return True


def _signature_problem(cls: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, wanted: tuple[str, ...]) -> str | None:
    """Why the trainer's call ``fn(*wanted)`` would raise TypeError, or None."""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if not static:
        positional = positional[1:]  # self
    required = len(positional) - len(fn.args.defaults)
    kwonly_required = [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is None]
    given = len(wanted)
    if given < required or (given > len(positional) and fn.args.vararg is None) or kwonly_required:
        want = ", ".join(("self", *wanted) if not static else wanted)
        have = ast.unparse(fn.args)
        return f"{cls}.{fn.name}({have}): the trainer calls it as {fn.name}({want})"
    return None


def _import_problems(tree: ast.Module, shown: str, folder: Path) -> list[Problem]:
    """Top-level imports whose module cannot be found (``find_spec`` of the top-level package only:
    a dotted name's find_spec would import its parent, torch for ``torch.nn``)."""
    problems: list[Problem] = []
    for node in _top_level_imports(tree.body):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in names:
            top = name.partition(".")[0]
            if not top or top == "__future__":
                continue
            if not _findable(top, folder):
                problems.append(Problem(shown, node.lineno, f"import {name}: No module named {top!r} "
                                                            f"(not installed here, nor a file beside the script)"))
            elif top == _OWN and isinstance(node, ast.ImportFrom):
                missing = _missing_own_names(name, [a.name for a in node.names])
                if missing:
                    problems.append(Problem(shown, node.lineno, f"from {name} import {', '.join(missing)}: "
                                                                f"{name} has no such name"))
    return problems


_OWN = "elastic_trainer"


def _missing_own_names(module: str, names: list[str]) -> list[str]:
    """Names this library's ``module`` does not define at its top level (read, not imported: the
    trainer imports torch). An unknown module or a name that is itself a submodule is left to Python."""
    base = Path(__file__).resolve().parent.joinpath(*module.split(".")[1:])
    source_file = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    try:
        tree = ast.parse(source_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node in tree.body:
            defined.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                defined.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return [n for n in names if n != "*" and n not in defined and not (base / n).exists()
            and not (base / f"{n}.py").exists()]


def _top_level_imports(statements: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the script starts; those in ``try`` are left out (a fallback handles them)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in statements:
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):  # never run
            found.extend(_top_level_imports(node.body))
    return found


def _findable(top: str, folder: Path) -> bool:
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    if (folder / f"{top}.py").is_file() or (folder / top).is_dir():
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def format_problems(problems: list[Problem]) -> str:
    if len(problems) == 1:
        return str(problems[0])
    return f"{len(problems)} problems in the training script:\n  " + "\n  ".join(map(str, problems))
