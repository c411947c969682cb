"""`torchfleet gpus` (issue 13): the catalog's available machines with their list prices, offline."""

from __future__ import annotations

import json

import pytest

from components import catalog
from torchfleet.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["gpus", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def available_machines(cloud: str | None = None, gpu: str | None = None) -> list[tuple[str, str, str]]:
    return [(g, c, m.type) for g in catalog.gpu_keys() for c, o in catalog.load()[g].offerings.items()
            if o.available and cloud in (None, c) and gpu in (None, g) for m in o.machines]


@pytest.mark.parametrize("argv, cloud, gpu", [
    ([], None, None), (["--cloud", "gcp"], "gcp", None), (["--gpu", "h100"], None, "h100"),
    (["--cloud", "azure", "--gpu", "T4"], "azure", "t4"),
])
def test_json_lists_every_available_machine_of_the_selection(argv, cloud, gpu, capsys):
    code, out, _ = run(capsys, *argv, "-o", "json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["gpu"], r["cloud"], r["machine"]) for r in rows] == available_machines(cloud, gpu)
    for r in rows:
        assert r["usdPerHour"] == catalog.list_price(r["gpu"], r["cloud"], r["machine"])
        assert (r["usdPerHour"] is None) == (r["unpriced"] is not None)
        assert r["gpuMemoryGb"] == catalog.load()[r["gpu"]].memory_gb
        assert r["priced"] and r["priceRegion"] and r["priceSource"].startswith("https://")


def test_table_has_one_row_per_machine_and_a_dated_footer(capsys):
    code, out, _ = run(capsys, "--cloud", "aws", "--gpu", "t4")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GPU", "CLOUD", "MACHINE", "GPUS", "GPU", "MEM", "VCPUS", "MEMORY", "USD/HOUR"]
    assert lines[1].split() == ["t4", "aws", "g4dn.xlarge", "1", "16", "GB", "4", "16", "GiB", "0.526"]
    assert lines[7].split() == ["t4", "aws", "g4dn.metal", "8", "16", "GB", "96", "384", "GiB", "7.824"]
    assert "aws: on-demand list price, us-east-1, 2026-07-20 (https://aws.amazon.com/ec2/pricing/on-demand/)" in out
    assert "retired, refused in a stack: " not in out  # t4 is retired nowhere


def test_unpriced_machines_show_a_dash_and_the_reason(capsys):
    _, out, _ = run(capsys, "--cloud", "gcp", "--gpu", "h100")
    rows = {line.split()[2]: line.split()[-1] for line in out.splitlines()[1:5]}
    assert rows == {"a3-highgpu-1g": "-", "a3-highgpu-2g": "-", "a3-highgpu-4g": "-", "a3-highgpu-8g": "88.2532"}
    assert "a3-highgpu-1g, a3-highgpu-2g, a3-highgpu-4g: no list price (A3 High with 1, 2 or 4 GPUs" in out


def test_retired_offerings_are_named_not_listed(capsys):
    _, out, _ = run(capsys, "--cloud", "azure")
    listed = {line.split()[0] for line in out.split("\n\n")[0].splitlines()[1:]}
    assert listed == {"t4", "a100-40gb", "a100-80gb", "h100"}
    assert "retired, refused in a stack: k80 (azure); v100 (azure)" in out


def test_a_gpu_a_cloud_does_not_offer_says_so(capsys):
    code, out, _ = run(capsys, "--cloud", "gcp", "--gpu", "a10g")
    assert code == 0 and out.strip() == "no available a10g machines on gcp; retired: -"
    code, out, _ = run(capsys, "--gpu", "k80")
    assert code == 0 and out.strip() == "no available k80 machines; retired: k80 (aws, gcp, azure)"


def test_unknown_gpu_exits_2_listing_the_catalog(capsys):
    code, out, err = run(capsys, "--gpu", "z99")
    assert (code, out) == (2, "")
    assert "--gpu: unknown GPU 'z99'; the catalog has: a100-40gb, a100-80gb, a10g, h100, k80, l4, t4, v100" in err


@pytest.mark.parametrize("argv, message", [
    (["--cloud", "ibm"], "argument --cloud: invalid choice: 'ibm'"),
    (["-o", "yaml"], "argument -o/--output: invalid choice: 'yaml'"),
])
def test_bad_choices_exit_2_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["gpus", *argv])  # argparse's own errors exit while parsing
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
