"""Stack values the probe of issue 23 got through with exit 0 (or exit 2 naming no key): each is now
refused by components.spec naming its key and what would be right. Each test names the bug it pins."""

from __future__ import annotations

import json

import pytest

from components.clouds.azure import device_plugin
from components.clouds.traits import CLOUD_TRAITS
from components.config import decode_value
from components.kube import kubeflow, store_owner
from components.spec import durations, namespaces
from tests.components.spec.configs import BASE, config, ok, only

NAMESPACE = "torchfleet:training.namespace"
AUTOSCALER = "torchfleet:autoscaler"
PUBLIC = "torchfleet:network.publicAccessCidrs"


# ---------------------------------------------------------------- training namespace


@pytest.mark.parametrize("cloud", sorted(BASE))
@pytest.mark.parametrize(
    ("namespace", "why"),
    [
        ("kube-system", "is Kubernetes' own"),
        ("default", "is Kubernetes' own"),
        ("kube-public", "is Kubernetes' own"),
        ("kube-node-lease", "is Kubernetes' own"),
        ("kube-anything", "is Kubernetes' own"),  # the prefix is reserved, not only the four names
        ("torchfleet-system", "is the store-owner Job's namespace (Pod Security baseline"),
        ("kubeflow", "is Kubeflow's training-operator namespace"),
        ("nvidia-device-plugin", "is the NVIDIA device plugin's namespace"),
    ],
)
def test_a_namespace_the_cluster_or_platform_owns_is_refused(cloud, namespace, why):
    # Regression (issue 23): kube-system, default and torchfleet-system were accepted (exit 0): the
    # layer would declare them and put a default-deny policy in them.
    message = only(config(cloud, training={"namespace": namespace}), NAMESPACE)
    assert message.startswith(f"{namespace!r} {why}") and message.endswith("e.g. elastic-job")


@pytest.mark.parametrize("namespace", ["research", "kube", "my-kube-system", "torchfleet"])
def test_a_namespace_of_the_jobs_own_is_accepted(namespace):
    assert ok(config("aws", training={"namespace": namespace})).training.namespace == namespace


def test_the_platform_namespaces_are_the_ones_the_layer_uses():
    # namespaces.py writes them out (those modules import components.spec): the copies stay equal.
    used = {store_owner.NAMESPACE, kubeflow.TRAINING_OPERATOR_NAMESPACE, device_plugin.NAMESPACE}
    assert used == set(namespaces.PLATFORM_NAMESPACES)


# ---------------------------------------------------------------- autoscaler durations


@pytest.mark.parametrize("key", ["scaleDownUnneededTime", "scaleDownDelayAfterAdd"])
@pytest.mark.parametrize(
    ("value", "fix"),
    [("300s", "write 5m"), ("1h", "write 60m"), ("90s", "write 2m (90s rounded up to whole minutes)")],
)
def test_aks_durations_in_seconds_or_hours_are_refused_naming_the_minutes(key, value, fix):
    # Regression (issue 23): AKS's autoScalerProfile takes minutes only; '300s' (which the error
    # message itself suggested) and '1h' were accepted and would fail at deploy time.
    message = only(config("azure", autoscaler={key: value}), f"{AUTOSCALER}.{key}")
    assert message == f"AKS takes whole minutes only ('an integer followed by an m'), got {value!r}; {fix}"


def test_aks_minutes_and_aws_seconds_are_accepted():
    assert ok(config("azure", autoscaler={"scaleDownUnneededTime": "15m"})).autoscaler.scale_down_unneeded_time == "15m"
    assert ok(config("aws", autoscaler={"scaleDownUnneededTime": "300s"})).autoscaler.scale_down_unneeded_time == "300s"


def test_a_wrong_aks_duration_suggests_minutes_only():
    message = only(
        config("azure", autoscaler={"scaleDownDelayAfterAdd": "5 minutes"}), f"{AUTOSCALER}.scaleDownDelayAfterAdd"
    )
    assert message == "expected a duration like 5m or 10m (AKS takes minutes only), got '5 minutes'"


@pytest.mark.parametrize("cloud", ["aws", "azure"])
@pytest.mark.parametrize("value", ["99999999999h", "2562048h", "153722868m", "9" * 40 + "m"])
def test_a_duration_past_go_time_duration_is_refused(cloud, value):
    # Regression (issue 23): 99999999999h overflows Go's time.Duration (int64 nanoseconds), which the
    # cluster autoscaler parses its flags into; it was accepted.
    key = f"{AUTOSCALER}.scaleDownUnneededTime"
    message = only(config(cloud, autoscaler={"scaleDownUnneededTime": value}), key)
    assert "is longer than a Go time.Duration holds (at most 2562047h, 153722867m or 9223372036s" in message


def test_the_largest_go_durations_are_exactly_the_int64_nanosecond_bounds():
    limit = 2**63 - 1  # time.Duration's maximum, in nanoseconds
    assert durations.GO_MAX["h"] * 3600 * 10**9 <= limit < (durations.GO_MAX["h"] + 1) * 3600 * 10**9
    assert durations.GO_MAX["m"] * 60 * 10**9 <= limit < (durations.GO_MAX["m"] + 1) * 60 * 10**9
    assert durations.GO_MAX["s"] * 10**9 <= limit < (durations.GO_MAX["s"] + 1) * 10**9
    assert ok(config("aws", autoscaler={"scaleDownUnneededTime": "2562047h"}))
    assert ok(config("azure", autoscaler={"scaleDownUnneededTime": "153722867m"}))


# ---------------------------------------------------------------- API allow-list length


@pytest.mark.parametrize(("cloud", "most"), [("aws", 40), ("gcp", 100), ("azure", 200)])
def test_more_public_access_cidrs_than_the_cloud_takes_are_refused(cloud, most):
    # Regression (issue 23): 300 GKE authorized networks were accepted (exit 0).
    assert CLOUD_TRAITS[cloud].max_public_access_cidrs == most
    cidrs = [f"11.{i // 250}.{i % 250}.0/24" for i in range(most + 1)]
    message = only(config(cloud, network={"publicAccessCidrs": cidrs}), PUBLIC)
    assert message.startswith(f"at most {most} CIDRs on {cloud}") and f"got {most + 1}" in message
    assert ok(config(cloud, network={"publicAccessCidrs": cidrs[:most]}))


# ---------------------------------------------------------------- numbers past any count


@pytest.mark.parametrize("digits", [21, 5000])
def test_a_number_of_thousands_of_digits_names_its_key(digits):
    # Regression (issue 23): a 5,000-digit maxNodes failed on Python's 4,300-digit int() limit with
    # an exit 2 that named the file only; now the readers keep it as text and the key is named.
    text = json.dumps({"machineType": "m6i.large", "maxNodes": 0}).replace("0}", "9" * digits + "}")
    raw = config("aws", managerPool=decode_value(text))
    message = only(raw, "torchfleet:managerPool.maxNodes")
    assert message == (
        f"must be <= 450 (the most nodes one node pool holds on this cloud; components/clouds/"
        f"traits.py cites the quota), got a {digits}-digit number"
    )


def test_a_long_negative_number_says_the_minimum():
    message = only(config("aws", managerPool={"maxNodes": "-" + "9" * 30}), "torchfleet:managerPool.maxNodes")
    assert message == "must be >= 1, got a 30-digit number"


# ---------------------------------------------------------------- a pool's zones


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_an_empty_pool_zone_list_is_refused_not_read_as_every_zone(cloud):
    # Doubt of issue 23, decided: gpuPools[].zones: [] silently meant every zone, where an empty
    # network.publicAccessCidrs means none; leaving the key out still means every zone.
    message = only(config(cloud, gpuPools=[{"gpu": "t4", "maxNodes": 2, "zones": []}]), "torchfleet:gpuPools[0].zones")
    assert message.startswith("an empty list names no zone; leave the key out for every zone of torchfleet:zones")
    spec = ok(config(cloud, gpuPools=[{"gpu": "t4", "maxNodes": 2}]))
    assert {pool.zone for pool in spec.gpu_pools} == set(BASE[cloud]["torchfleet:zones"])


def test_more_eks_admins_than_access_entries_per_cluster_are_refused():
    # List caps per cloud (issue 23): EKS takes 3,000 access entries per cluster; two are the program's.
    roles = [f"arn:aws:iam::123456789012:role/admin-{i}" for i in range(2999)]
    message = only(config("aws", admins=roles), "torchfleet:admins")
    assert message.startswith("at most 2998 on aws, got 2999: EKS takes 3,000 access entries per cluster")
    assert ok(config("aws", admins=roles[:2998])).access.admins == tuple(roles[:2998])
