"""GPU figures of the training image (a benchmark, not a timed test): issue 11's table in one run.

    python bench/gpu.py > gpu.json                     # on a GPU machine: ResNet-50 and the 368M GPT task
    python bench/gpu.py --quick                        # tiny sizes, any machine (a CPU here)
    python bench/gpu.py --only throughput,imports      # a part of it (each part starts its own jobs)

Prints one JSON object. Every job is the image's launcher and trainer on one node (etcd-v2;
NCCL refuses two ranks on one GPU), on in-memory synthetic data, so no dataset is needed:

- ``throughput``: the trainer against a bare training loop of the same task (same model,
  optimizer, loss, batch and loader workers; no elastic anything, no per-step synchronisation),
  ResNet-50 in fp32 and in bf16 autocast + channels_last (needs torchvision; bf16 needs a GPU that
  computes it natively) and the GPT task; samples per second and their ratio;
- ``checkpoint``: how long each periodic checkpoint blocks training (the trainer's ``ckpt`` event,
  and the stall seen between step events), and that as a share of training time at the default
  cadence (``--checkpoint-every`` 50), for ResNet-50 (~200 MB state) and the 368M GPT (4.4 GB);
- ``recovery``: a node's first start -> first step, a worker SIGKILLed -> its agent's new worker
  takes the next step, a replacement node start -> first step (after the dead node's heartbeat
  has expired), SIGTERM -> the stop checkpoint committed;
- ``imports``: ``import torch`` and ``import torchvision`` in fresh interpreters, and the bare
  loop's first batch and first step: the parts of a fresh worker's start.

Rows that cannot run here (no CUDA, no torchvision) say why instead of a figure. etcd: the
``etcd`` on PATH, ``--etcd-binary`` or ``TORCHFLEET_ETCD_BINARY``; torch's etcd-v2 rendezvous needs
python-etcd importable (put its folder on PYTHONPATH where it is not installed). Uses the harness
in training-image/elastic_trainer/local/localrun.py, as bench/recovery.py does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parents[1] / "training-image"
sys.path.insert(0, str(IMAGE_DIR))

from elastic_trainer.launch.rdzvconf import TUNED_RDZV_CONF  # noqa: E402
from elastic_trainer.local import (  # noqa: E402
    ENV_ETCD_BINARY,
    Etcd,
    LocalJob,
    etcd_binary,
    kill_tree,
    sigterm_and_checkpoint,
    worker_pids,
)
from elastic_trainer.trainer import TrainConfig  # noqa: E402

DEFAULT_CADENCE = TrainConfig.__dataclass_fields__["checkpoint_every"].default
# a dead node's rendezvous heartbeat expires after interval x attempts; a replacement pod is
# scheduled later than that in practice, so the join is timed from a start after the expiry
HEARTBEAT_S = int(TUNED_RDZV_CONF["keep_alive_interval"]) * int(TUNED_RDZV_CONF["keep_alive_max_attempt"])
TIMEOUT = 600
PARTS = ("throughput", "checkpoint", "recovery", "imports")


@dataclass(frozen=True)
class Workload:
    name: str
    script: str  # under training-image/examples
    args: tuple[str, ...]
    batch: int
    needs_torchvision: bool = False
    precisions: dict[str, tuple[str, ...]] = field(default_factory=lambda: {"auto": ("--precision=auto",)})


def workloads(quick: bool) -> dict[str, Workload]:
    images = {"fp32": ("--precision=fp32", "--no-channels-last"), "bf16": ("--precision=bf16", "--channels-last")}
    if quick:
        return {
            "resnet": Workload("resnet18 32px", "imagenet.py", ("--synthetic-images=64", "--image-size=32",
                               "--num-classes=10", "--arch=resnet18", "--global-batch-size=8", "--num-workers=2"),
                               8, True, images),
            "gpt": Workload("gpt tiny", "gpt.py", ("--size=tiny", "--samples=256", "--global-batch-size=8"), 8),
        }
    return {
        # issue 11's measurements: ResNet-50, global batch 256, 6 loader workers, in-memory images
        "resnet": Workload("resnet50", "imagenet.py", ("--synthetic-images=1024", "--image-size=224",
                           "--num-classes=1000", "--arch=resnet50", "--global-batch-size=256", "--num-workers=6"),
                           256, True, images),
        "gpt": Workload("gpt 368m", "gpt.py", ("--size=368m", "--samples=256", "--global-batch-size=16"), 16),
    }


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def _machine() -> dict:
    """The device and versions, asked in a child: this process must not hold a CUDA context."""
    code = ("import json, torch\nfrom elastic_trainer.precision import bf16_native\n"
            "cuda = torch.cuda.is_available()\n"
            "print(json.dumps({'device': torch.cuda.get_device_name(0) if cuda else 'cpu', 'cuda': cuda,"
            " 'bf16_native': bf16_native(), 'torch': torch.__version__, 'cuda_version': torch.version.cuda}))")
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMAGE_DIR), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class Bench:
    def __init__(self, etcd: Etcd, workdir: Path, quick: bool) -> None:
        self.etcd, self.workdir, self.quick = etcd, workdir, quick

    def job(self, work: Workload, *args: str, name: str) -> LocalJob:
        return LocalJob(etcd_endpoint=self.etcd.endpoint, run_id=f"gpu-{name}-{uuid.uuid4().hex[:6]}",
                        workdir=self.workdir / f"{name}-{uuid.uuid4().hex[:6]}", script_args=[*work.args, *args],
                        nnodes="1:1", script=IMAGE_DIR / "examples" / work.script)

    # -- throughput -------------------------------------------------------------------------
    def trainer_rate(self, work: Workload, precision: tuple[str, ...], steps: int, warmup: int) -> float:
        job = self.job(work, *precision, f"--total-steps={steps}", "--checkpoint-every=1000000",
                       "--progress-every=1", name="rate")
        with job:
            node = job.start_node()
            job.wait_for("done", TIMEOUT)
            node.wait(TIMEOUT)
        times = {e["step"]: e.t for e in job.steps()}
        return round((steps - warmup) * work.batch / (times[steps] - times[warmup]), 2)

    def bare_rate(self, work: Workload, precision: tuple[str, ...], steps: int, warmup: int) -> dict:
        spec = {"script": str(IMAGE_DIR / "examples" / work.script), "args": [*work.args, *precision],
                "steps": steps, "warmup": warmup}
        out = subprocess.run([sys.executable, __file__, "--bare-loop", json.dumps(spec)], env=_env(),
                             capture_output=True, text=True, timeout=TIMEOUT)
        if out.returncode != 0:
            raise RuntimeError(f"bare loop failed: {out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def throughput(self, work: Workload, skip: dict[str, str], repeats: int) -> dict:
        steps, warmup = (12, 4) if self.quick else (60, 15)
        result: dict = {"task": work.name, "global_batch": work.batch, "steps_timed": steps - warmup}
        for label, precision in work.precisions.items():
            if label in skip:
                result[label] = {"skipped": skip[label]}
                continue
            trainer, bare = [], []
            for _ in range(repeats):  # alternated, so a drift of the machine hits both alike
                trainer.append(self.trainer_rate(work, precision, steps, warmup))
                bare.append(self.bare_rate(work, precision, steps, warmup)["per_s"])
            _say(f"  {work.name} {label}: trainer {trainer} /s, bare loop {bare} /s")
            result[label] = {"trainer_per_s": _median(trainer), "bare_per_s": _median(bare),
                             "ratio": round(statistics.median(trainer) / statistics.median(bare), 3),
                             "samples": {"trainer_per_s": trainer, "bare_per_s": bare}}
        return result

    # -- checkpoint blocking ----------------------------------------------------------------
    def checkpoint(self, work: Workload, every: int, count: int) -> dict:
        steps = every * count + 2
        job = self.job(work, f"--total-steps={steps}", f"--checkpoint-every={every}", "--keep-checkpoints=2",
                       "--progress-every=1", name="ckpt")
        with job:
            node = job.start_node()
            job.wait_for("done", TIMEOUT)
            node.wait(TIMEOUT)
        times = {e["step"]: e.t for e in job.steps()}
        ckpts = [e for e in job.events.snapshot() if e.kind == "ckpt" and e["reason"] == "periodic"]
        at = {e["step"] for e in ckpts}
        # the step event comes before that step's checkpoint: the interval after it holds the stall
        plain = [times[s + 1] - times[s] for s in range(2, steps) if s not in at and s + 1 in times]
        step_s = statistics.median(plain)
        blocked = [float(e.data.get("blocked_s", e.data.get("seconds"))) for e in ckpts]
        observed = [times[s + 1] - times[s] - step_s for s in sorted(at) if s + 1 in times]
        size = max((sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
                    for p in job.checkpoint_dir.glob("ckpt-*")), default=0)
        return {
            "task": work.name, "state_bytes": size, "step_s": round(step_s, 4),
            "blocked_s": _median(blocked), "stall_observed_s": _median(observed),
            "write_s": _median([float(e["write_s"]) for e in ckpts if "write_s" in e.data]),
            "waited_for_previous_s": _median([float(e["waited_s"]) for e in ckpts if "waited_s" in e.data]),
            "checkpoint_every": every,
            f"overhead_at_every_{DEFAULT_CADENCE}": round(statistics.median(blocked) / (DEFAULT_CADENCE * step_s), 4),
            # the same from the step events alone (the trainer's own figure not trusted)
            f"overhead_observed_at_every_{DEFAULT_CADENCE}": round(
                statistics.median(observed) / (DEFAULT_CADENCE * step_s), 4) if observed else None,
            "async": any("blocked_s" in e.data for e in ckpts),
            "samples": {"blocked_s": blocked, "stall_observed_s": [round(x, 4) for x in observed]},
        }

    # -- recovery ---------------------------------------------------------------------------
    def recovery(self, work: Workload, repeats: int) -> dict:
        every = 5 if self.quick else DEFAULT_CADENCE
        job = self.job(work, "--total-steps=100000000", f"--checkpoint-every={every}", "--progress-every=1",
                       "--keep-checkpoints=2", name="recovery")
        firsts, restarts, restarts_resumed, joins, joins_resumed = [], [], [], [], []
        with job:
            node = job.start_node("node0")
            first = job.events.wait_for(lambda e: e.kind == "step", TIMEOUT, describe="first step")
            firsts.append(round(first.t - node.started_at, 3))
            job.wait_for("ckpt", TIMEOUT)  # so every restart below resumes from a checkpoint
            for _ in range(repeats):
                pids = worker_pids(node.pid)
                killed_at = time.monotonic()
                for pid in pids:
                    kill_tree(pid)
                resumed = job.wait_for("resumed", TIMEOUT, since=killed_at)
                # after "resumed": the killed worker's last lines can still be arriving after the kill
                step = job.events.wait_for(lambda e, t=resumed.t: e.kind == "step" and e.t >= t, TIMEOUT)
                restarts.append(round(step.t - killed_at, 3))
                restarts_resumed.append(round(resumed.t - killed_at, 3))
                _say(f"  worker restart -> next step {restarts[-1]} s")
                time.sleep(1)
            for i in range(repeats):
                killed_at = node.kill()
                node.wait(TIMEOUT)
                time.sleep(HEARTBEAT_S + 1)
                node = job.start_node(f"replacement{i}")
                resumed = job.wait_for("resumed", TIMEOUT, since=node.started_at)
                step = job.events.wait_for(lambda e, t=resumed.t: e.kind == "step" and e.t >= t, TIMEOUT)
                joins.append(round(step.t - node.started_at, 3))
                joins_resumed.append(round(resumed.t - node.started_at, 3))
                _say(f"  replacement start -> first step {joins[-1]} s")
                time.sleep(1)
            notice = sigterm_and_checkpoint(job, node, timeout=TIMEOUT)
        return {
            "task": work.name, "checkpoint_every": every,
            "first_start_to_first_step_s": firsts[0],
            # a node's first restart was the slow one (README.md: the agent's lazy torch._dynamo import)
            "first_worker_restart_to_next_step_s": restarts[0],
            "worker_restart_to_next_step_s": _median(restarts),
            "worker_restart_to_resumed_s": _median(restarts_resumed),
            "replacement_start_to_first_step_s": _median(joins),
            "replacement_start_to_resumed_s": _median(joins_resumed),
            "sigterm_to_committed_s": notice["sigterm_checkpoint_s"], "sigterm_exit_code": notice["exit_code"],
            "samples": {"worker_restart_to_next_step_s": restarts, "worker_restart_to_resumed_s": restarts_resumed,
                        "replacement_start_to_first_step_s": joins, "replacement_start_to_resumed_s": joins_resumed},
        }


def imports(repeats: int) -> dict:
    result: dict = {}
    for module in ("torch", "torchvision"):
        if importlib.util.find_spec(module) is None:
            result[f"import_{module}_s"] = {"skipped": f"{module} is not installed"}
            continue
        code = f"import time\nt = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)"
        samples = [round(float(subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                                              text=True, check=True).stdout.split()[-1]), 3) for _ in range(repeats)]
        result[f"import_{module}_s"] = {"first": samples[0], "median": _median(samples), "samples": samples}
    return result


def bare_loop(spec: dict) -> dict:
    """The same task trained by the loop one writes without a trainer (run in its own process)."""
    import torch
    from task_script import load_task
    from torch.utils.data import DataLoader

    steps, warmup = spec["steps"], spec["warmup"]
    task, cfg, device = load_task(spec)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    torch.manual_seed(cfg.seed)
    model = task.build_model().to(device)
    optimizer = task.build_optimizer(model)
    scheduler = task.build_scheduler(optimizer, steps)
    batch = cfg.global_batch_size
    loader = DataLoader(task.dataset, batch_size=batch, shuffle=True, drop_last=True, num_workers=cfg.num_workers,
                        pin_memory=cuda, persistent_workers=cfg.num_workers > 0)
    model.train()

    def batches():
        while True:
            yield from loader

    started = time.perf_counter()
    stream = batches()
    first_batch_s = first_step_s = 0.0
    timed_from = 0.0
    for step in range(1, steps + 1):
        data = next(stream)
        if step == 1:
            first_batch_s = time.perf_counter() - started
        loss = task.loss_sum(model, data, device) / batch
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if step == 1:
            sync()
            first_step_s = time.perf_counter() - started - first_batch_s
        if step == warmup:
            sync()
            timed_from = time.perf_counter()
    sync()
    return {"per_s": round((steps - warmup) * batch / (time.perf_counter() - timed_from), 2),
            "first_batch_s": round(first_batch_s, 3), "first_step_s": round(first_step_s, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves the benchmark on any machine")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    parser.add_argument("--repeats", type=int, default=None, help="samples per figure (default 3, --quick 1)")
    parser.add_argument("--etcd-binary", default=None, help=f"default: ${ENV_ETCD_BINARY}, else etcd on PATH")
    parser.add_argument("--workdir", type=Path, default=None, help="checkpoints go here (default: a temporary dir)")
    parser.add_argument("--bare-loop", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_loop:
        print(json.dumps(bare_loop(json.loads(args.bare_loop))))
        return 0
    parts = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(unknown)}; expected some of {', '.join(PARTS)}")
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1:
        parser.error(f"--repeats={repeats}: must be at least 1")
    binary = args.etcd_binary or etcd_binary()
    if binary is None or not os.access(binary, os.X_OK):
        parser.error(f"no etcd binary: pass --etcd-binary or set ${ENV_ETCD_BINARY} (got {binary!r})")

    machine = _machine()
    cuda, bf16 = machine["cuda"], machine["bf16_native"]
    torchvision = _has_torchvision()
    works = workloads(args.quick)
    resnet_skip = "needs torchvision" if not torchvision else None
    precision_skip = {"bf16": "needs a GPU that computes bf16 natively"} if not (cuda and bf16) else {}
    result: dict = {**machine, "date": time.strftime("%Y-%m-%d", time.gmtime()),
                    "quick": args.quick, "cpus": os.cpu_count(), "repeats": repeats, "statistic": "median"}
    started = time.monotonic()
    with Etcd(binary) as etcd, tempfile.TemporaryDirectory(prefix="tf-gpu-bench-", dir=args.workdir) as tmp:
        bench = Bench(etcd, Path(tmp), args.quick)
        if "throughput" in parts:
            _say("throughput: trainer vs bare loop")
            result["throughput"] = {
                "resnet": {"skipped": resnet_skip} if resnet_skip else bench.throughput(works["resnet"], precision_skip,
                                                                                        repeats),
                "gpt": bench.throughput(works["gpt"], {}, repeats),
            }
        if "checkpoint" in parts:
            _say("checkpoint: blocking time per periodic checkpoint")
            # at the default cadence: a background write still in flight at the next checkpoint is
            # waited for, and that wait is part of the blocking
            every, count = (4, 3) if args.quick else (DEFAULT_CADENCE, 3)
            result["checkpoint"] = {
                "resnet": {"skipped": resnet_skip} if resnet_skip else bench.checkpoint(works["resnet"], every, count),
                "gpt": bench.checkpoint(works["gpt"], every, count),
            }
        if "recovery" in parts:
            # the issue's recovery rows are ResNet-50's; without torchvision the GPT task stands in
            work = works["gpt"] if resnet_skip else works["resnet"]
            _say(f"recovery: {work.name}")
            result["recovery"] = bench.recovery(work, repeats)
            if resnet_skip:
                result["recovery"]["note"] = f"ResNet {resnet_skip}: measured with the GPT task"
        if "imports" in parts:
            _say("imports: a fresh worker's parts")
            result["imports"] = imports(max(repeats, 2))
            work = works["resnet"] if torchvision else works["gpt"]
            label = "bf16" if cuda and bf16 and torchvision else next(iter(work.precisions))
            first = bench.bare_rate(work, work.precisions[label], 3, 1)
            result["imports"][f"first_batch_s ({work.name})"] = first["first_batch_s"]
            result["imports"][f"first_step_s ({work.name}, {label})"] = first["first_step_s"]
    result["bench_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
