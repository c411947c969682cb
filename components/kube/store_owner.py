"""The one-shot Job that hands the shared store's root to the training user (pure manifest dicts).

A new EFS file system, Filestore share, Azure Files NFS share or hostPath directory has a root
owned by root with mode 0755, and training pods run as spec.TRAINING_UID (the training image's
USER): they could read the store but not write a checkpoint to it. Unless the store enforces the
owner itself (SharedStore.owner_enforced, e.g. an EFS access point with a POSIX user), the layer
runs this Job: `chown 10001:10001` and `chmod 2775` of the root only (setgid, so files created
below keep the group), not recursive, so re-running it is harmless and cheap.

chown needs root, which the training namespace's `restricted` Pod Security level refuses, so the
Job lives in its own namespace at the `baseline` level, which allows root and the default
capabilities (CHOWN, FOWNER, FSETID among them) but not privileged pods or hostPath volumes:
https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline
It reaches the store through its own PersistentVolume with the training volume's source and
mount options (a PersistentVolume binds one claim, and a pod mounts claims of its own namespace
only). The stores export to root without squashing it (Filestore NO_ROOT_SQUASH, Azure Files
NoRootSquash; hostPath is the node's own disk), or chown would be refused.
"""

from __future__ import annotations

from typing import Any

from components.kube import manifests, transforms
from components.spec import TRAINING_UID

NAMESPACE = "torchfleet-system"
# busybox's chown/chmod/ls and nothing else; an exact release tag (checkov_skips.yaml CKV_K8S_43).
IMAGE = "busybox:1.37.0"
MOUNT_PATH = "/store"
# rwxrwsr-x: setgid so new files and folders get the training group. Each job's pods mount only their folder
# <root>/<job> (torchfleet/jobs/pod_template.py shared_mount), which the kubelet makes when it is missing with
# this mode, setgid included, as root here (k8s.io/kubernetes v1.35.4 pkg/volume/util/subpath/subpath_linux.go
# doSafeMakeDir: mkdirat, then fchmod to the root's mode); the setgid root gives it group 10001, so the
# job's pods write it. Nothing else needs to make the folders first.
MODE = "2775"
NAME_PREFIX = "store-owner-"
APP = {"app.kubernetes.io/name": "store-owner", **manifests.PART_OF}
# Root's capabilities trimmed to what the two commands need: CHOWN to give the root away, FOWNER to
# chmod a directory root no longer owns, FSETID to keep setgid on a directory whose group root is
# not in (chmod(2): "the S_ISGID bit will be turned off" otherwise). All three are in the
# baseline level's allowed list.
CAPABILITIES = ("CHOWN", "FOWNER", "FSETID")
# Root inside a namespace that allows it: say why, next to the checks that would flag it
# (checkov reads `checkov.io/skip<n>: <check>=<reason>` annotations on the object).
CHECKOV_SKIPS = {
    "CKV_K8S_23": "chown of the store root to the training uid needs root; runs in a baseline namespace",
    "CKV_K8S_40": "runs as uid 0 for chown; the training pods that use the store run as uid 10001",
    "CKV_K8S_25": "adds only CHOWN FOWNER FSETID after dropping ALL; chown and chmod of the root need them",
    "CKV_K8S_37": "adds only CHOWN FOWNER FSETID after dropping ALL; chown and chmod of the root need them",
}


def claim_name(namespace: str, claim: str) -> str:
    """The Job's claim in NAMESPACE: named after the training claim, so two installs differ."""
    return manifests.shared_volume_name(namespace, claim)


def job_name(namespace: str, claim: str) -> str:
    name = NAME_PREFIX + claim_name(namespace, claim)
    # The Job controller labels its pods job-name=<name>, and label values stop at 63 characters.
    if len(name) > 63:
        raise ValueError(f"store owner Job name {name!r} is longer than 63 characters; shorten the namespace")
    return name


def namespace() -> dict[str, Any]:
    return manifests.platform_namespace(NAMESPACE, "baseline")


def deny_all_policy() -> dict[str, Any]:
    """The Job talks to nothing: the node mounts the store, outside pod networking."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": NAMESPACE, "labels": dict(manifests.PART_OF)},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def persistent_volume(
    namespace: str,
    claim: str,
    volume_source: dict[str, Any],
    capacity: str,
    mount_options: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    """The store again, bound only to the Job's claim (same builder as the training volume)."""
    return manifests.persistent_volume(NAMESPACE, claim_name(namespace, claim), volume_source, capacity, mount_options)


def persistent_volume_claim(namespace: str, claim: str, capacity: str) -> dict[str, Any]:
    name = claim_name(namespace, claim)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(manifests.PART_OF)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": manifests.shared_volume_name(NAMESPACE, name),
            "resources": {"requests": {"storage": capacity}},
        },
    }


def script(uid: int = TRAINING_UID) -> str:
    return f"set -eu; chown {uid}:{uid} {MOUNT_PATH}; chmod {MODE} {MOUNT_PATH}; ls -ldn {MOUNT_PATH}"


def _container() -> dict[str, Any]:
    return {
        "name": "chown",
        "image": IMAGE,
        "imagePullPolicy": "Always",
        "command": ["sh", "-c", script()],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "32Mi"},
        },
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": list(CAPABILITIES)},
        },
        "volumeMounts": [{"name": "store", "mountPath": MOUNT_PATH}],
    }


def job(namespace: str, claim: str, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """chown/chmod the store's root once. Pulumi waits for the Job to complete (pulumi-kubernetes
    Job await: condition Complete), so what depends on it starts after the store is writable."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsUser": 0, "runAsGroup": 0, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container()],
        "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": claim_name(namespace, claim)}}],
    }
    if node_selector:
        # The manager pool: never next to a training pod that mounts the same store through the
        # other PersistentVolume, and never on a spot GPU node that may vanish mid-run.
        pod["nodeSelector"] = dict(node_selector)
    pod["tolerations"] = transforms.manager_tolerations()  # the pool's taint (issue 30)
    annotations = {f"checkov.io/skip{i}": f"{check}={why}" for i, (check, why) in enumerate(CHECKOV_SKIPS.items(), 1)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(namespace, claim),
            "namespace": NAMESPACE,
            "labels": dict(APP),
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 3,
            # A store that cannot be mounted fails the Job (and `pulumi up`) instead of hanging.
            "activeDeadlineSeconds": 300,
            # No ttlSecondsAfterFinished: the finished Job stays (with its one Completed pod). A TTL
            # deleted it after a day, so every `pulumi refresh` dropped it and the next `pulumi up`
            # created it again, a diff on every day-2 run (GCP review m6).
            "template": {"metadata": {"labels": dict(APP)}, "spec": pod},
        },
    }
