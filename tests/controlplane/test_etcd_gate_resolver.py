"""etcd-gate's resolver (elastic_trainer/etcd_gate/resolvers.py Pods) against the real API server.

The gate tells pods apart by source IP: the Running training pod holding that IP, and the rendezvous
id the CLI wrote on its Job (torchfleet/jobs/pod_template.py job_metadata, ANNOTATION_RDZV_ID). Here
the pods are the tier's (kwok gives them IPs from the pod CIDR); the lookups are the resolver's own
HTTP requests to kube-apiserver, as the gate makes them in a cluster (there with its service
account's token).
"""

from __future__ import annotations

from elastic_trainer.etcd_gate.resolvers import Pods

from tests.controlplane.cluster import ADMIN_TOKEN
from tests.controlplane.layer import get
from tests.controlplane.test_jobs import delete, running, submit
from torchfleet.jobs.pod_template import ANNOTATION_RDZV_ID


def resolver(layer) -> Pods:
    return Pods(layer.cp.server, layer.namespace, token=ADMIN_TOKEN, ca_file=str(layer.cp.workdir / "pki" / "ca.crt"),
                cache_s=0)  # fmt: skip


def test_a_training_pod_resolves_to_its_jobs_rendezvous_id(training_layer, capsys):
    name = submit(training_layer, capsys, "restart")
    try:
        pods = running(training_layer, name, 2)
        rdzv_id = get(training_layer.cp, "job", name, "-n", training_layer.namespace)["metadata"]["annotations"][
            ANNOTATION_RDZV_ID
        ]
        assert rdzv_id.startswith(f"{name}-")
        gate = resolver(training_layer)
        for pod in pods:
            assert gate(pod["status"]["podIP"]) == rdzv_id
        # An address no pod holds, and the platform's own pods (etcd: no training role), resolve to nothing.
        assert gate("127.0.0.254") is None
        etcd_ip = get(training_layer.cp, "pod", "etcd-0", "-n", training_layer.namespace)["status"]["podIP"]
        assert gate(etcd_ip) is None
    finally:
        delete(training_layer, capsys, name)
