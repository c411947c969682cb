"""The body of `torchfleet run --local`: start the nodes, kill and replace them on the schedule, tell the timeline.

The processes come from the training image's harness (elastic_trainer/local/localrun.py for restart mode,
inplacerun.py in-place) and the timeline, the fail-fast watch and the closing status view are
`torchfleet demo`'s (torchfleet/local_nodes.py), so a user's run and the demo behave and read alike.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from torchfleet import local_nodes
from torchfleet.jobs import summary

# A node that starts after the job's last step finds its rendezvous closed and exits with the launcher's
# EXIT_RDZV_UNAVAILABLE (training-image/elastic_trainer/launcher.py): it lost nothing.
LATE_NODE_EXIT = 75
ENV_OUTPUT_DIR = "TORCHFLEET_OUTPUT_DIR"  # elastic_trainer.train_config.ENV_OUTPUT_DIR, as a job's pods get it
OUTPUT_FOLDER = "output"  # the run folder's output/, as a job's folder on the shared store has it
PROGRESS_EVERY_S = 30.0  # a progress line this often while training goes on between the timeline's events
UNBOUNDED_S = 1e6  # a wait without a deadline (a real script may train for hours): Ctrl-C ends it
RECOVERY_TIMEOUT_S = 600  # a kill not followed by a step of the survivors within this is a failure


@dataclass
class Schedule:
    nodes: int
    every_s: float | None  # kill after each this long of training with every node
    at_steps: list[int] = field(default_factory=list)  # kill when training reaches each
    replace_after_s: float = 2.0
    kills: int = 0

    def next_slot(self) -> int:
        """The slot to kill next: the last first (as the demo kills node1), then round the others."""
        return (self.nodes - 1 - self.kills) % self.nodes


def hold_env(recovery: str, nodes: int, total: int | None, killing: bool) -> dict[str, str]:
    """When training waits for every node (the trainer's HOLD_FOR_WORLD, "<step>:<world>").

    Restart mode: before step 1, rather than training alone while the others start up and then
    restarting for them (on a loaded machine the first steps at world size 1 outran the schedule).
    In place a group holding at step 0 deadlocks with one joining it (inplacerun.py's min_groups):
    there, as in the demo, survivors wait before the last quarter of the steps for a replacement,
    so a kill is followed by a heal rather than by the end of the job."""
    if recovery == "restart":
        return {"TORCHFLEET_HOLD_FOR_WORLD": f"1:{nodes}"}
    if killing and total and total >= 4:
        return {"TORCHFLEET_HOLD_FOR_WORLD": f"{total - total // 4}:{nodes}"}
    return {}


def run(recovery: str, name: str, workdir: Path, script: Path, script_args: list[str], schedule: Schedule,
        record) -> int:
    timeline = local_nodes.Timeline()
    total = summary.total_steps_from_args(script_args)
    env = hold_env(recovery, schedule.nodes, total, schedule.every_s is not None or bool(schedule.at_steps))
    # The final model exported as a cluster job's is ($TORCHFLEET_OUTPUT_DIR, pod_template.py), into the run's
    # folder: `torchfleet cp :output/model DEST --local FOLDER` takes it (issue 32: a local run exported nothing)
    env[ENV_OUTPUT_DIR] = str((workdir / OUTPUT_FOLDER).absolute())
    if recovery == "inplace":
        from elastic_trainer.local import InplaceJob

        with InplaceJob(workdir, script_args, groups=schedule.nodes, script=script, checkpoint_flag=False,
                        extra_env=env) as job:
            timeline.say(f"torchft Lighthouse on {job.lighthouse.address}; {schedule.nodes} replica groups, "
                         "1 worker each")
            nodes = _Nodes(job, record, lambda slot, index: job.start_group(slot, name=f"group{slot}-{index}"))
            return local_nodes.run_watched(job, _with_exits(local_nodes.watch_inplace_groups),
                                    lambda killed: _timeline(job, nodes, killed, schedule, timeline, total, True),
                                    command="run")
    from elastic_trainer.launch.rdzvconf import format_rdzv_conf, rdzv_conf_for_nodes
    from elastic_trainer.local import Etcd, LocalJob

    # The launcher's rendezvous settings for this size, as a cluster job of the same --nodes gets them
    # (elastic_trainer's rdzvconf.py). This ran with the 16-node ones (3 s heartbeats) after 1 s heartbeats
    # split the rendezvous at load 9-11. Measured here with the README's command and the defaults: in 2 of 4
    # runs at load 3-11 the second node missed the rounds and the first finished alone (exit 1), and in 3 of
    # them the lone first node had dropped itself while starting its worker; since a node keeps its own
    # heartbeat (lost_peer.py), 5 of 5 at load 9-15 trained together, the survivor's next step 4.8-6.4 s
    # after the kill (11.6-13.1 s with the 16-node settings, 5 runs interleaved with them).
    conf = format_rdzv_conf(rdzv_conf_for_nodes(schedule.nodes))
    with Etcd() as etcd, LocalJob(etcd_endpoint=etcd.endpoint, run_id=f"{name}-{time.time_ns() % 10**8}",
                                  workdir=workdir, script_args=script_args, nnodes=f"1:{schedule.nodes}",
                                  script=script, rdzv_conf=conf, checkpoint_flag=False, extra_env=env) as job:
        timeline.say(f"etcd (v2 API) on {etcd.endpoint}; rendezvous {conf}")
        nodes = _Nodes(job, record, lambda slot, index: job.start_node(f"node{index}"))
        return local_nodes.run_watched(job, _with_exits(local_nodes.watch_restart_nodes),
                                lambda killed: _timeline(job, nodes, killed, schedule, timeline, total, False),
                                command="run")


class _Nodes:
    """The live node of each slot; a replacement takes the slot of the node it replaces."""

    def __init__(self, job, record, start) -> None:
        self.job, self.record, self._start = job, record, start
        self.by_slot: dict = {}
        self.late: set[str] = set()  # replacements that started as the job ended

    def start(self, slot: int):
        node = self._start(slot, len(self.job.nodes))
        self.by_slot[slot] = node
        self.record.node_started(node, slot)
        return node


def _with_exits(watch):
    """The demo's watch until the job's last step (a replacement that starts after it exits 75, and
    loses nothing), and one more failure: every node exited without that last step, as a script that
    prints no progress events does (the timeline would otherwise wait for ever)."""
    def watched(job, killed, stop) -> None:
        until_done = threading.Event()
        threading.Thread(target=watch, args=(job, killed, until_done), daemon=True).start()
        try:
            _exits(job, killed, stop)
        finally:
            until_done.set()
    return watched


def _exits(job, killed, stop) -> None:
    while not stop.wait(1.0):
        live = [n for n in job.nodes if n.name not in killed]
        if any(e.kind == "done" for e in job.events.snapshot()):
            return
        if live and all(n.proc is not None and n.proc.poll() == 0 for n in live):
            job.events.fail(live[-1], "and every other node exited (code 0) before the trainer reported its "
                            "last step: the timeline reads the progress events of elastic_trainer "
                            "(training-image/examples/train.py is a template)")
            return


def _step(job, since: float, world: int, timeout: float = UNBOUNDED_S, describe: str = "", hold: bool = False):
    """The first step at ``world`` after ``since``, or the job's end (whenever it came: a job that finished
    while a replacement started waited here the whole RECOVERY_TIMEOUT_S, then failed); with ``hold``, or a
    group waiting before step 1 for every node (HOLD_FOR_WORLD)."""

    def match(e) -> bool:
        if e.kind == "done":
            return True
        return e.t > since and ((hold and e.kind == "hold") or (e.kind == "step" and e["world"] == world))

    return job.events.wait_for(match, timeout, describe=describe or f"a step at world size {world}")


def _trigger(job, schedule: Schedule, since: float):
    """Wait for the next kill (None) or the end of training (its ``done`` event)."""
    if schedule.every_s is not None:
        try:
            return job.events.wait_for(lambda e: e.kind == "done", schedule.every_s)  # ended before ``since`` too
        except TimeoutError:
            return None
    if schedule.kills < len(schedule.at_steps):
        at = schedule.at_steps[schedule.kills]
        event = job.events.wait_for(lambda e: e.kind == "done" or (e.kind == "step" and e["step"] >= at), UNBOUNDED_S)
        return event if event.kind == "done" else None
    return job.events.wait_for(lambda e: e.kind == "done", UNBOUNDED_S, describe="the job's last step")


def _timeline(job, nodes: _Nodes, killed: set[str], schedule: Schedule, timeline, total, inplace: bool) -> int:
    n, what = schedule.nodes, "groups" if inplace else "nodes"
    # The first node's worker up before the others start, as pods seldom start in the same second: N
    # nodes importing torch at once on a loaded machine stalled a heartbeat past its expiry, and the
    # rendezvous split into two groups of one (seen here at load 9 on 2 cores).
    first_node = nodes.start(0)
    timeline.say(f"started {first_node.name} ({'an in-place node' if inplace else 'a torchrun agent'}, 1 worker)")
    if n > 1:
        up = job.events.wait_for(lambda e: e.node == first_node.name, RECOVERY_TIMEOUT_S,
                                 describe=f"from {first_node.name} (its trainer's first progress event)")
        for slot in range(1, n):
            nodes.start(slot)
        timeline.say(f"{first_node.name}'s worker is up; started {', '.join(node.name for node in job.nodes[1:])}",
                     up.t)
    first = _step(job, 0.0, n, RECOVERY_TIMEOUT_S, describe=f"a step with all {n} {what}")
    if first.kind == "done":
        timeline.say(f"finished before all {n} {what} trained together", first.t)
    else:
        timeline.say(f"training with {n} {what} (step {first['step']})", first.t)
    since = first.t
    quiet = threading.Event()
    threading.Thread(target=_progress, args=(job, timeline, total, quiet), name="run-progress", daemon=True).start()
    threading.Thread(target=_schedule_rebuilt, args=(job, timeline), name="run-schedule", daemon=True).start()
    try:
        while first.kind != "done" and _trigger(job, schedule, since) is None:
            since = _kill_and_replace(job, nodes, killed, schedule, timeline, inplace, first["step"])
        done = job.events.wait_for(lambda e: e.kind == "done", UNBOUNDED_S, describe="the job's last step")
    finally:
        quiet.set()
    codes = {node.name: node.wait(60) for node in job.nodes if node.name not in killed}
    for node_name, code in codes.items():
        nodes.record.node_exited(node_name, code)
    timeline.say(f"finished: all {done['step']} steps; exit codes {codes}", done.t)
    # Exit 75 after the job's last step is the launcher's "the rendezvous closed without this node"
    # (elastic_trainer/launch/agent.py EXIT_RDZV_UNAVAILABLE): a replacement, or a first node that joined
    # too late, lost nothing. It failed a run that had trained every step, with no word why (issue 32).
    late = {name for name, code in codes.items() if code == LATE_NODE_EXIT}
    for name in sorted(late - nodes.late):
        print(f"{name} exited {LATE_NODE_EXIT}: the job had finished without it and closed its rendezvous "
              "(it lost nothing)")
    missed = missed_kill(schedule, first if first.kind != "done" else None, done, "groups" if inplace else "nodes")
    if missed:
        print(missed)
    print(f"\n{schedule.kills} kill(s); logs and checkpoints in {nodes.record.path.parent}")
    print("\nas `torchfleet status` shows it:\n" + local_nodes.status_view(job.events.snapshot(), total))
    return 0 if all(code == 0 or name in late for name, code in codes.items()) else 1


def missed_kill(schedule: Schedule, together, done, what: str = "nodes") -> str | None:
    """Why a kill asked for never happened, or None: the run ended before it, or before every node
    trained together (a kill waits for that). ``together`` is the first step with every node, or None."""
    if schedule.every_s is not None:
        if schedule.kills:
            return None
        asked = f"the kill after {schedule.every_s:g} s of training with every node (--kill-every)"
    elif schedule.kills < len(schedule.at_steps):
        asked = f"the kill at step {schedule.at_steps[schedule.kills]} (--kill-at)"
    else:
        return None
    if together is None:
        why = f"the run ended at step {done['step']} before all {schedule.nodes} {what} trained together"
    elif schedule.every_s is not None:
        why = f"the run ended at step {done['step']}, {done.t - together.t:.0f} s after all {schedule.nodes} " \
              f"{what} trained together (step {together['step']})"
    else:
        why = f"the run ended at step {done['step']} before it"
    return (f"no kill: {asked} never happened: {why}. To see one, give the script slower steps (the template's "
            f"--step-delay-s=0.1, as the README's command has) or more of them, or kill earlier")


def schedule_line(event) -> str:
    """The trainer's ``schedule_rebuilt`` (elastic_trainer/schedule.py) as the run's output says it."""
    was = event["was_total_steps"]
    return (f"extending: the learning-rate schedule is rebuilt for --total-steps={event['total_steps']} at step "
            f"{event['step']} (the checkpoint's was for {f'--total-steps={was}' if was else 'another total'}; "
            "the script's --schedule-on-extend=keep keeps the saved one)")


def _schedule_rebuilt(job, timeline) -> None:
    """Say once that an extended run's schedule was rebuilt (each in-place group's rank 0 reports it)."""
    event = job.events.wait_for(lambda e: e.kind == "schedule_rebuilt", UNBOUNDED_S)
    timeline.say(schedule_line(event), event.t)


def _progress(job, timeline, total: int | None, quiet: threading.Event) -> None:
    """A line with the step, loss, speed and world size every PROGRESS_EVERY_S, so a long run between
    kills is not silent (the same figures as the status view: jobs/summary.py)."""
    shown = None
    while not quiet.wait(PROGRESS_EVERY_S):
        found = summary.summarize([e.data for e in job.events.snapshot()], total)
        if found.step is None or found.step == shown or found.done:
            continue
        shown = found.step
        of = f" of {total}" if total else ""
        loss = f", loss {found.loss:.4g}" if found.loss is not None else ""
        speed = f", {found.steps_per_s:.2f} steps/s" if found.steps_per_s else ""
        timeline.say(f"step {found.step}{of}{loss}{speed}, world size {found.world}")


def kill_moved(schedule: Schedule, killed_step: int, together_step: int, what: str = "nodes") -> str:
    """Why a --kill-at kill came at a later step than asked, as words to add to the kill's line, or "" (issue
    32, a second fresh walk: `--kill-at 60` printed `killed group1-1 at step 97` and nothing else).
    ``together_step`` is the first step every node trained at; a kill waits for it (_timeline)."""
    asked = schedule.at_steps[schedule.kills - 1] if 0 < schedule.kills <= len(schedule.at_steps) else None
    if schedule.every_s is not None or asked is None or killed_step <= asked:
        return ""
    if together_step >= asked:
        return (f" (--kill-at {asked} moved: a kill waits until all {schedule.nodes} {what} train together, "
                f"which first happened at step {together_step})")
    return (f" (--kill-at {asked} moved: the run reads steps from the node logs and kills when it sees step {asked}; "
            f"training had gone on to step {killed_step} by then)")


def _kill_and_replace(job, nodes: _Nodes, killed: set[str], schedule: Schedule, timeline, inplace: bool,
                      together_step: int = 0):
    """One kill: the whole tree of the slot's node, the survivors' next step, the replacement's join."""
    from elastic_trainer.local import descendants

    slot = schedule.next_slot()
    victim = nodes.by_slot[slot]
    schedule.kills += 1
    n = schedule.nodes
    tree = [victim.pid, *descendants(victim.pid)]
    survivors = [node for node in nodes.by_slot.values() if node is not victim]
    workers = {node.name: job.workers(node) for node in survivors} if inplace else {}
    last = max((e["step"] for e in job.events.snapshot() if e.kind == "step"), default=0)
    killed.add(victim.name)
    killed_at = victim.kill()
    nodes.record.node_killed(victim.name)
    parts = "in-place node, worker" if inplace else "torchrun agent, forkserver, worker"
    timeline.say(f"killed {victim.name} at step {last}: SIGKILL of its whole process tree (pids "
                 f"{' '.join(map(str, tree))}: {parts}), like a spot reclaim"
                 f"{kill_moved(schedule, last, together_step, 'groups' if inplace else 'nodes')}", killed_at)
    went_on = _step(job, killed_at, n - 1, RECOVERY_TIMEOUT_S, f"a step of the {n - 1} survivor(s) after the kill",
                    hold=True)
    if went_on.kind == "hold":  # no checkpoint yet: the survivors start again from step 0 and wait for all
        timeline.say(f"the {n - 1} survivor(s) restarted from scratch (no checkpoint yet) and wait for "
                     f"all {n} {'groups' if inplace else 'nodes'}", went_on.t)
    elif went_on.kind == "step":
        restarts = [e for e in job.events.snapshot() if e.kind == "resumed" and killed_at < e.t <= went_on.t]
        if inplace:
            same = all(job.workers(node) == workers[node.name] for node in survivors)
            how = "in the same worker processes (nothing restarted)" if same else "after a worker RESTART"
        elif restarts:
            how = f"from the checkpoint of step {restarts[-1]['step']} (the workers restarted)"
        else:
            how = "from scratch (no checkpoint yet)"
        timeline.say(f"went on with {n - 1} at step {went_on['step']}, {went_on.t - killed_at:.1f} s after the kill, "
                     f"{how}", went_on.t)
    time.sleep(schedule.replace_after_s)
    replacement = nodes.start(slot)
    timeline.say(f"started {replacement.name} as the replacement", replacement.started_at)
    joined = _step(job, replacement.started_at, n, RECOVERY_TIMEOUT_S, f"a step with all {n} again")
    if joined.kind == "done":
        nodes.late.add(replacement.name)
        timeline.say(f"the job finished before {replacement.name} could join", joined.t)
        return joined.t
    timeline.say(f"{n} again at step {joined['step']}, {joined.t - replacement.started_at:.1f} s after "
                 f"{replacement.name} started", joined.t)
    return joined.t
