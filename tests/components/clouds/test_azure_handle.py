"""The ClusterHandle AzureCluster gives the Kubernetes layer: the store as a ReadWriteMany CSI
volume, NFS mount options, egress CIDRs, the manager selector and what to wait for."""

import pulumi
import pytest

from components.clouds.azure import AzureCluster
from components.clouds.azure.files import NFS_MOUNT_OPTIONS
from components.spec import parse
from torchfleet.preview.mocks import TorchfleetMocks

CONFIG = {
    "azure-native:location": "eastus",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["2", "3"],
    "torchfleet:gpuPools": [{"gpu": "h100", "maxNodes": 2}],
    "torchfleet:storage": {"tier": "Premium_LRS", "sizeGb": 300},
    "torchfleet:network": {"cidr": "10.8.0.0/16", "publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],  # required on Azure (issue 29)
}


@pytest.fixture(scope="module")
def handle():
    """Build AzureCluster alone under the mocks; resolve the handle's outputs."""
    pulumi.runtime.set_mocks(TorchfleetMocks(), project="torchfleet", stack="azure-handle", preview=False)
    spec = parse(CONFIG, stack="azure-handle")
    built: dict = {}

    @pulumi.runtime.test
    def program():
        h = AzureCluster("az", spec).handle
        built["handle"] = h
        return pulumi.Output.all(
            volume=h.store.volume_source, id=h.store.id, name=h.name, kubeconfig=h.kubeconfig,
            account=h.outputs["storageAccount"], share=h.outputs["shareName"],
            rg=h.outputs["storageResourceGroup"], secret=h.kubeconfig.is_secret(),
        ).apply(built.update)

    program()
    return built


def test_store_is_a_static_nfs_csi_volume(handle):
    csi = handle["volume"]["csi"]
    assert csi["driver"] == "file.csi.azure.com"
    attrs = csi["volumeAttributes"]
    # encryptInTransit: TLS through aznfs, which the account's secure transfer requires (Azure review 8).
    assert attrs == {"resourceGroup": handle["rg"], "storageAccount": handle["account"], "shareName": "shared",
                     "protocol": "nfs", "encryptInTransit": "true"}
    # The documented static-provisioning handle: {resource-group}#{account}#{share}.
    assert csi["volumeHandle"] == f"{handle['rg']}#{handle['account']}#shared"
    assert handle["id"] == f"{handle['account']}/shared"


def test_store_mount_options_capacity_and_egress(handle):
    store = handle["handle"].store
    assert store.kind == "azurefiles"
    assert store.mount_options == NFS_MOUNT_OPTIONS == ("nconnect=4", "actimeo=30", "noresvport")
    assert store.capacity == "300Gi"
    # NFS traffic goes to the private endpoint's subnet, inside the virtual network.
    assert store.nfs_cidrs == ("10.8.128.0/24",)


def test_handle_contract(handle):
    h = handle["handle"]
    assert h.zones == ("2", "3")
    assert [p.name for p in h.gpu_pools] == ["gpu-h100-2", "gpu-h100-3"]
    assert h.manager_selector == {"torchfleet.io/pool": "manager"}
    assert handle["secret"] is True
    assert "kubelogin" in handle["kubeconfig"]
    assert handle["name"] == "az-cluster-aks"
    ready_types = sorted({type(r).__name__ for r in h.ready})
    # The DNS link and zone group: the share resolves to the endpoint only with both (Azure review 6);
    # the RBAC propagation wait: the grant must have taken effect (Azure review 2).
    assert ready_types == [
        "AgentPool", "FileShare", "ManagedCluster", "PrivateDnsZoneGroup", "PrivateEndpoint", "PropagationWait",
        "Release", "VirtualNetworkLink",
    ]
    assert isinstance(h.provider, pulumi.ProviderResource)
    assert h.outputs["region"] == "eastus"
    assert h.outputs["agentPools"] == {"gpu-h100-2": ["h100z2"], "gpu-h100-3": ["h100z3"]}
