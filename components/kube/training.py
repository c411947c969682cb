"""TrainingLayer: the cloud-agnostic Kubernetes layer every cloud (and `local`) gets.

Applies the static k8s/ objects (parametrized by transforms.py), the shared store's
PersistentVolume and NFS policy (manifests.py), and Kubeflow's training-operator when the
stack asks for it (kubeflow.py). The cloud hands over a provider, its store and the manager
pool's nodeSelector (clouds/base.py ClusterHandle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import ClusterHandle, SharedStore
from components.kube import (
    compute_quota,
    kubeflow,
    manifests,
    node_healer,
    researchers,
    static,
    store_owner,
    transforms,
)
from components.spec import PlatformSpec


@dataclass
class TrainingLayerArgs:
    spec: PlatformSpec
    cluster: ClusterHandle


def layer_settings(spec: PlatformSpec, cluster: ClusterHandle) -> transforms.LayerSettings:
    training = spec.training
    return transforms.LayerSettings(
        namespace=training.namespace,
        claim_name=training.claim_name,
        store_capacity=cluster.store.capacity,
        etcd_replicas=training.etcd_replicas,
        manager_selector=dict(cluster.manager_selector),
        # Clouds whose zones are real have zone labels on nodes; `local` has none.
        zoned=spec.traits.zone_pattern is not None,
        storage_class=cluster.storage_class,
    )


# A shared claim keeps the request it was created with: the API server refuses to grow a claim bound to a
# volume of storageClassName "" ("only dynamically provisioned pvc can be resized and the storageclass that
# provisions the pvc must support resize": tests/controlplane/test_claim_resize.py), and pulumi-kubernetes
# would send a bigger storage.sizeGb as an in-place update of the request, failing the `up` there. The
# volume's capacity follows the store (mutable); Kubernetes enforces neither on NFS.
CLAIM_KEEPS_ITS_REQUEST = ("spec.resources",)
# The PriorityClass the node healer's pods use (k8s/base/cluster/priorityclass-control.yaml).
PRIORITY_CONTROL = "cluster/priorityclass-control.yaml"


def static_transformations(
    settings: transforms.LayerSettings, depends_on: Sequence[pulumi.Input[pulumi.Resource]]
) -> list[Callable[[dict[str, Any], pulumi.ResourceOptions], None]]:
    """ConfigFile transformations: parametrize each object, and make it wait for `depends_on`.

    ConfigFile hands its children only `parent` (pulumi_kubernetes yaml._get_child_options),
    so a depends_on given to the ConfigFile would not hold them back; this sets it per child.
    """

    def parametrize(obj: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        transforms.apply(obj, settings)
        if depends_on:
            opts.depends_on = list(depends_on)
        if obj["kind"] == "PersistentVolumeClaim" and obj["metadata"]["name"] == settings.claim_name:
            opts.ignore_changes = list(CLAIM_KEEPS_ITS_REQUEST)

    return [parametrize]


def child_options(
    parent: pulumi.Resource, depends_on: Sequence[pulumi.Input[pulumi.Resource]]
) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on))


def object_of(config_file: k8s.yaml.ConfigFile) -> pulumi.Output[pulumi.Resource]:
    """The one object a k8s/base/ file registers, as something to depend on.

    Not the ConfigFile itself: a component in depends_on stands for the children it has when the
    dependent registers, and a ConfigFile makes its children only once the provider has decoded
    its YAML, so a dependent could register before them and wait for nothing.
    """
    return config_file.resources.apply(lambda objects: next(iter(objects.values())))


def check_store(settings: transforms.LayerSettings, store: SharedStore) -> None:
    """Raise ValueError if the cloud's store cannot make a valid PersistentVolume.

    Only the shape is checked (one volume type, mount options it accepts), so a source whose
    values are still Outputs (a file system id) is checked too; an Output source is not.
    """
    if isinstance(store.volume_source, dict):
        manifests.persistent_volume(
            settings.namespace, settings.claim_name, store.volume_source, store.capacity, store.mount_options
        )


def config_file_name(relative: str) -> str:
    """k8s/base/etcd/statefulset.yaml -> etcd-statefulset; ../kubeflow/x.yaml -> kubeflow-x."""
    return "-".join(p for p in PurePosixPath(relative).with_suffix("").parts if p != "..")


class TrainingLayer(pulumi.ComponentResource):
    def __init__(self, name: str, args: TrainingLayerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:kube:TrainingLayer", name, None, opts)
        self._name = name
        spec, cluster = args.spec, args.cluster
        training = spec.training
        settings = layer_settings(spec, cluster)
        # Children do not inherit the layer's depends_on (the cluster's node groups, CSI
        # add-ons); each waits for them itself.
        ready = list(cluster.ready)
        check_store(settings, cluster.store)  # a wrong store fails here, before any resource exists

        first = [object_of(self._create_static(f, settings, ready)) for f in static.FIRST]
        self.namespace_ready = first  # what else in the namespace waits for (kube/dataset_volumes.py)
        volume = self._create_shared_volume(settings, cluster.store, ready)
        # Training pods reach the store only through the claim: it waits for the store's owner Job
        # (when there is one), so no job can mount the store before the training user owns it.
        store_ready = [volume, *self._create_store_owner(settings, cluster.store, ready)]
        rest = [f for f in static.files_for(training.operator) if f not in static.FIRST]
        created: dict[str, k8s.yaml.ConfigFile] = {}
        for relative in rest:
            # The claim binds to the volume by name, so it waits for it; the rest need the namespace.
            needs = [*store_ready] if relative.startswith(static.STORAGE) else []
            needs += [object_of(created[f]) for f in static.AFTER.get(relative, ())]  # listed before it
            created[relative] = self._create_static(relative, settings, [*ready, *first, *needs])
        if cluster.store.nfs_cidrs:
            self._create_nfs_policy(settings, cluster.store, [*ready, *first])
        if training.operator == "kubeflow":
            operator = self._create_kubeflow(ready, settings.manager_selector)
            # After its CRDs: the PyTorchJob job-names binding refuses what it matches until they are served.
            for relative in static.kubeflow_files():
                self._create_static(relative, settings, [*ready, *first, operator])
        self._create_researchers(spec, [*ready, *first])
        if training.quota.enabled:
            # Container defaults and the namespace's compute ceiling (compute_quota.py).
            for obj in compute_quota.objects(
                training.namespace, training.quota, spec.guardrails.max_gpus, training.operator
            ):
                self._create_object(obj["metadata"]["name"], obj, [*ready, *first])
        if training.node_healer.enabled:
            # Its pods name the torchfleet-control PriorityClass: admission refuses them before it exists.
            priority = [object_of(created[f]) for f in (PRIORITY_CONTROL,) if f in created]
            self._create_node_healer(spec, settings, [*ready, *first, *priority])

        self.outputs: dict[str, pulumi.Input] = {
            "namespace": training.namespace,
            "sharedClaim": training.claim_name,
            "etcdEndpoint": manifests.etcd_endpoint(training.namespace),
            "operator": training.operator,
        }
        self.register_outputs(self.outputs)

    def _create_static(
        self, relative: str, settings: transforms.LayerSettings, depends_on: Sequence[pulumi.Input[pulumi.Resource]]
    ) -> k8s.yaml.ConfigFile:
        return k8s.yaml.ConfigFile(
            config_file_name(relative),
            file=str(static.path(relative)),
            transformations=static_transformations(settings, depends_on),
            resource_prefix=self._name,
            opts=child_options(self, depends_on),
        )

    def _create_shared_volume(
        self, settings: transforms.LayerSettings, store: SharedStore, depends_on: Sequence[pulumi.Resource]
    ) -> k8s.core.v1.PersistentVolume:
        def build(source: dict[str, Any]) -> dict[str, Any]:
            return manifests.persistent_volume(
                settings.namespace, settings.claim_name, source, store.capacity, store.mount_options
            )

        pv = pulumi.Output.from_input(store.volume_source).apply(build)
        return k8s.core.v1.PersistentVolume(
            f"{self._name}-shared-volume",
            metadata=pv.apply(lambda m: m["metadata"]),
            spec=pv.apply(lambda m: m["spec"]),
            opts=child_options(self, depends_on),
        )

    def _create_store_owner(
        self, settings: transforms.LayerSettings, store: SharedStore, depends_on: Sequence[pulumi.Resource]
    ) -> list[k8s.batch.v1.Job]:
        """The Job that makes the store's root the training user's (store_owner.py), unless the
        store enforces its owner itself; returns what the training claim must wait for."""
        if store.owner_enforced:
            return []
        ns, claim = settings.namespace, settings.claim_name
        namespace = self._create_object("store-owner-namespace", store_owner.namespace(), depends_on)
        in_namespace = [*depends_on, namespace]
        deny_all = self._create_object("store-owner-deny-all", store_owner.deny_all_policy(), in_namespace)
        source = store.volume_source if store.owner_volume_source is None else store.owner_volume_source
        pv = pulumi.Output.from_input(source).apply(
            lambda source: store_owner.persistent_volume(ns, claim, source, store.capacity, store.mount_options)
        )
        volume = k8s.core.v1.PersistentVolume(
            f"{self._name}-store-owner-volume",
            metadata=pv.apply(lambda m: m["metadata"]),
            spec=pv.apply(lambda m: m["spec"]),
            opts=child_options(self, depends_on),
        )
        pvc = self._create_object(
            "store-owner-claim",
            store_owner.persistent_volume_claim(ns, claim, store.capacity),
            [*in_namespace, volume],
            ignore_changes=CLAIM_KEEPS_ITS_REQUEST,
        )
        job = self._create_object(
            "store-owner-job", store_owner.job(ns, claim, settings.manager_selector), [*in_namespace, deny_all, pvc]
        )
        return [job]

    def _create_object(
        self,
        suffix: str,
        manifest: dict[str, Any],
        depends_on: Sequence[pulumi.Resource],
        ignore_changes: Sequence[str] = (),
    ) -> pulumi.CustomResource:
        """A typed resource for a manifest dict of a kind below (its apiVersion and kind are implied)."""
        kinds = {
            "Namespace": k8s.core.v1.Namespace,
            "NetworkPolicy": k8s.networking.v1.NetworkPolicy,
            "PersistentVolumeClaim": k8s.core.v1.PersistentVolumeClaim,
            "Job": k8s.batch.v1.Job,
            "ServiceAccount": k8s.core.v1.ServiceAccount,
            "Deployment": k8s.apps.v1.Deployment,
            "LimitRange": k8s.core.v1.LimitRange,
            "ResourceQuota": k8s.core.v1.ResourceQuota,
        }
        body = {"spec": manifest["spec"]} if "spec" in manifest else {}  # a ServiceAccount has none
        return kinds[manifest["kind"]](
            f"{self._name}-{suffix}",
            metadata=manifest["metadata"],
            **body,
            opts=pulumi.ResourceOptions.merge(
                child_options(self, depends_on), pulumi.ResourceOptions(ignore_changes=list(ignore_changes) or None)
            ),
        )

    def _create_nfs_policy(
        self, settings: transforms.LayerSettings, store: SharedStore, depends_on: Sequence[pulumi.Resource]
    ) -> k8s.networking.v1.NetworkPolicy:
        policy = pulumi.Output.all(*store.nfs_cidrs).apply(
            lambda cidrs: manifests.nfs_egress_policy(settings.namespace, list(cidrs))
        )
        return k8s.networking.v1.NetworkPolicy(
            f"{self._name}-training-to-store",
            metadata=policy.apply(lambda m: m["metadata"]),
            spec=policy.apply(lambda m: m["spec"]),
            opts=child_options(self, depends_on),
        )

    def _create_node_healer(
        self, spec: PlatformSpec, settings: transforms.LayerSettings, depends_on: Sequence[pulumi.Resource]
    ) -> k8s.apps.v1.Deployment:
        """The loop that taints silent GPU nodes out of service (node_healer.py), in a namespace of its own."""
        healer = spec.training.node_healer
        built = node_healer.objects(healer.image, healer.not_ready_seconds, settings.manager_selector)
        ns, sa, role, binding, policy, deployment = built
        namespace = self._create_object("node-healer-namespace", ns, depends_on)
        inside = [*depends_on, namespace]
        account = self._create_object("node-healer-service-account", sa, inside)
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{self._name}-node-healer-role",
            metadata=role["metadata"],
            rules=role["rules"],
            opts=child_options(self, depends_on),
        )
        bound = k8s.rbac.v1.ClusterRoleBinding(
            f"{self._name}-node-healer-binding",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=child_options(self, [*inside, account, cluster_role]),
        )
        egress = self._create_object("node-healer-to-apiserver", policy, inside)
        return self._create_object("node-healer", deployment, [*inside, account, bound, egress])

    def _create_researchers(
        self, spec: PlatformSpec, depends_on: Sequence[pulumi.Resource]
    ) -> k8s.rbac.v1.RoleBinding | None:
        """torchfleet:researchers named one by one (GKE, AKS): the namespace's torchfleet-researcher Role."""
        binding = researchers.role_binding(spec.training.namespace, spec.cloud, spec.access.researchers)
        if binding is None:
            return None
        return k8s.rbac.v1.RoleBinding(
            f"{self._name}-researchers",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=child_options(self, depends_on),
        )

    def _create_kubeflow(
        self, depends_on: Sequence[pulumi.Resource], manager_selector: dict[str, str]
    ) -> k8s.kustomize.v2.Directory:
        return k8s.kustomize.v2.Directory(
            f"{self._name}-kubeflow-training-operator",
            directory=kubeflow.TRAINING_OPERATOR_MANIFESTS,
            opts=pulumi.ResourceOptions.merge(
                child_options(self, depends_on),
                pulumi.ResourceOptions(transforms=[kubeflow.manager_placement(manager_selector)]),
            ),
        )
