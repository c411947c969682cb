"""Jobs on one machine, as local processes: what the tests, the benchmarks and the local demo run.

- ``localrun``    an etcd server and torchrun "nodes" (``python -m elastic_trainer.launcher`` in their
                  own sessions, exactly what a pod runs), the progress events they print on one
                  clock, and the scenarios of a spot interruption: kill and resume, join, SIGTERM
- ``inplacerun``  the in-place mode's: a real torchft Lighthouse and replica-group nodes
- ``rdzvnode``    torch's etcd-v2 rendezvous handler alone, in small forked processes (issue 15;
                  run as ``python -m elastic_trainer.local.rdzvnode``)
- ``rdzvfleet``   many such nodes and jobs on one machine, timed (``bench/rendezvous.py``)

What it guarantees: a node is the image's own entry point, never a stand-in, so what runs here is
what runs in a pod; every process tree it starts is killed when its job ends (``kill_tree``); no
torch import (the CLI's parent process and the benches only orchestrate). What callers use: the
names below. Nothing else in the library imports this package (tests/checks/test_import_cycles.py).
"""

from elastic_trainer.local.inplacerun import InplaceJob, Lighthouse, lighthouse_binary
from elastic_trainer.local.localrun import (
    IMAGE_DIR,
    SYNTHETIC_EXAMPLE,
    Etcd,
    Event,
    EventLog,
    LocalJob,
    Node,
    etcd_binary,
    free_port,
    kill_tree,
)

__all__ = [
    "IMAGE_DIR",
    "SYNTHETIC_EXAMPLE",
    "Etcd",
    "Event",
    "EventLog",
    "InplaceJob",
    "Lighthouse",
    "LocalJob",
    "Node",
    "etcd_binary",
    "free_port",
    "kill_tree",
    "lighthouse_binary",
]
