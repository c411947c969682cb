"""Imported once, by the launcher's forkserver, before the first rendezvous.

Every worker torchrun starts is then forked from a process that has already paid for
``import torch`` (about 1 s), the lazy imports of the first ``torch.optim`` constructor
(torch._dynamo, sympy: about 1 s), this library, and the script's own imports the launcher
chose (``TORCHFLEET_WARM_MODULES``: torchvision took ~7 s on a GPU machine). docs/facts.md ("Rendezvous")
measured those 2 s of a 6 s recovery on an idle machine; under CPU load they grow several-fold, and on a
GPU machine's disk `import torch` alone took 5.4 s. Nothing here may touch CUDA: a CUDA context
does not survive a fork, and every worker forked after one would fail on its first CUDA call.
"""

import os
import sys
import warnings

from elastic_trainer.hooks import stacks_on_sigusr1

stacks_on_sigusr1()  # before the imports below, so a forkserver stuck in one shows where

# numpy is optional for this library; torch warns about its absence on first use.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed  # noqa: E402
import torch.nn.parallel  # noqa: E402
import torch.utils.data  # noqa: E402

# ENV_WARM_MODULES from the package, not the launcher (see its definition)
from elastic_trainer import ENV_WARM_MODULES, trainer  # noqa: E402
from elastic_trainer.store import checkpoint  # noqa: E402, F401

trainer.warm_imports()
torch.distributed.is_available()


def import_guarded(modules: list[str]) -> list[str]:
    """Import each module; a failure is reported and skipped (the worker imports it again and
    fails where the user looks). Returns the modules that imported."""
    imported = []
    for name in modules:
        try:
            __import__(name)
        except (Exception, SystemExit) as exc:  # the forkserver must survive whatever a module raises
            print(f"[torchfleet] forkserver preload: {name} not preloaded ({type(exc).__name__}: {exc})",
                  file=sys.stderr, flush=True)
            continue
        if torch.cuda.is_initialized():  # cannot be undone: say which import did it
            print(f"[torchfleet] forkserver preload: importing {name} initialised CUDA; forked workers cannot "
                  f"use CUDA. Remove it from TORCHFLEET_PRELOAD_MODULES or set TORCHFLEET_PRELOAD=0",
                  file=sys.stderr, flush=True)
        imported.append(name)
    return imported


import_guarded([name for name in os.environ.get(ENV_WARM_MODULES, "").split(",") if name])
