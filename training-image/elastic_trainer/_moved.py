"""The module names of the flat library before issue 24, kept for one release.

``import elastic_trainer.checkpoint`` (or ``from elastic_trainer import checkpoint``) in a user's
script still works: a finder on ``sys.meta_path`` (installed by ``elastic_trainer/__init__.py``)
answers every old name below with the module it now is (the same object, not a copy, so its
classes and monkeypatching are shared) and a DeprecationWarning naming the new import. Nothing in
this repository imports an old name (tests/training_image/test_moved_modules.py checks that the
aliases work; tests/checks/test_import_cycles.py reads only real modules). ``python -m`` with an
old name is not answered: every module run that way kept its name (``elastic_trainer.launcher``)
or was only run by this library itself. ``elastic_trainer.inplace`` is a package now: its public names
(``recovery_mode``, the ``ENV_*`` variables) are still there, its internals moved to its modules.
Drop this module in the release after the one that moved them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

# old name (under elastic_trainer.) -> new name (under elastic_trainer.)
MOVED = {
    "async_writer": "store.async_writer",
    "checkpoint": "store.checkpoint",
    "checkpoint_meta": "store.checkpoint_meta",
    "checkpoint_verify": "store.checkpoint_verify",
    "checkpoint_write": "store.checkpoint_write",
    "fence": "store.fence",
    "inplace_addresses": "inplace.addresses",
    "inplacerun": "local.inplacerun",
    "localrun": "local",  # its names are the package's now (local/__init__.py)
    "lost_peer": "launch.lost_peer",
    "rdzv_store_ttl": "launch.rdzv_store_ttl",
    "rdzvconf": "launch.rdzvconf",
    "rdzvfleet": "local.rdzvfleet",
    "rdzvnode": "local.rdzvnode",
    "replica_node": "inplace.replica_node",
    "sharded": "store.sharded",
    "staging": "store.staging",
    "stall_guard": "inplace.stall_guard",
    "warm": "launch.warm",
    "worker_exits": "launch.worker_exits",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader of the old names: each loads as the module it moved to."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec] = {}  # new name -> its own spec

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        package, _, old = fullname.rpartition(".")
        if package != __package__ or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = f"{__package__}.{MOVED[spec.name.rpartition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new} (issue 24): import {new}; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # importlib set the alias's spec on the shared module object: it gets its own back
        module.__spec__ = self._specs[module.__name__]


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
