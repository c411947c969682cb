"""One replica group: the fault-tolerant wrapper's step overhead and heal times (``goodput.py --overhead``, issue 14).

    python bench/goodput.py --overhead --json            # on a GPU: the 368M GPT task, bf16 where native
    python bench/goodput.py --overhead --quick --json    # the tiny GPT task, any machine (a CPU here)

The issue's GPU part: NCCL refuses two ranks on one GPU, so a GPU run has one replica group
(docs/recovery-modes.md; its figures: docs/benchmarks.md). Everything runs the image's real code: the example
script's task (``examples/gpt.py``, ``--task=resnet`` for ``examples/imagenet.py``, which needs
torchvision), the in-place trainer under the launcher, and a real ``torchft_lighthouse``.

- ``throughput``: steps per second of (a) the **bare loop**, the in-place trainer's step without
  torchft, in its own process: the same model, optimizer, scheduler, the group's sampler slice and
  collation, on the same device, no quorum, no collective, no commit vote, no synchronisation
  until the timed steps end; and (b) the **in-place trainer** as a job runs it (one group, the
  Lighthouse, ``--progress-every=1``: a step event per step), timed from its step events.
  Alternated, ``--repeats`` times each, so a drift of a shared machine hits both; ``ratio`` is
  the medians' quotient (the issue's target on a GPU: >= 0.95), ``paired_ratios`` each run's
  against the bare run before it, and ``*_cpu_ms_per_step`` the processes' CPU time per step
  (all threads: torchft's quorum thread and servers too), which a shared machine moves less.
  Neither loop uses data-loader workers (the in-place trainer collates on its main thread);
  the restart mode's trainer against a bare loop with workers is ``bench/gpu.py``'s throughput.
- ``heal_from_store``: the group's worker SIGKILLed halfway between two checkpoints; its node
  starts it again, and with no peer alive it loads the newest checkpoint of the shared store:
  kill -> ``resumed`` -> next committed step, and the steps redone (those since that checkpoint).
- ``heal_from_peer``: two groups on the one device, one group's node SIGKILLed (a lost pod) and a
  replacement started once the Lighthouse has dropped it: the survivor's next step, and the
  replacement's start -> ``healed`` (the live state copied from its peer over torchft's HTTP
  transport, never read from the store) -> first step trained with the peer. How it is sound on
  one GPU: the two groups' gradient all-reduce runs over gloo (``TORCHFLEET_INPLACE_BACKEND=gloo``;
  torch's gloo reduces CUDA tensors through host memory) because NCCL will not put two ranks on
  one GPU. The heal itself, what this part measures, does not go through that collective: the
  replacement's imports and CUDA start, its join at the Lighthouse, the peer's GPU state
  serialised and sent over HTTP, and loaded onto the GPU are the same code a two-node job runs.
  What differs: the peer's steps share the GPU with the replacement's start (it contends for the
  same device, so the figure is an upper bound), and the step rate of this part, which is not
  reported. A second group on the CPU would heal a CPU state instead: not the GPU heal at all.

Prints one JSON object (``--json``: only it, on stdout). The machine's load is printed with it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parents[1] / "training-image"
sys.path.insert(0, str(IMAGE_DIR))

from elastic_trainer.local import Event, kill_tree  # noqa: E402
from elastic_trainer.local.inplacerun import HEARTBEAT_TIMEOUT_MS, InplaceJob  # noqa: E402

TIMEOUT = 600
TARGET_RATIO = 0.95  # issue 14: the wrapper's steps per second against the bare loop's, on a GPU
TASKS = ("gpt", "resnet")


@dataclass(frozen=True)
class Workload:
    name: str
    script: str  # under training-image/examples
    args: tuple[str, ...]
    steps: int  # per throughput run, the first ``warmup`` untimed
    warmup: int
    checkpoint_every: int  # of the heal runs: the store heal redoes up to this many steps
    state_gb: float = 0.0  # model and optimizer state, roughly


def workload(task: str, quick: bool) -> Workload:
    """The task of the runs. ``quick``: sizes a CPU steps through in tens of milliseconds, so that a
    step is not so small that the per-step quorum round trip is all there is to measure."""
    if task == "gpt":
        if quick:
            return Workload("gpt tiny", "gpt.py", ("--size=tiny", "--samples=512", "--global-batch-size=64"),
                            200, 20, 10)
        return Workload("gpt 368m", "gpt.py", ("--size=368m", "--samples=256", "--global-batch-size=16"),
                        120, 20, 50, state_gb=4.4)
    if quick:
        return Workload("resnet18 32px", "imagenet.py", ("--synthetic-images=256", "--image-size=32",
                        "--num-classes=10", "--arch=resnet18", "--global-batch-size=32"), 100, 20, 10)
    return Workload("resnet50", "imagenet.py", ("--synthetic-images=1024", "--image-size=224", "--num-classes=1000",
                    "--arch=resnet50", "--global-batch-size=256"), 120, 20, 50)


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMAGE_DIR), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"  # as InplaceJob's nodes: the same threads for both loops
    return env


def machine() -> dict:
    """Device and versions, asked in a child (this process holds no CUDA context)."""
    code = ("import json, torch\ncuda = torch.cuda.is_available()\n"
            "print(json.dumps({'device': torch.cuda.get_device_name(0) if cuda else 'cpu', 'cuda': cuda,"
            " 'torch': torch.__version__}))")
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the bare loop (its own process: ``goodput.py --bare-loop SPEC``) ------------------------------
def bare_loop(spec: dict) -> dict:
    """The in-place trainer's step (inplace.py ``_run``) without torchft: what the wrapper is measured against."""
    import torch
    from elastic_trainer.data.sampler import ElasticBatchSampler
    from task_script import load_task
    from torch.utils.data import default_collate

    steps, warmup = spec["steps"], spec["warmup"]
    task, cfg, device = load_task(spec)
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    torch.manual_seed(cfg.seed)
    model = task.build_model().to(device)
    optimizer = task.build_optimizer(model)
    scheduler = task.build_scheduler(optimizer, steps)
    sampler = ElasticBatchSampler(len(task.dataset), cfg.global_batch_size, 0, 1, cfg.seed, total_steps=steps)
    model.train()
    timed_from = cpu_from = 0.0
    for step in range(steps):
        if step == warmup:
            sync()
            timed_from, cpu_from = time.perf_counter(), time.process_time()
        optimizer.zero_grad(set_to_none=True)
        indices = sampler.batch(step)
        batch = default_collate([task.dataset[i] for i in indices])
        loss = task.loss_sum(model, batch, device)
        (loss / len(indices)).backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    sync()
    return {"steps_per_s": round((steps - warmup) / (time.perf_counter() - timed_from), 3),
            "cpu_ms_per_step": round((time.process_time() - cpu_from) * 1000 / (steps - warmup), 3)}


def bare_rate(work: Workload) -> dict:
    spec = {"script": str(IMAGE_DIR / "examples" / work.script), "args": list(work.args), "steps": work.steps,
            "warmup": work.warmup}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("goodput.py")), "--bare-loop",
                          json.dumps(spec)], env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    if out.returncode != 0:
        raise RuntimeError(f"bare loop failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the in-place trainer ----------------------------------------------------------------------
def rate_from_steps(events: list[Event], warmup: int, last: int) -> float:
    """Steps per second from ``warmup`` to ``last``, by the step events' arrival (one group's)."""
    times = {e["step"]: e.t for e in events if e.kind == "step"}
    missing = [s for s in (warmup, last) if s not in times]
    if missing:
        raise ValueError(f"no step event for step(s) {missing}: --progress-every must be 1")
    return round((last - warmup) / (times[last] - times[warmup]), 3)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (torchft's quorum thread and servers too)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inplace_rate(work: Workload, workdir: Path) -> dict:
    """Steps per second from the step events; CPU time per step of the worker process, read when the
    first and last timed steps' events arrive (Linux /proc; the Lighthouse, another process, is left out)."""
    job = InplaceJob(workdir / f"rate-{uuid.uuid4().hex[:6]}",
                     [*work.args, f"--total-steps={work.steps + 5}", "--checkpoint-every=100000000",
                      "--progress-every=1"], groups=1, script=IMAGE_DIR / "examples" / work.script)
    with job:
        node = job.start_group(0)
        cpu = []
        for step in (work.warmup, work.steps):
            job.events.wait_for(lambda e, s=step: e.kind == "step" and e["step"] == s, TIMEOUT,
                                describe=f"step {step}")
            cpu.append(sum(cpu_seconds(pid) for pid in job.workers(node)))
        job.events.wait_for(lambda e: e.kind == "done", TIMEOUT, describe="the job done")
        node.wait(TIMEOUT)
        return {"steps_per_s": rate_from_steps(job.events.snapshot(), work.warmup, work.steps),
                "cpu_ms_per_step": round((cpu[1] - cpu[0]) * 1000 / (work.steps - work.warmup), 3)}


def throughput(work: Workload, workdir: Path, repeats: int, quiet: bool) -> dict:
    bare, inplace = [], []
    for _ in range(repeats):  # alternated
        bare.append(bare_rate(work))
        inplace.append(inplace_rate(work, workdir))
        _say(quiet, f"  bare {bare[-1]}, in-place {inplace[-1]}")
    return summarize_throughput(bare, inplace, work)


def summarize_throughput(bare_runs: list[dict], inplace_runs: list[dict], work: Workload) -> dict:
    """Medians, their ratio and the samples. ``cpu_ms_per_step``: what a step costs the CPU; on a
    machine shared with other work it moves far less than the rates (a step waits for a core)."""
    bare = [r["steps_per_s"] for r in bare_runs]
    inplace = [r["steps_per_s"] for r in inplace_runs]
    bare_cpu = [r["cpu_ms_per_step"] for r in bare_runs]
    inplace_cpu = [r["cpu_ms_per_step"] for r in inplace_runs]
    ratio = round(statistics.median(inplace) / statistics.median(bare), 4)
    # each in-place run over the bare run just before it: what a drift of a shared machine leaves alone
    paired = [round(i / b, 4) for b, i in zip(bare, inplace, strict=True)]
    return {"bare_steps_per_s": _median(bare), "inplace_steps_per_s": _median(inplace), "ratio": ratio,
            "paired_ratios": paired,
            "bare_cpu_ms_per_step": _median(bare_cpu), "inplace_cpu_ms_per_step": _median(inplace_cpu),
            "target": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO,
            "step_overhead_ms": round(1000 / statistics.median(inplace) - 1000 / statistics.median(bare), 3),
            "steps_timed": work.steps - work.warmup,
            "samples": {"bare_steps_per_s": bare, "inplace_steps_per_s": inplace, "bare_cpu_ms_per_step": bare_cpu,
                        "inplace_cpu_ms_per_step": inplace_cpu}}


# -- heals ---------------------------------------------------------------------------------------
def heal_job(work: Workload, workdir: Path, groups: int, **env: str) -> InplaceJob:
    if work.state_gb >= 1:
        # torchft's heal transfer and the gloo all-reduce of a multi-GB state take longer than the
        # default 10 s a collective or a heal may take (inplace.py TORCHFLEET_INPLACE_TIMEOUT_S)
        env.setdefault("TORCHFLEET_INPLACE_TIMEOUT_S", "120")
    return InplaceJob(workdir / f"heal{groups}-{uuid.uuid4().hex[:6]}",
                      [*work.args, "--total-steps=100000000", f"--checkpoint-every={work.checkpoint_every}",
                       "--keep-checkpoints=2", "--progress-every=1"],
                      groups=groups, script=IMAGE_DIR / "examples" / work.script, extra_env=env)


def store_heal_sample(events: list[Event], killed_at: float) -> dict:
    """kill -> the new worker's ``resumed`` -> its first step after it, and the committed steps redone.

    The killed worker's last lines can still arrive after ``killed_at`` (a pipe): its last step is
    the highest before ``resumed``, which the new worker emits after a 0.5 s restart pause.
    """
    resumed = next((e for e in events if e.kind == "resumed" and e.t > killed_at), None)
    if resumed is None:
        return {"kill_to_resumed_s": None, "kill_to_next_step_s": None, "redone_steps": None}
    step = next((e for e in events if e.kind == "step" and e.t > resumed.t), None)
    last = max((e["step"] for e in events if e.kind == "step" and e.t < resumed.t), default=0)
    return {"kill_to_resumed_s": round(resumed.t - killed_at, 3),
            "kill_to_next_step_s": round(step.t - killed_at, 3) if step else None,
            "redone_steps": max(0, last - resumed["step"]), "resumed_step": resumed["step"],
            "source": resumed.data.get("source")}


def heal_from_store(work: Workload, workdir: Path, repeats: int, quiet: bool) -> dict:
    samples = []
    with heal_job(work, workdir, 1) as job:
        node = job.start_group(0)
        for _ in range(repeats):
            # killed halfway between two checkpoints: the steps redone are those a kill at a random
            # moment redoes on average (checkpoint_every / 2)
            saved = job.events.wait_for(lambda e: e.kind == "ckpt", TIMEOUT, time.monotonic(), describe="a checkpoint")
            at = saved["step"] + work.checkpoint_every // 2
            job.events.wait_for(lambda e, s=at: e.kind == "step" and e["step"] >= s, TIMEOUT, saved.t,
                                describe=f"step {at}")
            pids = job.workers(node)
            killed_at = time.monotonic()
            for pid in pids:
                kill_tree(pid)
            resumed = job.events.wait_for(lambda e: e.kind == "resumed", TIMEOUT, killed_at, describe="resumed")
            job.events.wait_for(lambda e: e.kind == "step", TIMEOUT, resumed.t, describe="a step after the resume")
            samples.append(store_heal_sample(job.events.snapshot(), killed_at))
            _say(quiet, f"  from the store: {samples[-1]}")
    return {"kill_to_next_step_s": _median([s["kill_to_next_step_s"] for s in samples if s["kill_to_next_step_s"]]),
            "kill_to_resumed_s": _median([s["kill_to_resumed_s"] for s in samples if s["kill_to_resumed_s"]]),
            "redone_steps": sum(s["redone_steps"] or 0 for s in samples), "checkpoint_every": work.checkpoint_every,
            "samples": samples}


def peer_heal_sample(events: list[Event], node: str, killed_at: float, started_at: float) -> dict:
    """The survivor's next step after a kill; the replacement ``node``'s start -> healed -> first step with
    its peer; whether it read the store (it must not: a store read emits ``resumed`` or ``start``)."""
    survivor = next((e for e in events if e.kind == "step" and e.t > killed_at and e["world"] == 1
                     and e.node != node), None)
    mine = [e for e in events if e.node == node]
    healed = next((e for e in mine if e.kind == "healed"), None)
    joined = next((e for e in mine if e.kind == "step" and e["world"] == 2), None)
    return {"survivor_next_step_s": round(survivor.t - killed_at, 3) if survivor else None,
            "start_to_healed_s": round(healed.t - started_at, 3) if healed else None,
            "start_to_step_with_peer_s": round(joined.t - started_at, 3) if joined else None,
            "read_store": any(e.kind in ("resumed", "start") for e in mine)}


def heal_from_peer(work: Workload, workdir: Path, repeats: int, quiet: bool) -> dict:
    samples = []
    # gloo for the all-reduce: two NCCL ranks on one GPU are refused (the module docstring)
    with heal_job(work, workdir, 2, TORCHFLEET_INPLACE_BACKEND="gloo") as job:
        nodes = {0: job.start_group(0), 1: job.start_group(1)}
        job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 2, TIMEOUT, describe="a step of 2 groups")
        for i in range(repeats):
            killed_at = nodes[1].kill()
            nodes[1].wait(TIMEOUT)
            job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 1, TIMEOUT, killed_at,
                                describe="the survivor's step")
            # a replacement pod is scheduled later than the Lighthouse takes to drop the dead group
            time.sleep(HEARTBEAT_TIMEOUT_MS / 1000 + 0.5)
            name = f"replacement{i}"
            nodes[1] = job.start_group(1, name=name)
            job.events.wait_for(lambda e, n=name: e.kind == "step" and e["world"] == 2 and e.node == n, TIMEOUT,
                                nodes[1].started_at, describe="the replacement's step with its peer")
            samples.append(peer_heal_sample(job.events.snapshot(), name, killed_at, nodes[1].started_at))
            _say(quiet, f"  from a peer: {samples[-1]}")
    return {
        "survivor_next_step_s": _median([s["survivor_next_step_s"] for s in samples if s["survivor_next_step_s"]]),
        "start_to_healed_s": _median([s["start_to_healed_s"] for s in samples if s["start_to_healed_s"]]),
        "start_to_step_with_peer_s": _median([s["start_to_step_with_peer_s"] for s in samples
                                              if s["start_to_step_with_peer_s"]]),
        "read_store": any(s["read_store"] for s in samples), "collective": "gloo (two groups on one device)",
        "samples": samples,
    }


def run(task: str, quick: bool, repeats: int, workdir: Path, quiet: bool) -> dict:
    work = workload(task, quick)
    load_before = os.getloadavg()
    report: dict = {"bench": "overhead", "task": work.name, "quick": quick, "repeats": repeats, **machine(),
                    "date": time.strftime("%Y-%m-%d", time.gmtime()), "statistic": "median"}
    started = time.monotonic()
    _say(quiet, f"throughput: {work.name}, bare loop against the in-place trainer (one group)")
    report["throughput"] = throughput(work, workdir, repeats, quiet)
    _say(quiet, "heal from the store: the group's worker SIGKILLed, no peer")
    report["heal_from_store"] = heal_from_store(work, workdir, repeats, quiet)
    _say(quiet, "heal from a peer: two groups on the one device")
    report["heal_from_peer"] = heal_from_peer(work, workdir, repeats, quiet)
    report["bench_s"] = round(time.monotonic() - started, 1)
    report["load_avg"] = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
    report["cpus"] = os.cpu_count()
    return report
