"""Rendezvous settings (torchrun's ``--rdzv_conf``): the launcher's defaults by job size, and their checks.

The defaults follow the job's MAXIMUM node count (``--nnodes``): heartbeats tuned for 2 nodes
(6.1 s from a kill to the survivor's next step) kept groups of 64 from forming (issue 15). A
setting that lets a live node be declared dead, or that did not form a group of that size in
bench/rendezvous.py, is refused before torchrun starts (``check_rdzv_conf``), with a message
naming the key, its value and what would be right. No torch here: the launcher stays light.
"""

from __future__ import annotations

from collections.abc import Mapping


class LaunchError(ValueError):
    """A launch configuration Torchfleet refuses; the message names the option."""


# Measured on the CI machine (docs/facts.md, torch 2.13, etcd-v2, 2 nodes): 6.1 s from SIGKILL to
# the survivor's next step, stable under CPU load, against 47 s with torchrun's defaults
# (keep_alive 5 s x 3 to declare a node dead, then a 30 s last call).
TUNED_RDZV_CONF: dict[str, str] = {
    "last_call_timeout": "1",
    "keep_alive_interval": "1",
    "keep_alive_max_attempt": "3",
}
# The tuned settings above were measured with 2 nodes. Every heartbeat is a compare-and-set write
# of the job's whole rendezvous state (one etcd key per job), a late heartbeat gets a live node
# declared dead, and the round starts again. On one loaded 2-core machine, 16 nodes with 1 s
# heartbeats saw 534 of 633 writes conflict and live nodes declared dead 84 times before forming
# (13 s, 3 rounds), and 64 nodes with 1 s heartbeats did not re-form within 60 s (issue 15;
# bench/rendezvous.py). So the settings follow the job's MAXIMUM node count: (up to this many
# nodes, settings, smallest keep_alive_interval accepted at that size). Figures and the machine:
# README.md, "Rendezvous at scale".
RDZV_BY_MAX_NODES: tuple[tuple[int, dict[str, str], int], ...] = (
    (8, TUNED_RDZV_CONF, 1),
    # 2 s heartbeats formed 16 nodes in 28-51 s with 3-7 rounds under load; 3 s in 1.5-4.7 s, one round
    (16, {"last_call_timeout": "2", "keep_alive_interval": "3", "keep_alive_max_attempt": "3"}, 1),
    # 1 s heartbeats formed 32 nodes slowly (6.9 s, 2 rounds): kept, with a warning; 64 did not re-form
    (32, {"last_call_timeout": "3", "keep_alive_interval": "5", "keep_alive_max_attempt": "3"}, 1),
    (64, {"last_call_timeout": "3", "keep_alive_interval": "5", "keep_alive_max_attempt": "3"}, 2),
)


def rdzv_conf_for_nodes(max_nodes: int) -> dict[str, str]:
    """The launcher's rendezvous settings for a job of at most ``max_nodes`` nodes."""
    return dict(_size_row(max_nodes)[1])


def _size_row(max_nodes: int) -> tuple[int, dict[str, str], int]:
    # past the largest measured size, the largest row: not known to form (check_rdzv_conf warns)
    return next((row for row in RDZV_BY_MAX_NODES if max_nodes <= row[0]), RDZV_BY_MAX_NODES[-1])


def parse_max_nodes(value: str, source: str = "--nnodes") -> int:
    """torchrun's ``--nnodes``: ``N`` or ``MIN:MAX``; the maximum."""
    low, sep, high = value.partition(":")
    try:
        counts = [int(low), int(high)] if sep else [int(low)]
    except ValueError:
        raise LaunchError(f"{source}={value!r}: expected a node count N or MIN:MAX (e.g. 2:8)") from None
    if counts[0] < 1 or counts[-1] < counts[0]:
        raise LaunchError(f"{source}={value!r}: expected 1 <= MIN <= MAX")
    return counts[-1]


# torchrun's own values (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), used by
# the checks below when a key is not set and by bench/recovery.py for the comparison.
TORCH_DEFAULT_RDZV_CONF: dict[str, str] = {
    "last_call_timeout": "30",
    "keep_alive_interval": "5",
    "keep_alive_max_attempt": "3",
}
# The worst heartbeat gap seen on a loaded machine is keep_alive_interval + 1 s. A node is
# declared dead after interval x attempts, so that product must exceed interval + 1 s by this
# margin. Too aggressive is worse than slow (docs/facts.md, "Rendezvous"): 1 x 1 never forms a group, and 1 x 2
# silently split one job into two world-size-1 jobs writing the same checkpoint.
HEARTBEAT_MARGIN_S = 1


def parse_rdzv_conf(text: str, source: str = "--rdzv_conf") -> dict[str, str]:
    """``"a=1,b=2"`` -> ``{"a": "1", "b": "2"}`` (torchrun's own format)."""
    conf: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LaunchError(f"{source}: expected key=value, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def format_rdzv_conf(conf: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in conf.items())


def _int_setting(conf: Mapping[str, str], key: str) -> int:
    value = conf.get(key, TORCH_DEFAULT_RDZV_CONF[key])
    try:
        number = int(value)
    except ValueError:
        # torch reads these with get_as_int: a float would fail later, inside the agent.
        raise LaunchError(f"--rdzv_conf {key}={value!r}: must be a whole number of seconds") from None
    if number < 1:
        raise LaunchError(f"--rdzv_conf {key}={number}: must be at least 1")
    return number


def check_rdzv_conf(conf: Mapping[str, str], max_nodes: int = 1) -> tuple[str, ...]:
    """Refuse heartbeat settings that let a live node be declared dead (docs/facts.md), or that did not
    form a group of ``max_nodes`` in bench/rendezvous.py; return warnings for weaker-than-default ones."""
    interval = _int_setting(conf, "keep_alive_interval")
    attempts = _int_setting(conf, "keep_alive_max_attempt")
    last_call = _int_setting(conf, "last_call_timeout")
    budget = interval * attempts
    needed = interval + 1 + HEARTBEAT_MARGIN_S
    if budget < needed:
        raise LaunchError(
            f"--rdzv_conf keep_alive_interval={interval} x keep_alive_max_attempt={attempts} = {budget} s: "
            f"a live node's heartbeat can be {interval + 1} s late, so this must be at least {needed} s "
            f"(raise keep_alive_max_attempt); shorter budgets split one job into several (docs/facts.md)"
        )
    limit, default, smallest = _size_row(max_nodes)
    if interval < smallest:
        raise LaunchError(
            f"--rdzv_conf keep_alive_interval={interval} with --nnodes up to {max_nodes}: groups of that size "
            f"did not form with heartbeats under {smallest} s in the rendezvous benchmark (README.md, "
            f"\"Rendezvous at scale\"); use keep_alive_interval>={smallest}, or leave it out for the "
            f"launcher's {default['keep_alive_interval']}"
        )
    warnings = []
    if max_nodes > limit:
        warnings.append(f"--nnodes up to {max_nodes}: rendezvous settings were measured up to {limit} nodes "
                        f"only (README.md, \"Rendezvous at scale\"); using those of {limit}")
    for key, value in (("keep_alive_interval", interval), ("last_call_timeout", last_call)):
        if value < int(default[key]):
            warnings.append(f"--rdzv_conf {key}={value} is below the launcher's {default[key]} for up to "
                            f"{limit} nodes: a late heartbeat or join restarts the round for every node")
    return tuple(warnings)
