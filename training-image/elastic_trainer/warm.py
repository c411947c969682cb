"""Imported once, by the launcher's forkserver, before the first rendezvous.

Every worker torchrun starts is then forked from a process that has already paid for
``import torch`` (about 1 s), the lazy imports of the first ``torch.optim`` constructor
(torch._dynamo, sympy: about 1 s) and this library. DESIGN.md measured those 2 s of a 6 s
recovery on an idle machine; under CPU load they grow several-fold. Nothing here may touch
CUDA: a CUDA context does not survive a fork.
"""

import warnings

# numpy is optional for this library; torch warns about its absence on first use.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed  # noqa: E402
import torch.nn.parallel  # noqa: E402
import torch.utils.data  # noqa: E402

from elastic_trainer import checkpoint, trainer  # noqa: E402, F401

trainer.warm_imports()
torch.distributed.is_available()
