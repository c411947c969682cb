"""Kubeflow's training-operator (PyTorchJob with elasticPolicy), for `training.operator: kubeflow`.

It publishes kustomize manifests only, so the program installs its standalone overlay from a
pinned git ref with pulumi-kubernetes' kustomize.v2.Directory (docs/facts.md, "Controllers and exit codes"). Jobs use
the layer's etcd with `rdzvBackend: etcd-v2`.
"""

from __future__ import annotations

import copy

TRAINING_OPERATOR_VERSION = "v1.9.4"
# The repository was renamed kubeflow/training-operator -> kubeflow/trainer; the v1.9.x tags (and
# manifests/overlays/standalone) live there. Kustomize's remote form: repo URL, `//`, the folder,
# `?ref=` a tag (kubernetes-sigs/kustomize examples/remoteBuild.md), which the v2 Directory hands
# to kustomize as is (pulumi/pulumi-kubernetes#3036, "Remote Targets").
TRAINING_OPERATOR_MANIFESTS = (
    "https://github.com/kubeflow/trainer.git//manifests/overlays/standalone"
    f"?ref={TRAINING_OPERATOR_VERSION}"
)
# The overlay installs into its own namespace, outside the training namespace's policies.
TRAINING_OPERATOR_NAMESPACE = "kubeflow"

DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment"


def on_manager_pool(pod_spec: dict, selector: dict[str, str]) -> dict:
    """A copy of the training-operator's pod spec placed as the platform's other controllers are: on the manager
    pool (its selector, where the cloud has one) and tolerating its taint (transforms.manager_tolerations). The
    overlay sets neither, so on a cloud stack, where every pool is tainted (issue 30: the manager pool is too), the
    operator would stay Pending."""
    from components.kube import transforms  # transforms imports manifests, not this module: no cycle

    pod = copy.deepcopy(pod_spec)
    if selector:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **selector}
    kept = [t for t in pod.get("tolerations") or [] if t not in transforms.manager_tolerations()]
    pod["tolerations"] = kept + transforms.manager_tolerations()
    return pod


def manager_placement(selector: dict[str, str]):
    """A Pulumi resource transform for the kustomize Directory's children: each Deployment (the overlay has one, the
    operator) goes to the manager pool. Transforms, not the older transformations: they reach the children a
    packaged component such as kustomize.v2.Directory registers in the provider
    (https://www.pulumi.com/docs/iac/concepts/options/transforms/)."""
    import pulumi

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != DEPLOYMENT_TYPE:
            return None
        props = dict(args.props)
        spec = copy.deepcopy(props.get("spec") or {})
        template = spec.setdefault("template", {})
        template["spec"] = on_manager_pool(template.get("spec") or {}, selector)
        props["spec"] = spec
        return pulumi.ResourceTransformResult(props, args.opts)

    return transform
