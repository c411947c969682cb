"""`torchfleet submit --recovery inplace` (issue 14): an Indexed Job, its Lighthouse and their policies.

Checked with the real tools: kubernetes-validate (strict) on every document, the restricted Pod
Security level on both pods, checkov, the namespace's own policies plus the job's evaluated for who
reaches the Lighthouse (tests/k8s/netpol.py), and the Lighthouse's command run with the real
torchft_lighthouse binary.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from elastic_trainer import inplace as trainer_inplace
from elastic_trainer.local.inplacerun import lighthouse_binary

from components import spec as platform
from components.kube import K8S_BASE
from tests.k8s.netpol import can_connect
from tests.k8s.pod_security import restricted_problems
from tests.torchfleet.checkov import checkov_results
from tests.torchfleet.test_jobs_checkov import LOCAL_SKIPS, SKIPS
from torchfleet.cli import main
from torchfleet.jobs import inplace_job, manifests
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

K8S_VERSIONS = ["1.30.0", "1.37.0"]  # the oldest Kubernetes supported, the newest schema shipped
IMAGE = "registry.example.com/team/train:1.4.2"
CASES = [
    ("aws-stack-t4", lambda: targets.from_stack("aws-usw2"), dict(gpu="t4", nodes="2:8")),
    ("gcp-stack-l4-zone", lambda: targets.from_stack("gcp-usc1"), dict(gpu="l4", nodes="3", zone="us-central1-a")),
    ("defaults-azure-module", lambda: targets.defaults("azure"),
     dict(gpu="t4", nodes="1:4", command=["python", "-m", "team.train"])),
    ("local-cpu-egress", lambda: targets.from_stack("local"),
     dict(cpu=True, nodes="2:3", allow_egress=["0.0.0.0/0"])),
]


def _documents(case, name="resnet"):
    _, make_target, flags = case
    flags = dict(flags)
    t = make_target()
    req = build_request(t, name=name, image=IMAGE, recovery="inplace", gpus_per_node=None,
                        gpu=flags.pop("gpu", None), command=flags.pop("command", ["python", "train.py"]), **flags)
    return req, t, [manifests.build(req, t), *manifests.owned_documents(req, t)]


def _by_kind(documents):
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


def _pod(obj):
    template = obj["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{obj['metadata']['name']}-0", "namespace": obj["metadata"]["namespace"],
                         **template["metadata"]},
            "spec": template["spec"]}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_document_passes_the_kubernetes_schema(case, version):
    _, _, documents = _documents(case)
    assert [d["kind"] for d in documents][:1] == ["Job"]
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_both_pods_meet_the_restricted_level(case):
    _, _, documents = _documents(case)
    workloads = [d for d in documents if d["kind"] in ("Job", "Deployment")]
    assert len(workloads) == 2
    for workload in workloads:
        assert restricted_problems(workload["spec"]["template"]["spec"]) == []


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_indexed_job_is_what_the_trainer_reads(case):
    req, t, documents = _documents(case)
    job = documents[0]
    spec = job["spec"]
    # completions past what failed and succeeded indexes can reach (indexed_job.py, shell)
    spare = req.max_nodes - req.min_nodes + 1
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", req.max_nodes + spare,
                                                                                  req.max_nodes)
    assert spec["maxFailedIndexes"] == req.max_nodes - req.min_nodes  # goes on while min groups can train
    assert spec["podReplacementPolicy"] == "Failed"  # never two pods claiming one replica group
    # a group exits 0 only after the final checkpoint (test_inplace_runs.py): one success is the job's
    assert spec["successPolicy"] == {"rules": [{"succeededCount": 1}]}
    (container,) = spec["template"]["spec"]["containers"]
    # a reclaimed pod is ignored whatever its exit code: the disruption rule comes first (first match decides)
    ignore, fail_job = spec["podFailurePolicy"]["rules"]
    assert fail_job["onExitCodes"] == {"containerName": container["name"], "operator": "In",
                                       "values": [trainer_inplace.EXIT_BAD_SETTINGS]}
    assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # what a pod failure policy requires
    env = {e["name"]: e.get("value") for e in container["env"]}
    # the variable names the in-place trainer reads (training-image/elastic_trainer/inplace/settings.py)
    service = _by_kind(documents)["Service", f"{req.name}-lighthouse"]
    assert env[trainer_inplace.ENV_RECOVERY] == "inplace"
    assert env[trainer_inplace.ENV_LIGHTHOUSE] == (
        f"http://{service['metadata']['name']}.{t.namespace}.svc:{service['spec']['ports'][0]['port']}")
    assert env[trainer_inplace.ENV_GROUPS] == str(req.max_nodes)
    assert env[trainer_inplace.ENV_MIN_GROUPS] == str(req.min_nodes)
    assert trainer_inplace.ENV_GROUP not in env  # Kubernetes sets JOB_COMPLETION_INDEX, which the trainer reads
    assert container["args"][0] == "--nproc_per_node=1" and "ports" not in container
    assert manifests.min_max(job) == (req.min_nodes, req.max_nodes)
    assert manifests.container_name(job) == container["name"]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_lighthouse_runs_on_the_cpu_pool_and_its_service_finds_it(case):
    req, t, documents = _documents(case)
    found = _by_kind(documents)
    deployment = found["Deployment", f"{req.name}-lighthouse"]
    service = found["Service", f"{req.name}-lighthouse"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two Lighthouses, two quorums
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    # not a training pod: the job's own any-port policy and the namespace's etcd access do not apply to it
    assert platform.LABEL_JOB not in pod["metadata"]["labels"] and platform.LABEL_ROLE not in pod["metadata"]["labels"]
    selector = pod["spec"].get("nodeSelector")
    if t.cloud == "local":
        assert selector is None
    else:
        # The job's image: never beside etcd on the manager pool (issue 30), never on a tainted GPU node.
        assert selector == {platform.LABEL_POOL: platform.CPU_POOL_NAME}
        spot = [{**platform.AKS_SPOT_TAINT, "operator": "Equal"}] if t.cloud == "azure" else []  # a spot cpuPool
        assert pod["spec"]["tolerations"] == [{**platform.CPU_TAINT, "operator": "Equal"}, *spot]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == req.image  # the job's image has torchft at the workers' version


def _namespace_policies():
    return [yaml.safe_load(p.read_text()) for p in sorted((K8S_BASE / "policies").glob("*.yaml"))]


def test_only_the_jobs_own_pods_reach_its_lighthouse():
    _, _, job_a = _documents(CASES[0], name="job-a")
    _, _, job_b = _documents(CASES[0], name="job-b")
    policies = _namespace_policies() + job_a + job_b
    worker_a = _pod(job_a[0])["metadata"]["labels"]
    worker_b = _pod(job_b[0])["metadata"]["labels"]
    lighthouse_a = _by_kind(job_a)["Deployment", "job-a-lighthouse"]["spec"]["template"]["metadata"]["labels"]
    etcd = {"app.kubernetes.io/name": "etcd"}
    port = inplace_job.LIGHTHOUSE_PORT
    assert can_connect(policies, worker_a, lighthouse_a, port)
    assert not can_connect(policies, worker_a, lighthouse_a, 22)  # its port only
    assert not can_connect(policies, worker_b, lighthouse_a, port)  # another job's pods: refused
    assert not can_connect(policies, lighthouse_a, worker_a, 29500)  # the Lighthouse reaches nobody
    gate = {"app.kubernetes.io/name": "etcd-gate"}
    assert not can_connect(policies, lighthouse_a, etcd, 2379)
    assert not can_connect(policies, lighthouse_a, gate, 2379)
    assert can_connect(policies, worker_a, dict(worker_a), 29500)  # peers heal from each other on any port
    assert not can_connect(policies, worker_a, worker_b, 29500)
    # training pods reach the rendezvous through the etcd gate only (issue 30), never etcd itself
    assert can_connect(policies, worker_a, gate, 2379)
    assert not can_connect(policies, worker_a, etcd, 2379)


def test_checkov_passes_on_the_inplace_documents(tmp_path):
    workers, lighthouse = tmp_path / "workers", tmp_path / "lighthouse"
    workers.mkdir()
    lighthouse.mkdir()
    for case in (CASES[0], CASES[3]):
        _, _, documents = _documents(case, name=f"ckv-{case[0]}")
        job, *owned = documents
        (workers / f"{case[0]}.yaml").write_text(yaml.safe_dump_all([_pod(job), *owned[:2]], sort_keys=False))
        (lighthouse / f"{case[0]}.yaml").write_text(yaml.safe_dump_all(owned, sort_keys=False))
    # A worker pod skips what does not fit training (test_jobs_checkov.py); the Lighthouse is a
    # server with probes, a CPU limit and a read-only root: only the image digest skip applies.
    results = {"Pod": checkov_results(workers, SKIPS), "Deployment": checkov_results(lighthouse, ["CKV_K8S_43"])}
    failed = [f"{c['check_id']} {c['check_name']} ({c['resource']})" for kind, found in results.items()
              for r in found for c in r.get("failed_checks", [])
              if not (c["check_id"] in LOCAL_SKIPS and "local-cpu" in c["resource"])]
    assert failed == []
    for kind, found in results.items():
        scanned = {c["resource"] for r in found for c in r.get("passed_checks", []) if c["resource"].startswith(kind)}
        assert len(scanned) == 2, (kind, scanned)  # both cases' workloads were scanned


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_lighthouse_command_starts_the_real_lighthouse_without_torch():
    """The Deployment's command, run by this project's Python and torchft; only the address is local.

    Regression (issue 19): the Lighthouse ran `torchft_lighthouse`, whose import of torchft imports
    torch (584 MiB peak RSS with the CUDA wheel, bench/lighthouse_memory.py): its 256Mi limit would
    have OOM-killed it. Its resident memory must stay far below the limit it is given.
    """
    import sys

    assert lighthouse_binary(), "torchft is missing: the dev extra installs it"
    _, _, documents = _documents(CASES[0])
    deployment = _by_kind(documents)["Deployment", "resnet-lighthouse"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = list(container["command"])
    assert command[:3] == ["python", "-c", inplace_job.LIGHTHOUSE_MAIN]
    port = _free_port()
    (bind,) = [i for i, arg in enumerate(command) if arg.startswith("--bind=")]
    assert command[bind].endswith(f":{container['ports'][0]['containerPort']}")
    command[bind] = f"--bind=127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, *command[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")  # flags refused: it exits
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Lighthouse never listened"
                time.sleep(0.1)
        status = dict(line.split(":", 1) for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines())
        peak_kib = int(status["VmHWM"].split()[0])
        limit = container["resources"]["limits"]["memory"]
        assert limit.endswith("Mi") and peak_kib < int(limit[:-2]) * 1024 / 4, (peak_kib, limit)
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- the command line


def _cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


SUBMIT = ["submit", "resnet", "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "2:4", "--image", IMAGE,
          "--recovery", "inplace", "--dry-run", "--", "python", "train.py"]


def test_dry_run_prints_the_job_and_everything_it_owns(capsys):
    code, out, err = _cli(SUBMIT, capsys)
    assert code == 0, err
    kinds = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out)]
    assert kinds == [("Job", "resnet"), ("NetworkPolicy", "job-resnet"), ("NetworkPolicy", "job-resnet-lighthouse"),
                     ("Service", "resnet-lighthouse"), ("Deployment", "resnet-lighthouse")]


def test_more_than_one_gpu_per_node_is_refused_naming_the_flag(capsys):
    code, out, err = _cli([*SUBMIT[:-3], "--gpus-per-node", "2", *SUBMIT[-3:]], capsys)
    assert code == 2 and out == ""
    assert "--gpus-per-node: --recovery inplace runs one training process per node" in err


def test_an_unknown_recovery_mode_exits_2_listing_the_modes(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*SUBMIT[:-6], "--recovery", "both", *SUBMIT[-4:]])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --recovery: invalid choice: 'both'" in err and "restart" in err and "inplace" in err


def test_a_job_file_with_an_unknown_recovery_mode_exits_2_naming_the_key(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(f"name: resnet\ngpu: t4\nimage: {IMAGE}\nrecovery: fast\ncommand: python train.py\n")
    code, out, err = _cli(["submit", "-f", str(path), "--dry-run"], capsys)
    assert code == 2 and out == ""
    assert f"{path}: recovery: one of restart, inplace, got 'fast'" in err


def test_a_name_too_long_for_the_lighthouse_service_is_refused(capsys):
    longest_ok = "a" * (63 - len("-lighthouse"))
    assert _cli(["submit", longest_ok, *SUBMIT[2:]], capsys)[0] == 0
    code, _, err = _cli(["submit", longest_ok + "b", *SUBMIT[2:]], capsys)
    assert code == 2 and "its Lighthouse Service is <job>-lighthouse and must fit 63 characters" in err
    assert f"at most {len(longest_ok)} characters" in err


def test_the_job_file_keeps_the_recovery_mode(tmp_path, capsys):
    code, job_file, err = _cli([*SUBMIT[:-3], "-o", "job", *SUBMIT[-3:]], capsys)
    assert code == 0, err
    assert yaml.safe_load(job_file)["recovery"] == "inplace"
    path = tmp_path / "job.yaml"
    path.write_text(job_file)
    from_flags = _cli(SUBMIT, capsys)[1]
    code, from_file, err = _cli(["submit", "-f", str(path), "--dry-run"], capsys)
    assert code == 0, err
    assert from_file == from_flags


def test_restart_stays_the_default(capsys):
    flags = [a for a in SUBMIT if a not in ("--recovery", "inplace")]
    code, out, _ = _cli(flags, capsys)
    assert code == 0
    documents = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in documents] == ["Job", "NetworkPolicy"]  # the stack's operator: job
    assert documents[0]["metadata"]["labels"]["torchfleet.io/recovery"] == "restart"


def test_the_operator_flag_does_not_change_an_inplace_job(capsys):
    out = {op: _cli([*SUBMIT[:-3], "--operator", op, *SUBMIT[-3:]], capsys)[1] for op in platform.OPERATORS}
    assert len(set(out.values())) == 1  # no operator is involved


def test_the_target_namespace_reaches_every_document(capsys):
    _, t, documents = _documents(CASES[0])
    t2 = replace(t, namespace="team-a")
    req = build_request(t2, name="resnet", image=IMAGE, recovery="inplace", gpu="t4", nodes="2:8",
                        gpus_per_node=None, command=["python", "train.py"])
    documents = [manifests.build(req, t2), *manifests.owned_documents(req, t2)]
    assert {d["metadata"]["namespace"] for d in documents} == {"team-a"}
    env = {e["name"]: e.get("value") for e in documents[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TORCHFT_LIGHTHOUSE"] == "http://resnet-lighthouse.team-a.svc:29510"


# ---------------------------------------------------------------- the pods, run as processes


def _events(text: str, kind: str) -> list[dict]:
    return [json.loads(line.split("@@tf ", 1)[1]) for line in text.splitlines()
            if line.startswith("@@tf ") and f'"ev": "{kind}"' in line]


# A pod's process with its imports done ahead of its entrypoint: argv is READY GO MODULE ARGS...;
# it imports torch and torchft, creates READY, waits for GO, then runs MODULE as `python -m` would.
HELD_START = """
import runpy, sys, time
from pathlib import Path
import torch, torchft
ready, go, module, *args = sys.argv[1:]
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.05)
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_the_submitted_pods_train_and_heal_against_the_submitted_lighthouse(tmp_path):
    """What `submit --recovery inplace` creates, run as local processes: the Lighthouse from the
    Deployment's command, the pods from the Job's container (its command, args and environment;
    JOB_COMPLETION_INDEX and POD_IP as Kubernetes sets them, each pod its own address). Only the
    Lighthouse's address and the store's path are made local. Group 0 trains alone (--nodes 1:2),
    group 1 joins later and heals from group 0 at its advertised pod IP, and both finish.

    Group 1's process starts first and holds before its entrypoint runs, torch and torchft
    imported: at load 16 its imports took longer than group 0's whole run, which then ended before
    group 1 joined (the race this test must not depend on). Released once group 0 trains, it needs
    only to reach the Lighthouse, a short fraction of group 0's 300 steps at any load."""
    import os
    import sys

    from elastic_trainer.local import IMAGE_DIR

    total = 300  # 15 s at least: group 1 starts (torch import and all) long before group 0 is done
    command = ["python", "examples/synthetic.py", f"--total-steps={total}", "--global-batch-size=32",
               "--checkpoint-every=10", "--step-delay-s=0.05"]
    t = targets.from_stack("local")
    req = build_request(t, name="pair", image=IMAGE, recovery="inplace", cpu=True, gpu=None, gpus_per_node=None,
                        nodes="1:2", command=command)
    job, *owned = [manifests.build(req, t), *manifests.owned_documents(req, t)]
    (lighthouse,) = _by_kind(owned)["Deployment", "pair-lighthouse"]["spec"]["template"]["spec"]["containers"]
    port = _free_port()
    assert lighthouse["command"][0] == "python"
    lighthouse_cmd = [sys.executable, *(f"--bind=127.0.0.1:{port}" if a.startswith("--bind=") else a
                                        for a in lighthouse["command"][1:])]
    (worker,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in worker["env"] if "value" in e}
    env = {k: v.replace(req.job_dir, str(tmp_path / "pair")) for k, v in env.items()}  # the shared store
    env["TORCHFT_LIGHTHOUSE"] = f"http://127.0.0.1:{port}"
    assert [e["valueFrom"]["fieldRef"]["fieldPath"] for e in worker["env"] if e["name"] == "POD_IP"] == [
        "status.podIP"]
    assert worker["command"][:1] == ["python"]
    pod_argv = [sys.executable, *worker["command"][1:], *worker["args"]]
    procs = [subprocess.Popen(lighthouse_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    logs = [tmp_path / f"pod-{index}.log" for index in range(req.max_nodes)]

    assert pod_argv[1] == "-m", pod_argv  # the pod runs a module, which the held start runs in place
    ready, go = tmp_path / "group-1.imported", tmp_path / "group-1.go"
    held_start = [sys.executable, "-c", HELD_START, str(ready), str(go), *pod_argv[2:]]

    def start_pod(index: int, argv: list[str]) -> subprocess.Popen:
        pod_env = {**os.environ, **env, "JOB_COMPLETION_INDEX": str(index), "POD_IP": f"127.0.0.{2 + index}",
                   "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(IMAGE_DIR),
                   "RUST_LOG": "error"}
        with logs[index].open("w") as log:
            return subprocess.Popen(argv, cwd=IMAGE_DIR, env=pod_env, stdout=log, stderr=subprocess.STDOUT)

    def wait_until(done, what: str, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + 180
        while not done():
            assert proc.poll() is None, f"{what}: exited {proc.returncode}\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{what}: not after 180 s\n{log.read_text()[-3000:]}"
            time.sleep(0.2)

    try:
        group1 = start_pod(1, held_start)  # a replacement, or a node the autoscaler brought late
        procs.append(group1)
        wait_until(ready.exists, "group 1's imports", group1, logs[1])
        group0 = start_pod(0, pod_argv)
        procs.append(group0)
        wait_until(lambda: [e for e in _events(logs[0].read_text(), "step") if e["step"] >= 5],
                   "group 0's fifth step", group0, logs[0])
        go.touch()
        codes = [group0.wait(timeout=180), group1.wait(timeout=180)]
        texts = [log.read_text() for log in logs]
        assert codes == [0, 0], "\n\n".join(t[-3000:] for t in texts)
        for text in texts:
            assert [e["step"] for e in _events(text, "done")] == [total], text[-3000:]
        # group 1 healed from group 0's live state (over the pod IP it advertises), not from the store
        assert _events(texts[1], "healed") and not _events(texts[1], "resumed"), texts[1][-3000:]
        assert {e["world"] for e in _events(texts[0], "step")} == {1, 2}, texts[0][-3000:]
        # after the step it healed at (its own quorum then held only itself), it trains with group 0
        assert {e["world"] for e in _events(texts[1], "step")[1:]} == {2}, texts[1][-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
