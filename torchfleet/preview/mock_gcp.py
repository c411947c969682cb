"""Computed outputs and invoke answers of the gcp provider under mocks.

Only outputs the program reads are computed here, shaped as pulumi-gcp returns them (camelCase
state keys): a test that reads one the provider does not compute should fail, not pass on a
made-up value. Values are fixed so synth output is stable.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

import pulumi

from components.spec import DEFAULT_KUBERNETES_VERSION

PROJECT = "mock-project"
# base64 of a PEM header, as GKE's masterAuth.clusterCaCertificate is base64 PEM.
MOCK_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMOCK\n-----END CERTIFICATE-----\n").decode()
MOCK_ENDPOINT = "203.0.113.10"  # TEST-NET-3: never a real control plane
MOCK_FILESTORE_IP = "10.96.0.2"
MOCK_PROJECT_NUMBER = "123456789012"


def _project(args: pulumi.runtime.MockResourceArgs) -> str:
    return args.inputs.get("project") or PROJECT


MOCK_PRIVATE_ENDPOINT = "10.0.0.2"
# GKE's DNS control-plane endpoint has the form gke-<id>-<project number>.<location>.gke.goog.
MOCK_DNS_ENDPOINT = f"gke-0123456789abcdef0123456789abcdef-{MOCK_PROJECT_NUMBER}.mock-location.gke.goog"


def _cluster(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    location = args.inputs.get("location", "")
    return {
        "endpoint": MOCK_ENDPOINT,
        "masterAuth": {**(args.inputs.get("masterAuth") or {}), "clusterCaCertificate": MOCK_CA},
        "masterVersion": f"{args.inputs.get('minMasterVersion', DEFAULT_KUBERNETES_VERSION)}.5-gke.1000000",
        "selfLink": f"https://container.googleapis.com/v1/projects/{_project(args)}/locations/{location}"
        f"/clusters/{args.name}",
        # With Private Service Connect, GKE gives the control plane an address in the node subnet.
        "controlPlaneEndpointsConfig": _endpoints(args.inputs.get("controlPlaneEndpointsConfig") or {}),
        "privateClusterConfig": {
            **(args.inputs.get("privateClusterConfig") or {}),
            "privateEndpoint": MOCK_PRIVATE_ENDPOINT,
        },
    }


def _endpoints(given: dict[str, Any]) -> dict[str, Any]:
    # Every GKE cluster has a DNS endpoint; allowExternalTraffic only decides who may use it.
    dns = given.get("dnsEndpointConfig") or {}
    return {**given, "dnsEndpointConfig": {**dns, "endpoint": MOCK_DNS_ENDPOINT}}


def filestore_ip(reserved_range: str | None) -> str:
    """The address Filestore gives an instance: the second host of its reserved range."""
    if not reserved_range:
        return MOCK_FILESTORE_IP
    return str(ipaddress.ip_network(reserved_range).network_address + 2)


def _filestore(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    networks = args.inputs.get("networks") or [{}]
    reserved = networks[0].get("reservedIpRange")
    return {
        "networks": [
            {**networks[0], "ipAddresses": [filestore_ip(reserved)], "reservedIpRange": reserved or "10.96.0.0/29"},
            *networks[1:],
        ],
    }


def _service_account(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    email = f"{args.inputs['accountId']}@{_project(args)}.iam.gserviceaccount.com"
    return {"email": email, "member": f"serviceAccount:{email}", "uniqueId": "100000000000000000001"}


def _self_link(kind: str) -> Any:
    def compute(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
        region = args.inputs.get("region")
        where = f"regions/{region}/" if region else "global/"
        return {"selfLink": f"https://www.googleapis.com/compute/v1/projects/{_project(args)}/{where}{kind}/{args.name}"}

    return compute


RESOURCES: dict = {
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:filestore/instance:Instance": _filestore,
    "gcp:serviceaccount/account:Account": _service_account,
    "gcp:compute/network:Network": _self_link("networks"),
    "gcp:compute/subnetwork:Subnetwork": _self_link("subnetworks"),
    # The GKE service agent: service-<project number>@container-engine-robot.iam.gserviceaccount.com
    "gcp:projects/serviceIdentity:ServiceIdentity": lambda args: {
        "email": f"service-{MOCK_PROJECT_NUMBER}@container-engine-robot.iam.gserviceaccount.com",
        "member": f"serviceAccount:service-{MOCK_PROJECT_NUMBER}@container-engine-robot.iam.gserviceaccount.com",
    },
}
CALLS: dict = {
    "gcp:organizations/getProject:getProject": lambda args: {
        "projectId": args.args.get("projectId") or PROJECT,
        "number": MOCK_PROJECT_NUMBER,
        "name": args.args.get("projectId") or PROJECT,
        "id": f"projects/{args.args.get('projectId') or PROJECT}",
    },
}
