"""static.py and k8s/base/: one object per file, and the kustomization lists exactly the layer's files."""

from __future__ import annotations

import pytest

from components.kube import ELASTICJOB_CRD, K8S_BASE, static

LAYER_FILES = sorted(
    str(p.relative_to(K8S_BASE)) for p in K8S_BASE.rglob("*.yaml") if p.name != "kustomization.yaml"
)


def test_kustomization_lists_every_layer_file_once():
    listed = static.kustomization_files()
    assert len(listed) == len(set(listed))
    assert sorted(listed) == LAYER_FILES


def test_namespace_comes_first():
    assert static.kustomization_files()[0] == "namespace.yaml"
    assert static.FIRST == ("namespace.yaml",)


@pytest.mark.parametrize("relative", LAYER_FILES)
def test_one_object_per_file(relative):
    obj = static.load(relative)
    assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]


def test_load_refuses_a_file_with_two_objects(tmp_path, monkeypatch):
    (tmp_path / "two.yaml").write_text("kind: A\n---\nkind: B\n")
    monkeypatch.setattr(static, "K8S_BASE", tmp_path)
    with pytest.raises(ValueError, match="exactly one object, found 2"):
        static.load("two.yaml")


def test_kubeflow_drops_the_torchelastic_crd_and_controller_only():
    torchelastic = static.files_for("torchelastic")
    kubeflow = static.files_for("kubeflow")
    dropped = set(torchelastic) - set(kubeflow)
    # The CRD, its controller, and what needs ElasticJobs served (their job-names binding, the gate's get).
    assert dropped and all(f.startswith(static.TORCHELASTIC_ONLY) for f in dropped)
    assert {f for f in dropped if not f.startswith(("crds/", "controller/"))} == set(static.TORCHELASTIC_ONLY[2:])
    assert "etcd/statefulset.yaml" in kubeflow and "storage/claim.yaml" in kubeflow


def test_the_crd_constant_names_the_applied_crd():
    assert str(ELASTICJOB_CRD.relative_to(K8S_BASE)) in static.files_for("torchelastic")
    crd = static.load("crds/elasticjob.yaml")
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == ("elastic.pytorch.org", "ElasticJob")
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    # No status subresource: the 0.1.0 controller writes status with a plain update.
    assert "subresources" not in version
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["required"]) == {"rdzvEndpoint", "replicaSpecs"}
    template = spec["properties"]["replicaSpecs"]["additionalProperties"]["properties"]["template"]
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["replicaStatuses"]["x-kubernetes-preserve-unknown-fields"] is True
