"""Where a test run's minutes went, from the timeline tests/conftest.py writes (TORCHFLEET_TEST_TIMELINE).

    TORCHFLEET_TEST_TIMELINE=/tmp/timeline.txt bash .ci/run
    python bench/ci_timeline.py /tmp/timeline.txt [--since EPOCH] [--top 25]

Prints, for each xdist worker, how long it ran tests and how long it sat idle between them; the files in
the order they started (minute of the run, worker, tests, seconds); the slowest files; and the tier's
share (tests/controlplane/). docs/ci.md's figures for issue 31 item 5 come from it. --since is the
run's start (epoch seconds, e.g. `date +%s` before `bash .ci/run`); without it, the first test's start.
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TIER = "tests/controlplane/"


@dataclass
class FileSpan:
    path: str
    worker: str
    start: float
    end: float
    tests: int = 0
    busy: float = 0.0  # the sum of its tests' spans (a file runs on one worker, its tests one by one)
    workers: set[str] = field(default_factory=set)


def read(path: Path) -> list[tuple[float, float, str, str]]:
    """The timeline's lines, sorted; a ValueError that names the file and line when it is not one."""
    try:
        text = path.read_text()
    except OSError as error:
        raise ValueError(f"{path}: {error.strerror} (the file TORCHFLEET_TEST_TIMELINE named)") from None
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split(" ", 3)
        try:
            lines.append((float(words[0]), float(words[1]), words[2], words[3]))
        except (ValueError, IndexError):
            raise ValueError(f"{path}:{number}: expected 'START END WORKER NODEID', got {line!r}") from None
    if not lines:
        raise ValueError(f"{path}: no tests recorded")
    return sorted(lines)


def files(lines) -> list[FileSpan]:
    spans: dict[str, FileSpan] = {}
    for start, end, worker, nodeid in lines:
        path = nodeid.split("::", 1)[0]
        span = spans.setdefault(path, FileSpan(path, worker, start, end))
        span.start, span.end = min(span.start, start), max(span.end, end)
        span.tests += 1
        span.busy += end - start
        span.workers.add(worker)
    return sorted(spans.values(), key=lambda s: s.start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--since", type=float, help="the run's start, epoch seconds (default: the first test's)")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest files to list")
    args = parser.parse_args()
    try:
        lines = read(args.timeline)
    except ValueError as error:
        parser.error(str(error))  # exit 2
    zero = args.since if args.since is not None else lines[0][0]
    last = max(end for _, end, _, _ in lines)

    def minute(t: float) -> str:
        return f"{(t - zero) / 60:5.1f}"

    by_worker: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for start, end, worker, _ in lines:
        by_worker[worker].append((start, end))
    print(f"tests: {len(lines)}, first start at minute {minute(lines[0][0])}, last end at minute {minute(last)}")
    for worker, spans in sorted(by_worker.items()):
        busy = sum(end - start for start, end in spans)
        idle = sum(max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(spans))
        print(f"  {worker}: {len(spans)} tests, busy {busy / 60:.1f} min, idle between tests {idle / 60:.1f} min, "
              f"from minute {minute(spans[0][0])} to {minute(spans[-1][1])}")

    spans = files(lines)
    tier = [s for s in spans if s.path.startswith(TIER)]
    rest = [s for s in spans if s not in tier]
    print(f"the tier: {len(tier)} files, {sum(s.busy for s in tier) / 60:.1f} worker-min; "
          f"the rest: {len(rest)} files, {sum(s.busy for s in rest) / 60:.1f} worker-min")
    print("\nfiles in the order they started (minute, worker, tests, seconds):")
    for s in spans:
        print(f"  {minute(s.start)} {','.join(sorted(s.workers)):>7} {s.tests:5d} {s.busy:7.1f}  {s.path}")
    print(f"\nthe {args.top} slowest files (seconds of their tests):")
    for s in sorted(spans, key=lambda s: -s.busy)[: args.top]:
        print(f"  {s.busy:7.1f}  {s.path}")


if __name__ == "__main__":
    main()
