"""A GKE pod that mounts a dataset, plus the Cloud Storage FUSE sidecar the webhook injects into it, fits
the node, for every GCP GPU machine in the catalog and every GPU count a pod may take on it."""

from __future__ import annotations

import pytest

from components import catalog
from components.kube.datasets import SIDECAR_REQUESTS
from torchfleet.jobs.sizing import allocatable_cpu_millis, allocatable_memory_mib, beside_sidecar, size

SIDECAR_CPU, SIDECAR_MIB = SIDECAR_REQUESTS["gcp"]
# gcs-fuse-csi-driver cmd/webhook/main.go (2026-08-21): the sidecar's defaults without annotations
WEBHOOK_DEFAULT = (250, 256)

SHAPES = [
    (machine, gpus)
    for key in catalog.offered_on("gcp")
    for machine in catalog.offering(key, "gcp").machines
    for gpus in range(1, machine.gpus + 1)
    if machine.gpus % gpus == 0
]


@pytest.mark.parametrize(("machine", "gpus"), SHAPES, ids=[f"{m.type}-{g}gpu" for m, g in SHAPES])
def test_pods_and_their_sidecars_fit_the_allocatable(machine, gpus):
    pods = machine.gpus // gpus
    sized = beside_sidecar(size(machine, gpus), SIDECAR_CPU, SIDECAR_MIB)
    assert pods * (sized.cpu_millis + SIDECAR_CPU) <= allocatable_cpu_millis(machine)
    assert pods * (sized.memory_mib + SIDECAR_MIB) <= allocatable_memory_mib(machine)
    assert sized.cpu_millis > 0 and sized.memory_mib > sized.shm_mib
    assert sized.loader_workers >= 1


def test_the_bug_pinned_n1_standard_8_did_not_fit_with_the_webhooks_default_sidecar():
    """Review of issue 21: sized to its whole share, an n1-standard-8 pod plus the default 250m sidecar
    asked more CPU than the node leaves to pods, so it stayed Pending."""
    machine = next(m for m, _ in SHAPES if m.type == "n1-standard-8")
    whole = size(machine, machine.gpus)
    assert whole.cpu_millis + WEBHOOK_DEFAULT[0] > allocatable_cpu_millis(machine)
    fitted = beside_sidecar(whole, SIDECAR_CPU, SIDECAR_MIB)
    assert fitted.cpu_millis + SIDECAR_CPU <= allocatable_cpu_millis(machine)


def test_a_cpu_job_keeps_what_it_asked_for():
    from torchfleet.jobs.sizing import size_cpu

    asked = size_cpu(4000, 8192)
    assert beside_sidecar(asked, SIDECAR_CPU, SIDECAR_MIB) == asked
