"""The flat library's module names still import for one release (issue 24; elastic_trainer/_moved.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from elastic_trainer import _moved

from tests.harness import REPO

IMAGE = REPO / "training-image"

# A fresh interpreter: the warning is given once, at the first import of an old name.
PROBE = """
import importlib, json, sys, warnings
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    aliased = importlib.import_module(old)
    exec(f"from elastic_trainer import {old.rpartition('.')[2]} as imported_from")
moved = importlib.import_module(new)
print(json.dumps({"same": aliased is moved and imported_from is moved, "spec": moved.__spec__.name,
                  "name": moved.__name__, "file": moved.__file__,
                  "warnings": [(w.category.__name__, str(w.message)) for w in caught]}))
"""


def _probe(old: str, new: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, old, new], capture_output=True, text=True, timeout=120,
                          cwd=IMAGE, env={"PYTHONPATH": str(IMAGE), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("old", ["checkpoint", "fence", "localrun", "rdzvconf"])
def test_an_old_name_imports_the_moved_module_and_warns(old):
    new = f"elastic_trainer.{_moved.MOVED[old]}"
    seen = _probe(f"elastic_trainer.{old}", new)
    assert seen["same"], "the old name must give the very module object, not a copy"
    assert seen["spec"] == seen["name"] == new  # its own spec, not the alias's (pickling and runpy read it)
    assert seen["warnings"] == [["DeprecationWarning", f"elastic_trainer.{old} moved to {new} (issue 24): import "
                                                       f"{new}; the old name goes in the next release"]]


def test_every_old_name_is_gone_and_every_new_one_is_there():
    """An old file left in place would shadow the alias; a wrong target would fail only at a user's import."""
    package = IMAGE / "elastic_trainer"
    for old, new in _moved.MOVED.items():
        assert not (package / f"{old}.py").exists(), old
        path = package / new.replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), new


def test_a_name_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        __import__("elastic_trainer.no_such_module")
