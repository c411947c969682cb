"""components/catalog/kubernetes.yaml: a test walks every row (each service, each minor)."""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlparse

import pytest
import yaml

from components.catalog import kubernetes
from components.clouds.traits import CLOUD_TRAITS
from components.spec import DEFAULT_KUBERNETES_VERSION
from tests.components.spec.configs import config, ok, only

RAW = yaml.safe_load(kubernetes.VERSIONS_FILE.read_text())
VENDOR_DOMAIN = {"aws": "docs.aws.amazon.com", "gcp": "cloud.google.com", "azure": "learn.microsoft.com"}
ROWS = [(name, minor) for name, row in sorted(RAW.items()) for minor in row["versions"]]


def test_one_service_per_managed_cloud():
    assert sorted(row["cloud"] for row in RAW.values()) == sorted(c for c in CLOUD_TRAITS if c != "local")
    assert kubernetes.service_for("local") is None


@pytest.mark.parametrize("name", sorted(RAW))
def test_service_row(name):
    row = RAW[name]
    assert set(row) == {"cloud", "source", "checked", "versions"}
    url = urlparse(row["source"])
    assert url.scheme == "https" and url.hostname == VENDOR_DOMAIN[row["cloud"]]
    assert isinstance(row["checked"], str)
    datetime.date.fromisoformat(row["checked"])
    minors = [tuple(int(p) for p in v.split(".")) for v in row["versions"]]
    assert minors == sorted(minors), "list minors oldest first"
    # A contiguous range: a service offers every minor between its oldest and newest.
    assert [m[1] for m in minors] == list(range(minors[0][1], minors[-1][1] + 1))


@pytest.mark.parametrize("name, minor", ROWS, ids=[f"{n}-{m}" for n, m in ROWS])
def test_version_row(name, minor):
    assert isinstance(minor, str) and re.fullmatch(r"1\.\d{2}", minor), "minors are quoted strings like '1.33'"
    end = RAW[name]["versions"][minor]
    if end is not None:
        assert isinstance(end, str)
        # Still offered on the day the list was read.
        assert datetime.date.fromisoformat(end) >= datetime.date.fromisoformat(RAW[name]["checked"])
    cloud = RAW[name]["cloud"]
    traits = CLOUD_TRAITS[cloud]
    buildable = traits.kubernetes_versions
    standard_end = traits.standard_support_until.get(minor)
    raw = config(cloud, kubernetesVersion=minor)
    if standard_end is not None and standard_end < RAW[name]["checked"]:
        # What the cloud module creates cannot start on it (AKS Standard tier, GKE REGULAR channel).
        assert f"standard support for {minor} ended on {standard_end}" in only(raw, "torchfleet:kubernetesVersion")
    elif not buildable or minor in buildable:
        assert ok(raw).kubernetes_version == minor


@pytest.mark.parametrize("cloud", sorted(c for c, t in CLOUD_TRAITS.items() if t.standard_support_until))
def test_standard_support_dates_cover_every_offered_minor(cloud):
    # A minor the catalog adds must get its end of standard support too, or it would pass unchecked.
    traits = CLOUD_TRAITS[cloud]
    assert set(kubernetes.service_for(cloud).minors) <= set(traits.standard_support_until)
    for end in traits.standard_support_until.values():
        datetime.date.fromisoformat(end)
    assert traits.standard_support_why.startswith("Torchfleet ") and "https://" in traits.standard_support_why


@pytest.mark.parametrize("cloud", sorted(c for c in CLOUD_TRAITS if c != "local"))
def test_the_default_version_is_accepted_everywhere(cloud):
    # Regression (2026-11-23): the default 1.33 was offered everywhere but past standard support,
    # which AKS's Standard tier and GKE's REGULAR channel refuse.
    assert DEFAULT_KUBERNETES_VERSION in kubernetes.service_for(cloud).minors
    assert ok(config(cloud)).kubernetes_version == DEFAULT_KUBERNETES_VERSION


def test_loaded_services_match_the_yaml():
    for name, service in kubernetes.load().items():
        assert (service.cloud, service.source, service.checked) == (
            RAW[name]["cloud"], RAW[name]["source"], RAW[name]["checked"]
        )
        assert service.minors == tuple(RAW[name]["versions"])
