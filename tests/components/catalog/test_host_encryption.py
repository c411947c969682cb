"""components/catalog/host_encryption.yaml: every Azure size the catalogs offer has a recorded value
from the Resource SKUs API, or is named here as not recorded (Azure review 14: every pool set
enableEncryptionAtHost, and a size without it fails the pool create)."""

from __future__ import annotations

import re

import pytest
import yaml

from components import catalog
from components.catalog import host_encryption, machines

RAW = yaml.safe_load(host_encryption.HOST_ENCRYPTION_FILE.read_text())
HEADER = host_encryption.HOST_ENCRYPTION_FILE.read_text().split("\nsizes:")[0]
# Absent from the source (Azure Batch does not list them): `torchfleet check` prints the command instead.
NOT_RECORDED = {"Standard_ND96isr_H100_v5", "Standard_D{size}as_v5", "Standard_E{size}s_v5"}
GPU_SIZES = sorted(
    {m.type for gpu in catalog.gpu_keys() if (o := catalog.offering(gpu, "azure")) and o.available for m in o.machines}
)


@pytest.mark.parametrize("size", GPU_SIZES)
def test_every_offered_gpu_size_is_recorded_or_named_as_not(size):
    assert (size in RAW["sizes"]) != (size in NOT_RECORDED), size
    assert host_encryption.supported(size) is RAW["sizes"].get(size)


@pytest.mark.parametrize("series", sorted(machines.rules("azure").types))
def test_every_manager_series_is_recorded_or_named_as_not(series):
    assert (series in RAW["series"]) != (series in NOT_RECORDED), series
    for size in machines.rules("azure").types[series]:
        assert host_encryption.supported(series.replace("{size}", size)) is RAW["series"].get(series)


def test_the_source_is_cited_with_its_commits_and_dates():
    assert "microsoft/ga4gh-tes" in HEADER and "EncryptionAtHostSupported" in HEADER
    commits = re.findall(r"\b([0-9a-f]{40}) \((\d{4}-\d{2}-\d{2})", HEADER)
    assert len(commits) == 3, commits
    assert re.search(r"Read \d{4}-\d{2}-\d{2}", HEADER)


def test_a_size_nobody_recorded_is_unknown_not_false():
    assert host_encryption.supported("Standard_ND96isr_H100_v5") is None
    assert host_encryption.supported("Standard_D4as_v5") is None
    assert host_encryption.supported("Standard_NC6") is False  # K80, retired
    assert host_encryption.supported("Standard_NC8as_T4_v3") is True
