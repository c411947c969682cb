"""The launcher's exit codes that decide what the Indexed Job does (torchfleet/jobs/indexed_job.py), on real
torchrun agents and a real etcd.

Regression (issue 19): a script that exits 2 on its arguments was restarted by every agent until
``--max_restarts`` ran out (101 attempts, 2,021 log lines, then exit 1): exit 2 now ends each node at once
with 2, which the job's pod failure policy turns into a failed job.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from elastic_trainer.launcher import EXIT_BAD_INPUT, EXIT_RDZV_UNAVAILABLE
from elastic_trainer.local import IMAGE_DIR, SYNTHETIC_EXAMPLE, free_port


@pytest.mark.slow
def test_a_bad_argument_ends_every_node_at_once_and_fails_the_run_with_2(make_job):
    # What holds at any load. Starting its worker, a node's agent can miss heartbeats for over the 3 s window
    # (load 4 on 2 cores: 2 of 4 runs), and its peer's sync then drops it; it restarts its workers to rejoin
    # (lost_peer.py), and a peer whose worker exited 2 has closed the run meanwhile, so it ends 75, the
    # closed-rendezvous exit. The run still fails with 2 (the Indexed Job's pod failure policy fails the job
    # on the peer's 2), and no node retries the bad argument: each prints the error at most once.
    job = make_job("--total-steps=0", "--global-batch-size=8", nnodes="2:2")  # argparse: must be >= 1
    nodes = [job.start_node(), job.start_node()]
    codes = [node.wait(300) for node in nodes]  # a bound for a loaded machine; one attempt takes seconds
    texts = [node.log_text() for node in nodes]
    report = "\n\n".join(t[-3000:] for t in texts)
    assert EXIT_BAD_INPUT in codes, report
    for code, text in zip(codes, texts, strict=True):
        assert text.count("--total-steps: must be >= 1") <= 1, report  # no restart of a bad argument
        assert "will restart worker group" not in text, report
        if code == EXIT_BAD_INPUT:
            assert "--total-steps: must be >= 1" in text, report
        else:
            assert code == EXIT_RDZV_UNAVAILABLE and "is closed (RendezvousClosedError)" in text, report


@pytest.mark.slow
def test_an_etcd_that_cannot_be_reached_exits_75_to_be_retried(tmp_path):
    # Exit 1 would fail the whole Indexed Job (its pod failure policy: 1-127 are fatal but 75): a node that
    # starts while etcd is down or restarting is worth another pod, and its rendezvous is still open (torch's
    # close on the way out cannot reach etcd either).
    argv = [
        sys.executable,
        "-m",
        "elastic_trainer.launcher",
        "--nnodes=1:1",
        "--nproc_per_node=1",
        f"--rdzv_endpoint=127.0.0.1:{free_port()}",
        "--rdzv_id=unreachable",
        "--local_addr=127.0.0.1",
        str(SYNTHETIC_EXAMPLE),
        "--total-steps=1",
        "--global-batch-size=2",
        f"--checkpoint-dir={tmp_path}",
    ]
    ran = subprocess.run(
        argv,
        cwd=IMAGE_DIR,
        env={"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == EXIT_RDZV_UNAVAILABLE, ran.stderr[-3000:]
    assert "RendezvousConnectionError" in ran.stderr


@pytest.mark.slow
def test_a_run_through_the_launcher_leaves_only_expiring_store_keys(make_job, etcd):
    # Regression (issue 19): torch's etcd-v2 store wrote each round's keys without a TTL (25 keys left
    # after 5 short jobs); the launcher installs rdzv_store_ttl's store, whose keys expire.
    import base64
    import json
    import urllib.request

    job = make_job("--total-steps=2", "--global-batch-size=4", nnodes="1:1")
    node = job.start_node()
    assert node.wait(180) == 0, node.log_text()[-3000:]
    # The run's own store directory (rdzv_store_ttl: /torch/elastic/store/<run id>), without a TTL
    # (etcd 3.5 cannot renew one; etcd-gate's sweep deletes it), its keys each with one.
    url = f"http://{etcd.endpoint}/v2/keys/torch/elastic/store/{job.run_id}?recursive=true"
    with urllib.request.urlopen(url, timeout=10) as answer:
        listing = json.load(answer)
    found = []

    def walk(entry):
        for child in entry.get("nodes") or []:
            walk(child)
        if not entry.get("dir") and "key" in entry:
            name = entry["key"][len(listing["node"]["key"]) + 1 :]
            found.append((base64.b64decode(name).decode(errors="replace"), entry.get("ttl")))

    walk(listing["node"])
    assert listing["node"]["dir"] and "ttl" not in listing["node"], listing
    assert found, listing  # the run wrote its round's keys
    assert all(ttl for _, ttl in found), found


@pytest.mark.slow
def test_a_rendezvous_that_times_out_waiting_for_its_minimum_says_so_and_exits_1(make_job):
    # torch raises RendezvousTimeoutError without a message (fewer than MIN nodes within join_timeout)
    # and closes the rendezvous as its agent leaves, so the exit stays 1 (a retry would meet it closed);
    # the log says what happened. One node of a 2:2 job, alone, with a short join_timeout.
    job = make_job(
        "--total-steps=1",
        "--global-batch-size=2",
        nnodes="2:2",
        rdzv_conf="join_timeout=5,last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3",
    )
    node = job.start_node()
    code = node.wait(300)  # a hang detector: the bound under test is 5 s
    text = node.log_text()
    assert code == 1, text[-3000:]
    assert "rendezvous timed out (RendezvousTimeoutError)" in text and "join_timeout (5 s)" in text, text[-3000:]
