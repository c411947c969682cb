"""Who may fetch GKE credentials (GCP review m4): roles/container.clusterViewer is granted on the
project, so each grant carries an IAM condition that narrows its cluster permissions to this
cluster, which also keeps it apart from an unconditional grant of the same role made by someone else."""

from __future__ import annotations

import json

from components.clouds.gcp.access import CREDENTIALS_ROLE
from tests.harness import STACKS_DIR
from torchfleet.preview.runner import stack_config, synth

CLUSTER = "gcp:container/cluster:Cluster"
MEMBERS = {
    "torchfleet:admins": ["user:ops@example.com"],
    "torchfleet:researchers": ["user:alice@example.com", "serviceAccount:ci@ml.iam.gserviceaccount.com"],
}


def test_every_credentials_grant_is_conditioned_on_this_cluster():
    stack, config, secrets = stack_config(STACKS_DIR / "Pulumi.gcp-usc1.yaml")
    config = {**config, **{k: json.dumps(v) for k, v in MEMBERS.items()}}
    result = synth(stack, config, secrets)
    cluster_name = result.one(CLUSTER).name  # the mock's name for the auto-named cluster
    grants = [r for r in result.of_type("gcp:projects/iAMMember:IAMMember") if r.inputs["role"] == CREDENTIALS_ROLE]
    assert sorted(g.inputs["member"] for g in grants) == sorted(m for members in MEMBERS.values() for m in members)
    for grant in grants:
        condition = grant.inputs["condition"]
        assert condition["expression"] == (
            'resource.type != "container.googleapis.com/Cluster" || '
            f'resource.name.endsWith("/clusters/{cluster_name}")'
        )
        assert condition["title"] and len(condition["title"]) <= 100  # IAM's limit on a condition title


def _advisories(config_changes: dict) -> list:
    from components import policy
    from torchfleet.check import resources_of

    stack, config, secrets = stack_config(STACKS_DIR / "Pulumi.gcp-usc1.yaml")
    result = synth(stack, {**config, **config_changes}, secrets)
    found = policy.check(resources_of(result.resources), 1000, True, restrict_public_endpoint=True)
    return [v for v in found if v.rule == "dns-endpoint-external"]


def test_the_dns_endpoint_open_to_every_network_is_an_advisory_naming_vpc_service_controls():
    """Regression (GCP review m2): restrictPublicEndpoint looked at the IP endpoints only, so the shipped
    stack (DNS endpoint with allowExternalTraffic) reported nothing about it."""
    (found,) = _advisories({})
    assert found.advisory and "VPC Service Controls" in found.why and "container.clusters.connect" in found.why
    assert _advisories({"torchfleet:network": json.dumps({"cidr": "10.0.0.0/16", "dnsEndpoint": False,
                                                         "publicAccessCidrs": ["203.0.113.7/32"]})}) == []
