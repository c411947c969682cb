"""list/status/logs/delete with kubectl's conventions (issue 13), against the fake API of
test_jobs_cluster.py: `-o json|yaml|wide`, the progress view from the trainer's events, `--watch`,
`logs --all-ranks --previous -f`, `delete` of several names, `--all` (asks unless --yes) and `-l`."""

import json
from unittest import mock

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.torchfleet.fake_cluster import (  # noqa: F401 (fixtures)
    EJ,
    NOW,
    TIMEOUT,
    cli,
    cond,
    frozen_now,
    job_object,
    node,
    not_found,
    pod,
)
from torchfleet.jobs import inspect_commands

T0 = NOW.timestamp() - 100


def events_log(*events):
    return "\n".join(["[torchfleet] torchrun --nnodes=1:2 ...", *("@@tf " + json.dumps(e) for e in events)])


def training_job(**kw):
    job = job_object(**kw)
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"] = [
        "--nproc_per_node=1", "train.py", "--total-steps", "100"]
    return job


# Killed at step 30 with the checkpoint of step 20; resumed on one node at 20, now at step 40.
RESTARTED = [{"ev": "start", "wall": T0, "world": 2, "gen": 1},
             *({"ev": "step", "wall": T0 + s / 2, "step": s, "world": 2, "loss": 0.5} for s in range(1, 31)),
             {"ev": "ckpt", "wall": T0 + 10, "step": 20, "gen": 1},
             {"ev": "resumed", "wall": T0 + 30, "step": 20, "world": 1, "gen": 2, "from_gen": 1},
             *({"ev": "step", "wall": T0 + 31 + (s - 21), "step": s, "world": 1, "loss": 0.25} for s in range(21, 41))]


def _running_job(api, state="Running"):
    api.get_namespaced_custom_object.return_value = training_job(conditions=[cond(state, 5)])
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    api.read_node.return_value = node("node-a", "us-west-2a")
    api.read_namespaced_pod_log.return_value = events_log(*RESTARTED)


def test_status_shows_progress_from_the_trainers_events(api, kubeconfig, capsys):
    _running_job(api)
    code, out, err = cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0, err
    assert "Step:            40 of 100 (40%)   loss 0.25" in out
    assert "Speed:           1.00 steps/s   ETA 1m00s" in out
    assert "World size:      1 now; over time: 2 (step 0) -> 1 (step 20)" in out
    assert "Restarts:        1; 10 steps lost" in out
    assert "Last checkpoint: step 20 (read from resnet-worker-0 log), written 1m30s ago" in out


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_status_as_data(fmt, api, kubeconfig, capsys):
    _running_job(api)
    code, out, err = cli(["status", "resnet", "-o", fmt], kubeconfig, capsys)
    assert code == 0, err
    data = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert data["name"] == "resnet" and data["state"] == "Running"
    assert data["nodes"] == {"running": 1, "min": 2, "max": 4}
    assert data["progress"]["step"] == 40 and data["progress"]["lost_steps"] == 10
    assert data["progress"]["total_steps"] == 100 and data["progress"]["restarts"] == 1
    assert data["lastCheckpoint"] == {"step": 20, "generation": 1, "source": "resnet-worker-0 log"}
    assert data["pods"] == [{"name": "resnet-worker-0", "phase": "Running", "node": "node-a", "restarts": 0}]


def test_status_watch_redraws_until_the_job_ends(api, kubeconfig, capsys):
    _running_job(api)
    finished = training_job(conditions=[cond("Running", 5), cond("Succeeded", 0)])
    api.get_namespaced_custom_object.side_effect = [api.get_namespaced_custom_object.return_value, finished]
    with mock.patch.object(inspect_commands.time, "sleep") as sleep:
        code, out, err = cli(["status", "resnet", "--watch"], kubeconfig, capsys)
    assert code == 0, err
    assert out.count("Step:            40 of 100") == 2  # drawn twice: Running, then Succeeded
    assert "State:           Succeeded" in out
    sleep.assert_called_once_with(inspect_commands.WATCH_INTERVAL_S)


def test_list_as_json_and_wide(api, kubeconfig, capsys):
    grid = training_job(name="grid-0")
    grid["metadata"]["labels"]["torchfleet.io/sweep"] = "grid"
    api.list_namespaced_custom_object.return_value = {"items": [grid, training_job(name="a")]}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("a-worker-0", job="a")])
    api.read_node.return_value = node("node-a", "us-west-2a")
    code, out, _ = cli(["list", "-o", "json"], kubeconfig, capsys)
    data = json.loads(out)
    assert code == 0 and [j["name"] for j in data] == ["a", "grid-0"]
    assert data[0]["nodes"] == {"running": 1, "min": 2, "max": 4} and data[1]["sweep"] == "grid"
    code, out, _ = cli(["list", "-o", "wide"], kubeconfig, capsys)
    header, first, second = out.splitlines()
    assert header.split() == ["NAME", "STATE", "NODES", "GPU", "ZONE", "AGE", "RESTARTS", "GPU-HOURS", "USD", "MACHINE",
                              "IMAGE", "SWEEP"]
    assert second.split()[-3:] == ["g4dn.xlarge", "r/t:1", "grid"] and first.split()[-1] == "-"


def test_list_as_json_when_empty_is_an_empty_list(api, kubeconfig, capsys):
    api.list_namespaced_custom_object.return_value = {"items": []}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[])
    code, out, _ = cli(["list", "-o", "json"], kubeconfig, capsys)
    assert code == 0 and json.loads(out) == []


# ---------------------------------------------------------------- logs


def test_logs_all_ranks_prefix_each_line(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-10"), pod("resnet-worker-2")])
    api.read_namespaced_pod_log.side_effect = lambda self, name, ns, **k: f"hello from {name}\nbye"
    code, out, _ = cli(["logs", "resnet", "--all-ranks"], kubeconfig, capsys)
    assert code == 0
    assert out.splitlines() == ["[worker-2] hello from resnet-worker-2", "[worker-2] bye",
                                "[worker-10] hello from resnet-worker-10", "[worker-10] bye"]


def test_logs_previous_reads_the_killed_container(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    api.read_namespaced_pod_log.return_value = "before the kill\n"
    code, out, _ = cli(["logs", "resnet", "--previous", "--tail", "5"], kubeconfig, capsys)
    assert code == 0 and out == "before the kill\n"
    api.read_namespaced_pod_log.assert_called_once_with(
        mock.ANY, "resnet-worker-0", "elastic-job", container="elasticjob-worker", tail_lines=5, previous=True,
        _request_timeout=TIMEOUT)


def test_logs_previous_without_a_restart_exits_2(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    api.read_namespaced_pod_log.side_effect = ApiException(status=400, reason="Bad Request")
    code, _, err = cli(["logs", "resnet", "-p"], kubeconfig, capsys)
    assert code == 2 and "--previous: pod resnet-worker-0 has no previous container" in err


def test_logs_follow_all_ranks_interleaves_the_streams(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0"), pod("resnet-worker-1")])

    def stream(self, name, ns, **k):
        response = mock.Mock()
        response.stream.return_value = iter([f"{name} a\n{name} b\n".encode()])
        return response

    api.read_namespaced_pod_log.side_effect = stream
    code, out, _ = cli(["logs", "resnet", "--all-ranks", "-f"], kubeconfig, capsys)
    assert code == 0
    lines = out.splitlines()
    assert sorted(lines) == ["[worker-0] resnet-worker-0 a", "[worker-0] resnet-worker-0 b",
                             "[worker-1] resnet-worker-1 a", "[worker-1] resnet-worker-1 b"]
    assert lines.index("[worker-0] resnet-worker-0 a") < lines.index("[worker-0] resnet-worker-0 b")


def test_logs_rank_and_all_ranks_together_exit_2(api, kubeconfig, capsys):
    code, _, err = cli(["logs", "resnet", "--rank", "1", "--all-ranks"], kubeconfig, capsys)
    assert code == 2 and "--rank 1 and --all-ranks: give one of them" in err
    api.get_namespaced_custom_object.assert_not_called()


# ---------------------------------------------------------------- delete


def test_delete_several_names_reports_the_missing_one(api, kubeconfig, capsys):
    api.delete_namespaced_custom_object.side_effect = lambda self, *a, **k: (
        (_ for _ in ()).throw(not_found()) if a[4] == "ghost" else None)
    code, out, err = cli(["delete", "a", "ghost", "b"], kubeconfig, capsys)
    assert code == 2
    assert "deleted ElasticJob a" in out and "deleted ElasticJob b" in out
    assert "NAME: no ElasticJob 'ghost'" in err
    assert [c.args[5] for c in api.delete_namespaced_custom_object.call_args_list] == ["a", "ghost", "b"]


def test_delete_by_label_deletes_the_matching_jobs_only(api, kubeconfig, capsys):
    jobs = [training_job(name=n) for n in ("grid-0", "grid-1", "other")]
    for j in jobs[:2]:
        j["metadata"]["labels"]["torchfleet.io/sweep"] = "grid"
    api.list_namespaced_custom_object.return_value = {"items": jobs}
    code, _, _ = cli(["delete", "-l", "torchfleet.io/sweep=grid"], kubeconfig, capsys)
    assert code == 0
    api.delete_namespaced_custom_object.assert_has_calls([
        mock.call(mock.ANY, *EJ, "grid-0", propagation_policy="Background", _request_timeout=TIMEOUT),
        mock.call(mock.ANY, *EJ, "grid-1", propagation_policy="Background", _request_timeout=TIMEOUT)])
    assert api.delete_namespaced_custom_object.call_count == 2


def test_delete_all_without_a_terminal_needs_yes(api, kubeconfig, capsys, monkeypatch):
    api.list_namespaced_custom_object.return_value = {"items": [training_job(name="a")]}
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    # Regression (issue 23): refused before connecting; it connected (and could hang on a dead cluster) first
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")):
        code, _, err = cli(["delete", "--all"], kubeconfig, capsys)
    assert code == 2 and "--yes: --all deletes every job in the namespace and there is no terminal" in err
    api.list_namespaced_custom_object.assert_not_called()
    api.delete_namespaced_custom_object.assert_not_called()
    code, out, _ = cli(["delete", "--all", "--yes"], kubeconfig, capsys)
    assert code == 0 and "deleted ElasticJob a" in out


@pytest.mark.parametrize(("answer", "deleted"), [("y\n", 1), ("\n", 0)])
def test_delete_all_asks_on_a_terminal(answer, deleted, api, kubeconfig, capsys, monkeypatch):
    api.list_namespaced_custom_object.return_value = {"items": [training_job(name="a")]}
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdin.readline", lambda: answer)
    code, _, err = cli(["delete", "--all"], kubeconfig, capsys)
    assert "delete all 1 job(s) in namespace elastic-job? [y/N]" in err
    assert (code, api.delete_namespaced_custom_object.call_count) == ((0, 1) if deleted else (2, 0))


DELETE_ERRORS = [
    ("nothing", ["delete"], "NAME: give the jobs to delete as names, --all or -l KEY=VALUE"),
    ("names-and-all", ["delete", "a", "--all"], "got NAME and --all"),
    ("bad-selector", ["delete", "-l", "sweep"], "-l/--selector: expected KEY=VALUE"),
    ("bad-selector-value", ["delete", "-l", "a=b c"], "-l/--selector a: 'b c' cannot be a Kubernetes label value"),
    ("bad-name-among", ["delete", "a", "B"], "NAME: 'B' is not a job name"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in DELETE_ERRORS], ids=[c[0] for c in DELETE_ERRORS])
def test_delete_input_errors_exit_2_before_connecting(argv, expected, api, kubeconfig, capsys):
    code, out, err = cli(argv, kubeconfig, capsys)
    assert (code, out) == (2, "") and expected in err
    api.list_namespaced_custom_object.assert_not_called()
    api.delete_namespaced_custom_object.assert_not_called()


@pytest.mark.parametrize(("text", "parsed"), [
    ("a=b", {"a": "b"}), ("torchfleet.io/sweep==grid, team=x", {"torchfleet.io/sweep": "grid", "team": "x"}),
    ("k=", {"k": ""}),
])
def test_selector_parsing(text, parsed):
    assert inspect_commands.parse_selector(text) == parsed
