"""Launching a node of a restart-mode job: torchrun's agent, its rendezvous, its workers' exits.

The image's entry point is ``python -m elastic_trainer.launcher`` (that name is the public one: the
Dockerfile, every manifest ``torchfleet submit`` renders and the examples run it); this package is
what it is made of, as torch's own torch/distributed/elastic/ is behind torchrun:

- ``plan``          the container's args and environment -> torchrun's args, the workers' environment
                    and the forkserver's preload; Torchfleet's defaults, refused settings (no torch)
- ``rdzvconf``      the rendezvous settings by the job's maximum node count, and their checks (no torch)
- ``agent``         torchrun's agent run in this process: exit codes the controllers act on, the
                    patches for a bad-input exit and quiet worker exits (no torch at import)
- ``lost_peer``     a node lost before its peers formed a group restarts them (and a dropped node rejoins)
- ``rdzv_store_ttl`` the etcd-v2 store's keys written with a TTL
- ``warm``          the forkserver's preload: torch and the trainer imported while the agent waits
- ``worker_exits``  what a worker says when started without a launcher, or when a peer was lost

What it guarantees: a node either trains, or ends with an exit code that says what to do with it
(0 done, 2 bad input: never retried, 75 retry later, 128 + signal stopped, 1 failed), never a silent
hang at start; no setting known to split or stall a job reaches torchrun. What callers use:
``build_plan``/``LaunchPlan``/``LaunchError`` (``TORCHFLEET_DRY_RUN``, the tests) and the rendezvous
settings the local runs and the CLI share (``TUNED_RDZV_CONF``, ``rdzv_conf_for_nodes``,
``format_rdzv_conf``). Importing this package imports no torch (the launcher's argument handling and
the CLI use it); it never imports the local runs (local/) nor in-place internals but the node it
hands over to (inplace/replica_node.py): tests/checks/test_import_cycles.py holds it to that.
"""

from elastic_trainer.launch.plan import LaunchPlan, build_plan
from elastic_trainer.launch.rdzvconf import (
    TUNED_RDZV_CONF,
    LaunchError,
    check_rdzv_conf,
    format_rdzv_conf,
    rdzv_conf_for_nodes,
)

__all__ = [
    "TUNED_RDZV_CONF",
    "LaunchError",
    "LaunchPlan",
    "build_plan",
    "check_rdzv_conf",
    "format_rdzv_conf",
    "rdzv_conf_for_nodes",
]
