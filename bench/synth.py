"""How long `torchfleet synth` takes per example stack, and how many resources each registers.

    .venv/bin/python bench/synth.py [--runs 5] [--json] [--stack aws-usw2 ...]

Each run is a fresh synth (new mocks, new recording monitor, the stack file read again) in this
one process. The first synth of a stack is reported on its own as "cold": it pays the lazy imports
(the cloud's provider SDK, the Kubernetes resource modules) that later runs find loaded. The
program's own imports are timed once, before any stack. Then --runs warm synths give the median,
min and max.
A benchmark prints figures; no test asserts on them (docs/facts.md, "Conventions").
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STACKS_DIR = REPO / "stacks"


def _stacks() -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def _timed_synth(stack: str) -> tuple[float, int]:
    from torchfleet.preview.runner import synth_file

    gc.collect()  # outside the timer: one run's garbage must not be collected on the next one's clock
    start = time.perf_counter()
    # Anything the program or Pulumi prints goes to stderr, so --json output stays one object.
    with contextlib.redirect_stdout(sys.stderr):
        result = synth_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
    return time.perf_counter() - start, len(result.resources)


def bench_stack(stack: str, runs: int) -> dict[str, Any]:
    from components.spec import ConfigError

    try:
        cold, resources = _timed_synth(stack)
        warm = []
        counts = {resources}
        for _ in range(runs):
            seconds, count = _timed_synth(stack)
            warm.append(seconds)
            counts.add(count)
    except Exception as error:
        if isinstance(error, ConfigError):
            return {"status": "invalid config", "detail": str(error)}
        return {"status": "error", "detail": f"{type(error).__name__}: {error}"}
    row: dict[str, Any] = {
        "status": "ok",
        "resources": resources,
        "cold_s": round(cold, 4),
        "warm_s": {
            "median": round(statistics.median(warm), 4),
            "min": round(min(warm), 4),
            "max": round(max(warm), 4),
            "runs": [round(s, 4) for s in warm],
        },
    }
    if len(counts) > 1:
        # A program that registers a different number of resources per run is not deterministic.
        row["status"] = "error"
        row["detail"] = f"resource count changed between runs: {sorted(counts)}"
    return row


def run(runs: int, stacks: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        import components.platform  # noqa: F401  (the program, without the clouds it loads lazily)
        import torchfleet.preview.runner  # noqa: F401
    imports = time.perf_counter() - start
    results = {stack: bench_stack(stack, runs) for stack in stacks}
    return {
        "runs": runs,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        # 1-minute load average when done: other work on the machine shows up in every figure.
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "imports_s": round(imports, 4),
        "stacks": results,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"synth per stack: 1 cold run, then {report['runs']} warm runs "
        f"(python {report['python']}, {report['cpus']} CPUs, load average {report['load_avg_1m']})",
        f"program imports (runner + platform), once: {report['imports_s']:.3f} s",
        "",
        f"{'stack':<12} {'resources':>9} {'cold s':>8} {'warm median s':>14} {'min s':>7} {'max s':>7}",
    ]
    for stack, row in report["stacks"].items():
        if row["status"] == "ok":
            warm = row["warm_s"]
            lines.append(
                f"{stack:<12} {row['resources']:>9} {row['cold_s']:>8.3f} {warm['median']:>14.3f} "
                f"{warm['min']:>7.3f} {warm['max']:>7.3f}"
            )
        else:
            lines.append(f"{stack:<12} {row['status']}: {row['detail'].splitlines()[0]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="warm runs per stack after the cold one (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--stack", action="append", choices=_stacks(), help="only this stack (repeatable)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    sys.path.insert(0, str(REPO))
    report = run(args.runs, args.stack or _stacks())
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 1 if any(row["status"] in ("error", "invalid config") for row in report["stacks"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
