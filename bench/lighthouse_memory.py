"""Resident memory of torchft's Lighthouse, started two ways, idle and under a job's load.

    .venv/bin/python bench/lighthouse_memory.py [--replicas 64] [--rounds 20]

- `console script`: `torchft_lighthouse`, whose import of torchft._torchft first runs
  torchft/__init__.py, which imports torch (this venv's torch: the CUDA build the job's image has);
- `extension only`: the same Rust Lighthouse (torchft._torchft.lighthouse_main) loaded without its
  package, as the in-place job's Lighthouse Deployment starts it (torchfleet/jobs/inplace_job.py).

The load: `--replicas` replica groups ask for `--rounds` quorums each and heartbeat between them,
through torchft's own LighthouseClient. Figures from /proc/<pid>/status (VmHWM is the peak RSS,
what a memory limit is compared with).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from torchfleet.jobs.inplace_job import LIGHTHOUSE_LOAD, LIGHTHOUSE_MAIN  # noqa: E402


def load_extension():
    """torchft._torchft without torchft/__init__.py (and so without torch), as LIGHTHOUSE_MAIN does."""
    namespace: dict = {"__name__": "lighthouse_bench"}
    exec(LIGHTHOUSE_LOAD, namespace)  # noqa: S102
    return namespace["torchft"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(pid: int) -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon, RssFile of a process, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            found[key] = int(value.split()[0])
    return found


def wait_listening(proc: subprocess.Popen, port: int, timeout: float = 60) -> float:
    start = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the Lighthouse exited {proc.returncode}: {proc.stdout.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return time.monotonic() - start
        except OSError:
            if time.monotonic() - start > timeout:
                raise SystemExit("the Lighthouse never listened") from None
            time.sleep(0.05)


def drive(ext, port: int, replicas: int, rounds: int) -> float:
    """Every replica group asks for `rounds` quorums (each needs all of them) and heartbeats; seconds taken."""
    errors: list[BaseException] = []

    def group(index: int) -> None:
        try:
            client = ext.LighthouseClient(f"http://127.0.0.1:{port}", timedelta(seconds=10))
            for step in range(rounds):
                client.heartbeat(f"group-{index}")
                client.quorum(
                    replica_id=f"group-{index}",
                    timeout=timedelta(seconds=60),
                    address=f"http://10.0.{index // 250}.{index % 250}:29512",
                    store_address=f"10.0.{index // 250}.{index % 250}:29500",
                    step=step,
                    world_size=8,
                    shrink_only=False,
                )
        except BaseException as e:  # reported below, after every group ended
            errors.append(e)

    start = time.monotonic()
    threads = [threading.Thread(target=group, args=(i,)) for i in range(replicas)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"{len(errors)} replica groups failed, first: {errors[0]!r}")
    return time.monotonic() - start


def measure(name: str, argv: list[str], ext, replicas: int, rounds: int) -> None:
    port = free_port()
    flags = [
        f"--bind=127.0.0.1:{port}",
        f"--min_replicas={replicas}",
        "--join_timeout_ms=60000",
        "--quorum_tick_ms=50",
        "--heartbeat_timeout_ms=5000",
    ]
    env = {**os.environ, "RUST_LOG": "warn"}  # what the Deployment sets
    proc = subprocess.Popen([*argv, *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        started = wait_listening(proc, port)
        time.sleep(1)
        idle = status(proc.pid)
        took = drive(ext, port, replicas, rounds)
        loaded = status(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    mib = lambda kib: f"{kib / 1024:.1f}"  # noqa: E731
    print(
        f"{name:15} listening after {started:.2f} s; idle: peak {mib(idle['VmHWM'])} MiB "
        f"(anon {mib(idle['RssAnon'])}, file {mib(idle['RssFile'])}); after {replicas} groups x {rounds} "
        f"quorums ({took:.1f} s): peak {mib(loaded['VmHWM'])} MiB, now {mib(loaded['VmRSS'])} MiB"
    )


def main() -> None:
    os.environ.setdefault("RUST_LOG", "warn")  # the clients of the load log every connection at info
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    script = Path(sys.executable).parent / "torchft_lighthouse"
    script = str(script) if script.exists() else shutil.which("torchft_lighthouse")
    if not script:
        raise SystemExit("torchft_lighthouse is missing: the dev extra installs torchft")
    ext = load_extension()
    import torch  # only to name the build measured

    python = sys.version.split()[0]
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), Python {python}, {os.cpu_count()} CPUs")
    measure("console script", [script], ext, args.replicas, args.rounds)
    measure("extension only", [sys.executable, "-c", LIGHTHOUSE_MAIN], ext, args.replicas, args.rounds)


if __name__ == "__main__":
    main()
