"""Azure datasets under mocks: the managed Blob CSI driver, the training identity federated with the
training service account only, Storage Blob Data Reader on each container, and the read-only PV/PVC
mounted with the pod's workload identity token."""

from __future__ import annotations

import pytest

from components.clouds.azure.datasets import DRIVER, FEDERATION_AUDIENCE, STORAGE_BLOB_DATA_READER
from tests.harness import synth_config, synth_stack
from torchfleet.preview.mock_azure import SUBSCRIPTION_ID, _guid

CONFIG = {
    "azure-native:location": "eastus",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["1"],
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
    "torchfleet:datasets": [
        {"name": "imagenet", "bucket": "corpdata/imagenet", "prefix": "train", "resourceGroup": "data-rg"},
    ],
    # Required on Azure (issue 29).
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],
}
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
ROLE = "azure-native:authorization:RoleAssignment"


@pytest.fixture(scope="module")
def azure_datasets():
    return synth_config("azure-data", CONFIG)


def test_the_blob_driver_is_on_only_with_datasets(azure_datasets):
    profile = azure_datasets.one("azure-native:containerservice:ManagedCluster").inputs["storageProfile"]
    assert profile["blobCSIDriver"] == {"enabled": True}
    plain = synth_stack("azure-eus").one("azure-native:containerservice:ManagedCluster").inputs["storageProfile"]
    assert "blobCSIDriver" not in plain


def test_the_identity_is_federated_with_the_training_service_account_only(azure_datasets):
    federation = azure_datasets.one("azure-native:managedidentity:FederatedIdentityCredential")
    assert federation.inputs["subject"] == "system:serviceaccount:elastic-job:training-job"
    assert federation.inputs["audiences"] == [FEDERATION_AUDIENCE]
    assert federation.inputs["issuer"].startswith("https://eastus.oic.prod-aks.azure.com/")
    assert federation.inputs["resourceName"] == "torchfleet-azure-datasets-training-identity"


def test_the_identity_reads_the_container_and_nothing_else(azure_datasets):
    identity = azure_datasets.one(IDENTITY, "torchfleet-azure-datasets-training-identity")
    grants = [r for r in azure_datasets.of_type(ROLE) if r.name.startswith("torchfleet-azure-datasets-")]
    assert len(grants) == 1
    grant = grants[0].inputs
    assert grant["roleDefinitionId"].endswith(f"/roleDefinitions/{STORAGE_BLOB_DATA_READER}")
    assert grant["scope"] == (f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/data-rg/providers/Microsoft.Storage/"
                              "storageAccounts/corpdata/blobServices/default/containers/imagenet")
    assert grant["principalType"] == "ServicePrincipal"
    assert grants[0].options["deleteBeforeReplace"] is True
    # No other role assignment names the training identity.
    others = [r for r in azure_datasets.of_type(ROLE) if r is not grants[0]]
    assert all(r.inputs.get("principalId") != grant["principalId"] for r in others)
    assert identity is not None


def test_a_read_only_volume_mounted_with_the_pods_token(azure_datasets):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in azure_datasets.kubernetes_objects()}
    pv = objects[("PersistentVolume", "elastic-job-dataset-imagenet")]
    csi = pv["spec"]["csi"]
    assert csi["driver"] == DRIVER and csi["readOnly"] is True
    assert "#" not in csi["volumeHandle"] and "/" not in csi["volumeHandle"]
    attrs = csi["volumeAttributes"]
    assert attrs["protocol"] == "fuse2" and attrs["mountWithWorkloadIdentityToken"] == "true"
    assert (attrs["storageaccount"], attrs["containerName"], attrs["resourcegroup"]) == ("corpdata", "imagenet",
                                                                                        "data-rg")
    assert attrs["clientID"] == _guid("torchfleet-azure-datasets-training-identity/client")  # the identity's
    assert pv["spec"]["mountOptions"] == ["-o allow_other", "--read-only=true", "--subdirectory=train/"]
    assert objects[("PersistentVolumeClaim", "dataset-imagenet")]["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert ("NetworkPolicy", "training-to-datasets") not in objects  # blobfuse2 runs on the node
