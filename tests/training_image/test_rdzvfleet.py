"""Rendezvous at the seeds' scale (issue 15): torch's etcd-v2 handler in one small process per node.

The slow tests are the real thing: one process per node on loopback, one etcd, the launcher's
settings for the job's size. Figures come from bench/rendezvous.py; the bounds here only say
"formed, and in reasonable time on CI's 2-core machine".
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import pytest
from elastic_trainer.launch.rdzvconf import rdzv_conf_for_nodes
from elastic_trainer.local import IMAGE_DIR
from elastic_trainer.local.rdzvfleet import NodeHost, RdzvJob, RendezvousFailed, _formed_round
from elastic_trainer.local.rdzvnode import _PrefixStore


def formed(node: str, t: float, rnd: int, world: int) -> dict:
    return {"ev": "formed", "node": node, "t": t, "round": rnd, "world": world}


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([formed("a", 1, 0, 2), formed("b", 2, 0, 2)], {"round": 0, "t": 2, "rounds": 1, "partial_rounds": 0}),
        ([formed("a", 1, 0, 2)], None),  # b has not joined
        ([formed("a", 1, 0, 2), formed("b", 2, 1, 2)], None),  # different rounds
        ([formed("a", 1, 0, 1), formed("b", 2, 1, 2), formed("a", 3, 1, 2)],
         {"round": 1, "t": 3, "rounds": 2, "partial_rounds": 1}),  # a formed alone first, then both
        ([formed("a", 1, 0, 2), formed("b", 2, 0, 2), {"ev": "restart", "node": "b", "t": 3}], None),  # b re-entered
        ([formed("a", 0.5, 0, 2), formed("b", 2, 0, 2)], None),  # a's event is older than the phase
    ],
)
def test_a_round_counts_when_every_node_is_in_it(events, expected):
    assert _formed_round(events, ["a", "b"], world=2, since=1) == expected


def test_a_handler_error_fails_the_wait_at_once():
    events = [formed("a", 1, 0, 2), {"ev": "error", "node": "b", "t": 2, "error": "RendezvousTimeoutError: x"}]
    with pytest.raises(RendezvousFailed, match="b: RendezvousTimeoutError"):
        _formed_round(events, ["a", "b"], world=2, since=0)


def test_prefix_store_prefixes_keys_as_c10d_does():
    class Recorder:
        def __init__(self) -> None:
            self.keys: list[str] = []

        def set(self, key, value):
            self.keys.append(key)

        def get(self, key):
            self.keys.append(key)
            return b"v"

    inner = Recorder()
    store = _PrefixStore("torch.rendezvous.job.3", inner)
    store.set("MASTER_ADDR", b"x")
    assert store.get("MASTER_PORT") == b"v"
    assert inner.keys == ["torch.rendezvous.job.3/MASTER_ADDR", "torch.rendezvous.job.3/MASTER_PORT"]


def test_the_handler_loads_without_torchs_library():
    # 64 processes that each imported torch would need ~14 GB here; the handler alone needs ~25 MB
    # VmRSS, not ru_maxrss: Linux keeps the high-water mark across exec, so it would count the forked pytest
    code = ("import sys, pathlib\nfrom elastic_trainer.local.rdzvnode import load_rendezvous\n"
            "api, dynamic, backend = load_rendezvous()\n"
            "rss = [l.split()[1] for l in pathlib.Path('/proc/self/status').read_text().splitlines()"
            " if l.startswith('VmRSS:')][0]\n"
            "print(dynamic.DynamicRendezvousHandler.__module__, 'torch._C' in sys.modules, rss)\n")
    ran = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    module, loaded_c, rss_kb = ran.stdout.split()
    assert module == "torch.distributed.elastic.rendezvous.dynamic_rendezvous"  # torch's own code
    assert loaded_c == "False"
    assert int(rss_kb) < 60_000


@pytest.fixture
def host(tmp_path, request):
    with NodeHost(tmp_path / "host.log") as node_host:
        yield node_host
        if getattr(request.node, "rep_call", None) and request.node.rep_call.failed:
            print((tmp_path / "host.log").read_text()[-6000:])


def _job(host: NodeHost, etcd, nodes: int, min_nodes: int) -> RdzvJob:
    return RdzvJob(host, f"t{nodes}-{uuid.uuid4().hex[:8]}", [etcd.endpoint], min_nodes, nodes,
                   rdzv_conf_for_nodes(nodes))


# A hang detector, not a speed bound: these form in seconds here (about 9 s for both tests alone),
# while issue 15's 2-node settings (1 s heartbeats) formed 0 of 32 nodes in 200 s, twice, and still
# do not form within this. Formation seconds and how often a live node was declared dead are
# figures (bench/rendezvous.py), not asserts: on a starved machine a keep-alive can land later than
# keep_alive_interval x keep_alive_max_attempt, a live node is then declared dead (torch's
# _sanitize, on the declarer's clock) and rejoins in a later round, so "never declared dead" does
# not hold at every load (28 declarations at load average 10 on 2 cores, every job formed in 6 s).
# 300 s: in a clean-clone CI run (2026-11-29, two xdist workers beside it) a round of 32 formed with 31
# of its nodes reporting it within 120 s, the last one's own report later; issue 15's settings never form.
HANG_S = 300


@pytest.mark.slow
def test_a_32_node_job_forms_with_the_launchers_settings(etcd, host):
    # Issue 15: with the 2-node settings (1 s heartbeats) 32 nodes formed 0/32 in 200 s, twice.
    job = _job(host, etcd, 32, min_nodes=16)
    host.spawn(job.start(32))
    since = host.signal(job.live, signal.SIGUSR1)
    # every node in one round of 32, none with a handler error (wait_formed raises RendezvousFailed)
    job.wait_formed(since, timeout=HANG_S)


@pytest.mark.slow
def test_twenty_jobs_of_four_share_one_etcd_without_a_failed_round(etcd, host):
    jobs = [_job(host, etcd, 4, min_nodes=2) for _ in range(20)]
    host.spawn([request for job in jobs for request in job.start(4)])
    since = host.signal([name for job in jobs for name in job.live], signal.SIGUSR1)
    formed = [job.wait_formed(since, timeout=HANG_S) for job in jobs]
    # a spot interruption in every job at once: each job's 3 survivors re-form, in a later round, without it
    kills = [job.kill_one() for job in jobs]
    for job, first, (victim, killed_at) in zip(jobs, formed, kills, strict=True):
        again = job.wait_formed(killed_at, timeout=HANG_S)
        assert again["round"] > first["round"], (job.run_id, victim, first, again)
