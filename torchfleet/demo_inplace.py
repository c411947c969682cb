"""`torchfleet demo --recovery inplace`: the same spot interruption, with survivors that never restart.

No cloud, no Kubernetes and no etcd: a real torchft Lighthouse on a free loopback port and two
replica groups, each the training image's launcher in in-place mode (what a pod of a
``submit --recovery inplace`` job runs), training the synthetic example on CPU with gloo. One
group's whole process tree is killed, as a spot reclaim would; the survivor goes on in the same
process; a replacement heals from it (live weights over HTTP, not the shared store). The harness
is the one the in-place tests and bench/goodput.py use (training-image/elastic_trainer/local/inplacerun.py).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from torchfleet.local_nodes import Timeline, checkpoints_note, run_watched, status_view, watch_inplace_groups


def run_demo(args: argparse.Namespace, workdir: Path, timeline: Timeline) -> int:
    from elastic_trainer.local.inplacerun import InplaceJob

    every = args.checkpoint_every
    script_args = [f"--total-steps={args.steps}", "--global-batch-size=32", f"--checkpoint-every={every}",
                   f"--step-delay-s={args.step_delay}"]
    # The survivor holds before the last quarter of the steps until the replacement is in its quorum,
    # as the restart demo's node0 does (demo.py): on a loaded machine it finished first in 2 of 4 runs
    # (issue 23), and the replacement then only read the final checkpoint.
    hold = {"TORCHFLEET_HOLD_FOR_WORLD": f"{args.steps - args.steps // 4}:2"}
    with InplaceJob(workdir, script_args, groups=2, extra_env=hold) as job:
        timeline.say(f"torchft Lighthouse on {job.lighthouse.address}; 2 replica groups, 1 worker each")
        return run_watched(job, watch_inplace_groups, lambda killed: _timeline(args, job, killed, timeline))


# Each wait of the demo covers a phase of seconds (a worker's start, the Lighthouse's 1 s heartbeat
# timeout, a heal); 120 s is several times the slowest seen on a 2-core machine at a load average of 9
# (32 s to the first step, 23 s to a join) and, unlike the 300-600 s it was, ends a hang with the demo's
# own message and the logs' ends (local_nodes.run_watched) before the in-place demo test's 300 s (issue 23).
WAIT_S = 120


def _step(job, since: float, world: int, node: str | None = None, timeout: float = WAIT_S):
    return job.events.wait_for(
        lambda e: e.kind == "step" and e["world"] == world and (node is None or e.node == node), timeout, since,
        describe=f"a step with {world} group(s)" + (f" on {node}" if node else ""))


def _timeline(args: argparse.Namespace, job, killed: set[str], timeline: Timeline) -> int:
    every = args.checkpoint_every
    survivor, victim = job.start_group(0), job.start_group(1)
    timeline.say(f"started {survivor.name} and {victim.name} (in-place nodes; no rendezvous)")
    first = _step(job, 0.0, world=2)
    timeline.say(f"training with 2 groups (step {first['step']})", first.t)
    target = first["step"] + every + every // 2  # mid checkpoint interval: restart mode would lose steps here
    job.events.wait_for(lambda e: e.kind == "step" and e["step"] >= target, WAIT_S, describe=f"step {target}")

    workers = job.workers(survivor)
    last = max(e["step"] for e in job.steps(survivor.name))
    killed.add(victim.name)
    killed_at = victim.kill()
    timeline.say(f"killed {victim.name} at step {last} (SIGKILL of its process tree, like a spot reclaim)",
                 killed_at)
    went_on = _step(job, killed_at, world=1, node=survivor.name)
    redone = max(0, last + 1 - went_on["step"])
    same = job.workers(survivor) == workers
    timeline.say(f"{survivor.name} went on alone at step {went_on['step']}, {went_on.t - killed_at:.1f} s after "
                 f"the kill, in the same worker process ({'nothing restarted' if same else 'RESTARTED'}); "
                 f"{redone} steps to redo", went_on.t)

    time.sleep(2)
    replacement = job.start_group(1, name="group1-replacement")
    timeline.say(f"started {replacement.name} as the replacement", replacement.started_at)
    joined = job.events.wait_for(
        lambda e: e.t > replacement.started_at and (e.kind == "done" or (e.kind == "step" and e["world"] == 2)),
        WAIT_S, describe="the replacement training with the survivor")
    healed = [e for e in job.events.snapshot() if e.node == replacement.name and e.kind == "healed"]
    read_store = [e for e in job.events.snapshot() if e.node == replacement.name and e.kind == "resumed"]
    if joined.kind == "done":
        timeline.say("the job finished before the replacement could join: try a larger --steps", joined.t)
    else:
        source = "the shared store" if read_store else f"{survivor.name}'s live state (no checkpoint read)"
        at = f"at step {healed[0]['step']} " if healed else ""
        timeline.say(f"{replacement.name} healed {at}from {source}; 2 groups again at step {joined['step']}, "
                     f"{joined.t - replacement.started_at:.1f} s after it started", joined.t)
    done = job.events.wait_for(lambda e: e.kind == "done", WAIT_S, describe="the job's last step")
    codes = {node.name: node.wait(60) for node in job.nodes if node is not victim}
    timeline.say(f"finished: all {done['step']} steps; exit codes {codes}", done.t)
    print(f"\nthe survivor's next step {went_on.t - killed_at:.1f} s after the kill, {redone} steps redone, "
          f"replacement training in {joined.t - replacement.started_at:.1f} s; (for the loss of the whole job) "
          + checkpoints_note(args.workdir, job.checkpoint_dir))
    print("\nas `torchfleet status` shows it:\n" + status_view(job.events.snapshot(), args.steps))
    ok = same and joined.kind == "step" and not read_store and all(code == 0 for code in codes.values())
    return 0 if ok else 1
