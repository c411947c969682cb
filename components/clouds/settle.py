"""VolumesReleased: on `pulumi destroy`, keep a CSI driver until the volumes it must delete are gone.

Deleting etcd's StatefulSet deletes its claims (persistentVolumeClaimRetentionPolicy), and a claim's
volume (reclaimPolicy Delete) is then detached and deleted by the CSI driver's controller, after
Pulumi has moved on: Pulumi owns neither the volumes nor the claims. On EKS that controller is an
add-on Pulumi deletes next; deleted within seconds, it leaves the volumes behind, billing (AWS review
m5). Placed between the driver and what uses its volumes (the users depend on this resource, this
resource on the driver), its delete runs after theirs and before the driver's, and returns once the
cluster lists no PersistentVolume of that driver: the state the driver's controller reaches when it
has deleted them, read from the API server rather than guessed with a sleep.

A Pulumi dynamic resource (the provider runs inside the program): create and update do nothing; delete
waits, at most `timeout_s`, then fails naming the volumes left, so a destroy never leaves them silently.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

# Detaching and deleting an EBS volume takes well under a minute once its pod is gone (EC2
# DetachVolume, then DeleteVolume); ten minutes covers a slow detach of every member's volume.
RELEASE_TIMEOUT_S = 600
POLL_S = 2.0


class VolumesLeft(RuntimeError):
    """The driver's volumes were still listed when the wait ended."""


def volumes_of(api, driver: str) -> list[str]:
    """Names of the PersistentVolumes the CSI driver `driver` provisions or mounts."""
    return sorted(
        pv.metadata.name
        for pv in api.list_persistent_volume().items
        if pv.spec.csi is not None and pv.spec.csi.driver == driver
    )


def wait_for_release(api, driver: str, timeout_s: float, poll_s: float = POLL_S) -> None:
    """Return once no PersistentVolume of `driver` is listed; VolumesLeft after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            left = volumes_of(api, driver)
            error = ""
        except Exception as exc:  # an API server that does not answer is retried, then named
            left, error = ["(unknown: the cluster's API did not answer)"], f" ({type(exc).__name__}: {exc})"
        if not left:
            return
        if time.monotonic() >= deadline:
            raise VolumesLeft(
                f"{driver}: PersistentVolumes still there after {timeout_s:g} s: {', '.join(left)}{error}. "
                "Their cloud disks may outlive the cluster: delete them in the cloud console (or let the "
                "driver finish and run `pulumi destroy` again)."
            )
        time.sleep(poll_s)


def core_api(kubeconfig: str):
    """A CoreV1Api from a kubeconfig's text (exec plugins such as `aws eks get-token` included)."""
    import yaml
    from kubernetes import client, config

    api_client = config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
    return client.CoreV1Api(api_client)


class _ReleaseProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"release-{props['driver']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("driver", "timeout_s", "kubeconfig")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys), replaces=[])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)  # delete reads its settings from the state's outputs

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        wait_for_release(core_api(props["kubeconfig"]), props["driver"], float(props["timeout_s"]))


class VolumesReleased(Resource):
    def __init__(
        self,
        name: str,
        driver: str,
        kubeconfig: pulumi.Input[str],
        after: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
        timeout_s: int = RELEASE_TIMEOUT_S,
    ):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=after, additional_secret_outputs=["kubeconfig"])
        )
        props = {"driver": driver, "timeout_s": timeout_s, "kubeconfig": pulumi.Output.secret(kubeconfig)}
        super().__init__(_ReleaseProvider(), name, props, opts)
