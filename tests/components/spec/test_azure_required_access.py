"""Issue 29: on Azure the stack says who reaches the API (publicAccessCidrs, or privateOnly on purpose) and
who administers the cluster (admins, the deployer included): a private cluster made by the default config
was unreachable from the `pulumi up` that made it, and the implicit deployer grant moved and collided."""

from tests.components.spec.configs import config, ok, only, problems

NETWORK = "torchfleet:network.publicAccessCidrs"


def test_azure_without_public_access_cidrs_is_refused_naming_the_key_and_the_way_out():
    message = only(config("azure", network={}), NETWORK)
    assert "required on azure" in message
    assert "torchfleet:network.privateOnly: true" in message and "bastion" in message


def test_an_empty_list_is_refused_too():
    assert NETWORK in problems(config("azure", network={"publicAccessCidrs": []}))


def test_private_only_is_the_documented_private_path():
    spec = ok(config("azure", network={"privateOnly": True}))
    assert spec.network.private_only is True and spec.network.public_access_cidrs == ()


def test_private_only_with_a_list_is_a_contradiction():
    message = only(config("azure", network={"privateOnly": True, "publicAccessCidrs": ["203.0.113.0/24"]}),
                   "torchfleet:network.privateOnly")
    assert "remove one of the two" in message


def test_private_only_must_be_a_boolean():
    assert "torchfleet:network.privateOnly" in problems(config("azure", network={"privateOnly": "maybe"}))


def test_gcp_keeps_its_private_default():
    """GKE's DNS endpoint reaches a private cluster from anywhere (traits.dns_endpoint), so no list is asked."""
    assert ok(config("gcp", network={})).network.public_access_cidrs == ()


def test_azure_without_admins_is_refused_naming_the_key():
    message = only(config("azure", admins=None), "torchfleet:admins")
    assert "yourself" in message and "az ad signed-in-user show" in message


def test_every_problem_at_once():
    found = problems(config("azure", admins=None, network={}))
    assert {"torchfleet:admins", NETWORK} <= set(found), found
