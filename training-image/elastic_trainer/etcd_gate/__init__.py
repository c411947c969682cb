"""A gate in front of etcd's v2 API: each training pod reaches only its own run's rendezvous, within bounds.

- ``rules``      what a request may do (paths, methods, TTLs, sizes): pure functions
- ``server``     the HTTP server that checks and forwards to etcd
- ``budget``     bytes written a second (per run, per gate) and bytes all runs hold, sized from etcd's memory
- ``sweep``      deletes the store's empty directories (they have no TTL), a run's own once its state is gone
- ``resolvers``  a connection's source address to the rendezvous id its pod may use
- ``__main__``   ``python -m elastic_trainer.etcd_gate --etcd HOST:PORT ...``
"""

from elastic_trainer.etcd_gate.rules import Limits, Refused, Request, check
from elastic_trainer.etcd_gate.server import Gate, Upstream, serve

__all__ = ["Gate", "Limits", "Refused", "Request", "Upstream", "check", "serve"]
