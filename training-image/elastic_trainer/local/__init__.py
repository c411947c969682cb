"""Jobs on one machine, as local processes: what the tests, the benchmarks and the local demo run.

- ``localrun``    torchrun "nodes" (``python -m elastic_trainer.launcher`` in their own sessions,
                  exactly what a pod runs), the progress events they print on one clock, and the
                  scenarios of a spot interruption: kill and resume, join, SIGTERM
- ``etcd``        a throwaway etcd with the v2 API for them to meet at
- ``processes``   a free port, a launcher's workers and descendants (/proc), killing a whole tree
- ``inplacerun``  the in-place mode's: a real torchft Lighthouse and replica-group nodes
- ``rdzvnode``    torch's etcd-v2 rendezvous handler alone, in small forked processes (issue 15;
                  run as ``python -m elastic_trainer.local.rdzvnode``)
- ``rdzvfleet``   many such nodes and jobs on one machine, timed (``bench/rendezvous.py``)

What it guarantees: a node is the image's own entry point, never a stand-in, so what runs here is
what runs in a pod; every process tree it starts is killed when its job ends (``kill_tree``); no
torch import (the CLI's parent process and the benches only orchestrate). What callers use: the
names below. Nothing else in the library imports this package (tests/checks/test_import_cycles.py).
"""

from elastic_trainer.local.etcd import ENV_ETCD_BINARY, Etcd, etcd_binary, etcd_server
from elastic_trainer.local.inplacerun import InplaceJob, Lighthouse, lighthouse_binary
from elastic_trainer.local.localrun import (
    IMAGE_DIR,
    SYNTHETIC_EXAMPLE,
    Event,
    EventLog,
    LocalJob,
    Node,
    add_node_and_join,
    kill_and_resume,
    sigterm_and_checkpoint,
)
from elastic_trainer.local.processes import descendants, free_port, kill_tree, worker_pids

__all__ = [
    "ENV_ETCD_BINARY",
    "IMAGE_DIR",
    "SYNTHETIC_EXAMPLE",
    "Etcd",
    "Event",
    "EventLog",
    "InplaceJob",
    "Lighthouse",
    "LocalJob",
    "Node",
    "add_node_and_join",
    "descendants",
    "etcd_binary",
    "etcd_server",
    "free_port",
    "kill_and_resume",
    "kill_tree",
    "lighthouse_binary",
    "sigterm_and_checkpoint",
    "worker_pids",
]
