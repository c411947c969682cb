"""Flag parsers, progress parsing and table helpers: small pure functions, table-driven."""

from datetime import UTC, datetime, timedelta

import pytest

from torchfleet.jobs import progress, table
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.flag_checks import check_image, combinations, parse_nodes, parse_params, training_command


@pytest.mark.parametrize(("text", "expected"), [("2:8", (2, 8)), ("4", (4, 4)), (" 1 : 3 ", (1, 3)), ("1:1", (1, 1))])
def test_nodes(text, expected):
    assert parse_nodes(text) == expected


@pytest.mark.parametrize("text", ["", "2-8", "2:", ":8", "a", "2:8:9", "-1:2", "0", "3:2", "1.5:2"])
def test_nodes_refused(text):
    with pytest.raises(UsageError, match=r"^--nodes: "):
        parse_nodes(text)


def test_no_job_has_more_nodes_than_its_rendezvous_state_holds():
    # A job's rendezvous state is one etcd key within the gate's limit; 64 nodes fit with their replacements
    # waiting (tests/training_image/test_etcd_gate.py::test_the_largest_jobs_rendezvous_state_fits).
    assert parse_nodes("1:64") == (1, 64)
    with pytest.raises(UsageError, match=r"^--nodes: at most 64 nodes \(the most one job's rendezvous state holds"):
        parse_nodes("1:65")


@pytest.mark.parametrize("image", ["repo/train:1.0", "registry.example.com:5000/team/train:2024.1",
                                   "train@sha256:" + "a" * 64, "repo/train:latest@sha256:" + "b" * 64])
def test_image_with_a_fixed_version(image):
    check_image(image)


@pytest.mark.parametrize("image", ["repo/train", "repo/train:latest", "registry.example.com:5000/train", "", "a b:1"])
def test_image_refused(image):
    with pytest.raises(UsageError, match=r"^--image: "):
        check_image(image)


def test_params_to_combinations_in_flag_order():
    params = parse_params(["lr=0.1,0.01", "model.depth=18,50", "+extra=1"], style="hydra")
    assert combinations(params)[:3] == [("lr=0.1", "model.depth=18", "+extra=1"),
                                        ("lr=0.1", "model.depth=50", "+extra=1"),
                                        ("lr=0.01", "model.depth=18", "+extra=1")]
    assert len(combinations(params)) == 4


def test_python_interpreter_options_refused():
    with pytest.raises(UsageError, match="interpreter options"):
        training_command(["python", "-u", "train.py"])
    with pytest.raises(UsageError, match="missing"):
        training_command([])


def test_log_progress_ignores_noise_and_takes_the_newest_step():
    lines = [
        "@@tf not json",
        '@@tf {"ev": "step", "step": 900}',
        'prefix @@tf {"ev": "ckpt", "step": 400, "gen": 1}',
        '@@tf {"ev": "resumed", "step": 400, "from_gen": 1, "gen": 2}',
        '@@tf {"ev": "ckpt", "step": 500, "gen": 2}',
        '@@tf {"ev": "ckpt", "step": "600"}',
        '@@tf ["ckpt"]',
    ]
    found = progress.from_log_lines(lines, "pod-0 log")
    assert (found.step, found.generation, found.source) == (500, 2, "pod-0 log")
    assert progress.from_log_lines(["plain", "lines"], "x") is None
    assert progress.newest([None, found, progress.CheckpointInfo(700, "other")]).step == 700
    assert progress.newest([None]) is None


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("delta", "text"), [(timedelta(seconds=5), "5s"), (timedelta(minutes=3, seconds=59), "3m"),
                                             (timedelta(hours=5), "5h"), (timedelta(days=2, hours=23), "2d")])
def test_age(delta, text):
    assert table.age((NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ"), NOW) == text
    assert table.age(NOW - delta, NOW) == text


def test_state_is_the_newest_true_condition():
    job = {"status": {"conditions": [
        {"type": "Created", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Running", "status": "False", "lastTransitionTime": "2026-01-01T00:05:00Z"},
        {"type": "Restarting", "status": "True", "lastTransitionTime": "2026-01-01T00:03:00Z"},
    ]}}
    assert table.state(job) == "Restarting"
    assert table.state({}) == "Pending"


@pytest.mark.parametrize(("zone", "label"), [("2", "eastus-2"), ("eastus-3", "eastus-3")])
def test_azure_zone_becomes_the_aks_node_label(zone, label):
    # AKS labels nodes topology.kubernetes.io/zone=<region>-<zone>: a selector on "2" never matches.
    from torchfleet.jobs import manifests
    from torchfleet.jobs import target as targets
    from torchfleet.jobs.spec import build_request

    t = targets.from_stack("azure-eus")
    req = build_request(t, name="a", gpu="t4", nodes="1:2", gpus_per_node=1, image="r/t:1", command=["t.py"],
                        zone=zone)
    pod = manifests.worker_spec(manifests.build(req, t))["template"]["spec"]
    assert pod["nodeSelector"]["topology.kubernetes.io/zone"] == label


@pytest.mark.parametrize(("zone", "stack", "words"), [
    ("westus-1", "azure-eus", "expected an Azure zone like 1 or eastus-1"),
    ("4", "azure-eus", "expected an Azure zone"),
    ("2", None, "give it whole, e.g. eastus-2"),
])
def test_azure_zone_refused(zone, stack, words):
    from torchfleet.jobs import target as targets
    from torchfleet.jobs.spec import build_request

    t = targets.from_stack(stack) if stack else targets.defaults("azure")
    with pytest.raises(UsageError, match=words):
        build_request(t, name="a", gpu="t4", nodes="1", gpus_per_node=1, image="r/t:1", command=["t.py"], zone=zone)


def test_zone_is_passed_through_on_other_clouds():
    from torchfleet.jobs import target as targets
    from torchfleet.jobs.spec import zone_names

    assert zone_names(targets.from_stack("gcp-usc1"), "us-central1-a") == ("us-central1-a", "us-central1-a")


def test_stack_sizing_fits_the_smallest_machine_a_pool_may_get(tmp_path):
    from torchfleet.jobs import target as targets
    from torchfleet.jobs.spec import build_request

    # On Azure (a pool per machine type); an EKS pool must be one size since issue 20.
    (tmp_path / "Pulumi.mixed.yaml").write_text(
        "config:\n  azure-native:location: eastus\n  torchfleet:cloud: azure\n  torchfleet:zones: ['1']\n"
        "  torchfleet:gpuPools:\n"
        "    - {gpu: t4, maxNodes: 4, machineTypes: [Standard_NC16as_T4_v3, Standard_NC4as_T4_v3]}\n"
        "  torchfleet:network: {publicAccessCidrs: [203.0.113.0/24]}\n"  # required on Azure (issue 29)
        "  torchfleet:admins: ['User:00000000-0000-0000-0000-0000000000b0']\n"
    )
    t = targets.from_stack("mixed", tmp_path)
    req = build_request(t, name="a", gpu="t4", nodes="1", gpus_per_node=1, image="r/t:1", command=["t.py"])
    assert req.sizing.machine == "Standard_NC4as_T4_v3"
    assert req.sizing.cpu_millis < 4000


def test_list_and_status_show_a_cpu_job_as_cpu():
    """A --cpu job has no GPU label or resource: `list` said "-" and `status` "- x? per node"."""
    from torchfleet.jobs import manifests
    from torchfleet.jobs import target as targets
    from torchfleet.jobs.spec import build_request

    t = targets.from_stack("local")
    req = build_request(t, name="c", gpu=None, cpu=True, nodes="1:2", gpus_per_node=None, image="r/t:1",
                        command=["t.py"], cpus="2", memory="4Gi")
    job = manifests.build(req, t)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert table.job_row(job, [], lambda name: None, now).gpu == "cpu"
    text = table.render_status(job, [], [], lambda name: None, None, now)
    assert "none (a CPU job: 2000m cpu, 4096Mi memory per node)" in text


def test_the_cli_reads_checkpoint_names_as_the_training_image_writes_them():
    """torchfleet/jobs/progress.py keeps its own copy of the name pattern (the CLI does not import the
    training image): it must stay the store's own (a stale copy once named a pattern that had moved)."""
    from elastic_trainer.store.fence import COMMITTED_NAME

    from torchfleet.jobs import progress

    assert progress._COMMITTED.pattern == COMMITTED_NAME.pattern
