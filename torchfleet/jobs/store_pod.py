"""The pod spec of a short-lived pod that only reads the shared store: `checkpoints`/`cp`'s reader
(reader_pod.py) and `tensorboard` (tensorboard.py).

Both run at the training namespace's restricted level as the job pods do (k8s/base/namespace.yaml), as
the training image's user whose group can read the store, with the job's own folder of the claim mounted
read-only (never the whole store: the researcher limits refuse that), a scratch
emptyDir for Python's files, no service-account token, a hard lifetime, and on the CPU pool: never on a GPU
node, and never on the manager pool beside etcd (the reader reads hostile files; TensorBoard runs the job's image).
"""

from __future__ import annotations

from typing import Any

from components import spec as platform
from torchfleet.jobs import pod_template
from torchfleet.jobs.target import Target

# k8s/base/jobs/serviceaccount-reader.yaml: no cloud identity. training-job has the datasets' one (on AWS
# the S3 credentials of their Pod Identity association), which a pod that only reads the store never needs.
SERVICE_ACCOUNT = "job-reader"
SCRATCH_VOLUME = "scratch"


def container_fields(mount: str, job: str, scratch: str) -> dict[str, Any]:
    """A store-reading container's securityContext and mounts: read-only root, only JOB's folder of the store,
    read-only, at `mount`/JOB where the job's pods have it (pod_template.shared_mount), the scratch volume at
    `scratch` (its HOME and TMPDIR)."""
    return {
        "securityContext": {**pod_template.container_security(), "readOnlyRootFilesystem": True},
        "volumeMounts": [
            pod_template.shared_mount(mount, job, read_only=True),
            {"name": SCRATCH_VOLUME, "mountPath": scratch},
        ],
    }


def spec(target: Target, container: dict[str, Any], *, lifetime_s: int, scratch_limit: str,
         local: bool) -> dict[str, Any]:
    """The pod spec around `container`, whose mounts are container_fields'."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "activeDeadlineSeconds": lifetime_s,
        "securityContext": {"runAsNonRoot": True, "runAsUser": platform.TRAINING_UID,
                            "runAsGroup": platform.TRAINING_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [
            {"name": pod_template.SHARED_VOLUME,
             "persistentVolumeClaim": {"claimName": target.claim, "readOnly": True}},
            {"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": scratch_limit}},
        ],
    }
    if not local:  # the CPU pool: never beside etcd (pod_template.cpu_pool says why); the local node has no pools
        pod_spec.update(pod_template.cpu_pool(target))
    return pod_spec
