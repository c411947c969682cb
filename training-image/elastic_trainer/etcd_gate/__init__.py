"""A gate in front of etcd's v2 API: each training pod reaches only its own run's rendezvous, within bounds.

- ``rules``      what a request may do (paths, methods, TTLs, sizes): pure functions
- ``server``     the HTTP server that checks and forwards to etcd
- ``resolvers``  a connection's source address to the rendezvous id its pod may use
- ``__main__``   ``python -m elastic_trainer.etcd_gate --etcd HOST:PORT ...``
"""

from elastic_trainer.etcd_gate.rules import Limits, Refused, Request, check
from elastic_trainer.etcd_gate.server import Gate, Upstream, serve

__all__ = ["Gate", "Limits", "Refused", "Request", "Upstream", "check", "serve"]
