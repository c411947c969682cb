"""--allow-egress never opens a cloud metadata endpoint (issue 12): the excepts each CIDR gets,
the CIDRs refused, and the NetworkPolicy `submit --dry-run` prints on each cloud's stack."""

import ipaddress

import kubernetes_validate
import pytest
import yaml

from torchfleet.cli import main
from torchfleet.jobs.egress import METADATA_ENDPOINTS, ip_block, parse_egress
from torchfleet.jobs.errors import UsageError

IMDS = "169.254.169.254/32"
GKE_METADATA = "169.254.169.252/32"
WIRESERVER = "168.63.129.16/32"
AWS_IMDS_V6 = "fd00:ec2::254/128"
POD_IDENTITY = "169.254.170.23/32"  # the EKS Pod Identity Agent
POD_IDENTITY_V6 = "fd00:ec2::23/128"

# (cidr, the excepts it must get) -- each except strictly inside its cidr, as the API server requires.
EXCEPTS = [
    ("0.0.0.0/0", [IMDS, GKE_METADATA, WIRESERVER, POD_IDENTITY]),
    ("::/0", [AWS_IMDS_V6, POD_IDENTITY_V6]),
    ("169.254.0.0/16", [IMDS, GKE_METADATA, POD_IDENTITY]),
    ("169.254.170.0/24", [POD_IDENTITY]),
    ("169.254.169.254/31", [IMDS]),
    ("168.63.0.0/16", [WIRESERVER]),
    ("128.0.0.0/1", [IMDS, GKE_METADATA, WIRESERVER, POD_IDENTITY]),
    ("fd00::/8", [AWS_IMDS_V6, POD_IDENTITY_V6]),
    ("fd00:ec2::/32", [AWS_IMDS_V6, POD_IDENTITY_V6]),
    ("52.216.0.0/15", []),
    ("10.0.0.0/8", []),
    ("2600:1f00::/24", []),
]


@pytest.mark.parametrize(("cidr", "excepts"), EXCEPTS, ids=[c for c, _ in EXCEPTS])
def test_every_metadata_endpoint_inside_a_cidr_is_excepted(cidr, excepts):
    block = ip_block(cidr)
    assert block.get("except", []) == excepts
    network = ipaddress.ip_network(cidr)
    for inner in block.get("except", []):
        inner = ipaddress.ip_network(inner)
        assert inner.subnet_of(network) and inner != network


# Regression (issue 12): --allow-egress 169.254.169.254/32 opened the metadata endpoint README.md says stays closed.
@pytest.mark.parametrize(
    "cidr", [IMDS, GKE_METADATA, WIRESERVER, AWS_IMDS_V6, "fd00:ec2:0:0:0:0:0:254/128", POD_IDENTITY, POD_IDENTITY_V6]
)
def test_a_metadata_endpoint_itself_is_refused(cidr):
    with pytest.raises(UsageError, match=r"^--allow-egress: .* stays closed to jobs"):
        parse_egress([cidr])
    with pytest.raises(UsageError):
        ip_block(str(ipaddress.ip_network(cidr)))


def test_every_endpoint_cites_its_source():
    for endpoint in METADATA_ENDPOINTS:
        assert endpoint.source.startswith("https://") and endpoint.network.num_addresses == 1


# (stack, the endpoints of that cloud which 0.0.0.0/0 and ::/0 must leave closed)
CLOUDS = [
    ("aws-usw2", [IMDS, AWS_IMDS_V6]),
    ("gcp-usc1", [IMDS, GKE_METADATA]),  # metadata.google.internal is 169.254.169.254
    ("azure-eus", [IMDS, WIRESERVER]),
    ("local", [IMDS]),
]


@pytest.mark.parametrize(("stack", "endpoints"), CLOUDS, ids=[s for s, _ in CLOUDS])
def test_wide_egress_on_each_cloud_leaves_its_metadata_endpoints_closed(stack, endpoints, capsys):
    code = main(["submit", "dl", "--stack", stack, "--cpu", "--image", "r/t:1", "--allow-egress", "0.0.0.0/0",
                 "--allow-egress", "::/0", "--dry-run", "--", "python", "train.py"])
    out, err = capsys.readouterr()
    assert code == 0, err
    policy = next(d for d in yaml.safe_load_all(out) if d and d["metadata"]["name"] == "job-dl-egress")
    for version in ("1.30.0", "1.37.0"):
        kubernetes_validate.validate(policy, version, strict=True)
    blocks = [peer["ipBlock"] for rule in policy["spec"]["egress"] for peer in rule["to"]]
    assert [b["cidr"] for b in blocks] == ["0.0.0.0/0", "::/0"]
    excepted = {e for b in blocks for e in b.get("except", [])}
    assert set(endpoints) <= excepted
    for block in blocks:
        for inner in block.get("except", []):
            assert ipaddress.ip_network(inner).subnet_of(ipaddress.ip_network(block["cidr"]))


def test_the_refusal_says_what_the_endpoint_hands_out_on_each_cloud():
    """GCP review F18: the refusal said every endpoint "hands out the node's credentials"; on GKE nodes
    with GKE_METADATA the metadata server serves the pod's own Workload Identity instead."""
    with pytest.raises(UsageError) as imds:
        parse_egress([IMDS])
    assert "the node's credentials on EKS and AKS (a pod's own Workload Identity on GKE)" in str(imds.value)
    with pytest.raises(UsageError) as gke:
        parse_egress([GKE_METADATA])
    assert "Workload Identity" in str(gke.value) and "node's" not in str(gke.value)
    with pytest.raises(UsageError) as wireserver:
        parse_egress([WIRESERVER])
    assert "node's" not in str(wireserver.value) and "extension settings" in str(wireserver.value)
