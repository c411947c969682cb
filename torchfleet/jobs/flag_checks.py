"""The checks of `submit`'s flags that need nothing but the flag: names, counts, env, sweeps, image, uid, command.

Each failure is a UsageError whose message starts with the flag and says what would be valid.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
from collections.abc import Sequence

from components.spec import TRAINING_UID
from torchfleet.jobs import image_ref
from torchfleet.jobs.errors import UsageError

# The operators name pods and their Services "<job>-worker-<index>", and a Service name is a
# DNS-1035 label of at most 63 characters.
_POD_SUFFIX = "-worker-"
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# Kubernetes label values: at most 63 characters, alphanumeric at both ends, '-', '_', '.' inside
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set).
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_VALUE_MAX = 63
# Zones as every cloud writes them in topology.kubernetes.io/zone: us-west-2a, us-central1-a, eastus-1.
_ZONE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes keeps uids in an int32 (runAsUser: 0 to 2147483647, apimachinery IsValidUserID).
UID_MAX = 2**31 - 1
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The most nodes one job may have: its rendezvous state, one etcd key that torch rewrites whole at every
# join and heartbeat, must fit the etcd gate's state limit (training-image/elastic_trainer/etcd_gate/rules.py
# Limits.max_value_bytes, 16 KiB, sized from etcd's memory: docs/threat-model.md). 64 nodes, with as many
# replacements waiting and IPv6 addresses, are 15,960 bytes of torch 2.13's own state
# (tests/training_image/test_etcd_gate.py checks it), and the largest job whose rendezvous was measured
# to form (training-image/elastic_trainer/launch/rdzvconf.py). The clouds' pools hold up to 1,000 nodes
# (components/clouds/traits.py), Kubernetes 5,000: several jobs share them.
MAX_NODES = 64
_NODES_WHY = "the most one job's rendezvous state holds within the etcd gate's limit"
# No count or size a flag takes has more digits; longer ones are refused before int() sees them.
_MAX_DIGITS = 9
_NODES = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+)\s*)?$")
# One job per combination: a few more values per --param multiply into thousands of jobs, each
# asking for GPUs. A sweep beyond this is more likely a typo than a plan.
MAX_SWEEP_JOBS = 256
# How a sweep's values reach the script (issue 22): "argparse" appends --KEY=VALUE, what a script built
# on TrainConfig.add_arguments (every example in training-image/examples) accepts; "hydra" appends
# KEY=VALUE, Hydra's override grammar (https://hydra.cc/docs/advanced/override_grammar/basic/), which
# argparse refuses ("unrecognized arguments"), and --KEY=VALUE is refused by Hydra. The default is the
# project's own template's style: the trainer's flags (--total-steps, --seed, ...) are argparse options
# whatever the script adds, so only that style can sweep them.
PARAM_STYLES = ("argparse", "hydra")
DEFAULT_PARAM_STYLE = "argparse"
_HYDRA_KEY = re.compile(r"^[+~]{0,2}[A-Za-z_][\w.\-/@]*$")  # Hydra override keys (a.b, +new, ~drop)
_ARGPARSE_KEY = re.compile(r"^(--)?[A-Za-z_][\w.\-]*$")  # lr or --lr: the option --lr
# Environment the CLI sets itself; a user value would break the per-job folders or identity.
# POD_IP: the pod's address from the downward API, which torchrun advertises (--local-addr).
RESERVED_ENV = ("TORCHFLEET_JOB", "TORCHFLEET_CHECKPOINT_DIR", "TORCHFLEET_OUTPUT_DIR", "POD_IP")
_CPUS = re.compile(r"^\s*(?:(\d+(?:\.\d{1,3})?)|(\d+)m)\s*$")
_MEMORY = re.compile(r"^\s*(\d+)\s*(Mi|Gi)\s*$")


def parse_nodes(text: str) -> tuple[int, int]:
    """``--nodes 2:8`` -> (2, 8); ``--nodes 4`` -> (4, 4)."""
    m = _NODES.match(text or "")
    if not m:
        raise UsageError(f"--nodes: expected MIN:MAX (e.g. 2:8) or a single count (e.g. 4), got {text!r}")
    longest = max(len(g) for g in m.groups() if g is not None)
    if longest > _MAX_DIGITS:  # int() of more than 4,300 digits raises (issue 23: an exit 1 "unexpected error")
        raise UsageError(f"--nodes: at most {MAX_NODES} nodes ({_NODES_WHY}), got a {longest}-digit number")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if lo < 1:
        raise UsageError(f"--nodes: the minimum must be at least 1, got {text!r}")
    if lo > hi:
        raise UsageError(f"--nodes: the minimum ({lo}) must not exceed the maximum ({hi}); e.g. {hi}:{lo}")
    if hi > MAX_NODES:
        raise UsageError(f"--nodes: at most {MAX_NODES} nodes ({_NODES_WHY}), got {text!r}")
    return lo, hi


def parse_env(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise UsageError(f"--env: expected NAME=VALUE with NAME like MY_VAR, got {item!r}")
        if key in RESERVED_ENV:
            raise UsageError(f"--env {key}: set by torchfleet for every job; reserved: {', '.join(RESERVED_ENV)}")
        seen[key] = value  # the last one wins, as in a shell
    return tuple(seen.items())


def _param_key(item: str, key: str, style: str) -> str:
    """The option (argparse: ``--lr``) or override key (hydra: ``optimizer.lr``) a --param sets."""
    if style == "hydra":
        if key.startswith("-"):
            raise UsageError(f"--param {key}: a Hydra override has no dashes (e.g. {key.lstrip('-')}=0.1,0.01); for "
                             "a script whose options are --flags (argparse, TrainConfig.add_arguments) use "
                             "--param-style argparse")
        if not _HYDRA_KEY.match(key):
            raise UsageError(f"--param: expected KEY=V1,V2,... with KEY a Hydra override key (e.g. optimizer.lr, "
                             f"+extra), got {item!r}")
        return key
    if key[0] in "+~":
        raise UsageError(f"--param {key}: '+' and '~' are Hydra's override syntax; with --param-style argparse "
                         "give the script's option, e.g. lr=0.1,0.01 or --lr=0.1,0.01 (or use --param-style hydra)")
    if not _ARGPARSE_KEY.match(key):
        raise UsageError(f"--param: expected KEY=V1,V2,... with KEY the script's option, e.g. lr=0.1,0.01 or "
                         f"--lr=0.1,0.01, got {item!r}")
    return "--" + key.removeprefix("--")


def parse_params(items: Sequence[str], style: str = DEFAULT_PARAM_STYLE) -> list[tuple[str, list[str]]]:
    """``--param lr=0.1,0.01`` (repeatable) -> [("--lr", ["0.1", "0.01"]), ...] (hydra: [("lr", ...)])."""
    if style not in PARAM_STYLES:
        raise UsageError(f"--param-style: one of {', '.join(PARAM_STYLES)}, got {style!r}")
    params: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        choices = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(choices):
            raise UsageError(f"--param: expected KEY=V1,V2,... (e.g. lr=0.1,0.01), got {item!r}")
        option = _param_key(item, key, style)
        if any(k == option for k, _ in params):
            raise UsageError(f"--param {key}: given twice; list all values once, e.g. {key}=1,2,3")
        if len(set(choices)) != len(choices):
            raise UsageError(f"--param {key}: repeated values in {item!r}")
        params.append((option, choices))
    if not params:
        raise UsageError("--param: a sweep needs at least one, e.g. --param lr=0.1,0.01")
    jobs = math.prod(len(values) for _, values in params)
    if jobs > MAX_SWEEP_JOBS:
        raise UsageError(f"--param: {jobs} combinations, at most {MAX_SWEEP_JOBS} jobs per sweep; "
                         "sweep fewer values, or split the sweep")
    return params


def parse_cpus(text: str) -> int:
    """``--cpus 2`` / ``1.5`` / ``500m`` -> millicores."""
    m = _CPUS.match(text or "")
    digits = len((m.group(1) or m.group(2)).split(".")[0]) if m else 0
    if digits > _MAX_DIGITS:  # float() of a long number is inf, int() past 4,300 digits raises (issue 23: an exit 1)
        raise UsageError(f"--cpus: a {digits}-digit number of cores per pod; no machine has that many "
                         "(e.g. 2, 1.5 or 500m)")
    millis = (round(float(m.group(1)) * 1000) if m.group(1) else int(m.group(2))) if m else 0
    if millis < 100:
        raise UsageError(f"--cpus: expected cores per pod, at least 0.1 (e.g. 2, 1.5 or 500m), got {text!r}")
    return millis


def parse_memory(text: str) -> int:
    """``--memory 4Gi`` / ``512Mi`` -> MiB."""
    m = _MEMORY.match(text or "")
    if m and len(m.group(1)) > _MAX_DIGITS:  # int() past 4,300 digits raises (issue 23: an exit 1)
        raise UsageError(f"--memory: a {len(m.group(1))}-digit number of {m.group(2)} per pod; no machine has that "
                         "much (e.g. 4Gi)")
    mib = int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1) if m else 0
    if mib < 256:
        raise UsageError(f"--memory: expected memory per pod in Mi or Gi, at least 256Mi (e.g. 4Gi), got {text!r}")
    return mib


def combinations(params: list[tuple[str, list[str]]]) -> list[tuple[str, ...]]:
    """Every combination, as arguments in flag order: [("--lr=0.1", "--batch=64"), ...] (argparse; the
    value joined by '=' so that one starting with '-' stays a value), [("lr=0.1", ...)] (hydra)."""
    keys = [k for k, _ in params]
    return [tuple(f"{k}={v}" for k, v in zip(keys, values, strict=True))
            for values in itertools.product(*(vs for _, vs in params))]


# An in-place job's Lighthouse Service is <job>-lighthouse (torchfleet/jobs/inplace_job.py), a DNS
# label of at most 63 characters; its pods' hostnames <job>-<index> are shorter.
_LIGHTHOUSE_SUFFIX = "-lighthouse"


def check_name(name: str, max_nodes: int, flag: str = "NAME", recovery: str = "restart") -> None:
    if recovery == "inplace":
        longest, shape = len(name) + len(_LIGHTHOUSE_SUFFIX), "its Lighthouse Service is <job>-lighthouse"
    else:
        longest = len(name) + len(_POD_SUFFIX) + len(str(max(max_nodes - 1, 0)))
        shape = "pod names are <job>-worker-<n>"
    if not _DNS1035.fullmatch(name or ""):
        raise UsageError(
            f"{flag}: {name!r} is not a valid job name; use lowercase letters, digits and '-', "
            "starting with a letter (e.g. resnet-lr01)"
        )
    if longest > 63:
        raise UsageError(
            f"{flag}: {name!r} is too long; {shape} and must fit 63 characters, "
            f"so at most {63 - longest + len(name)} characters here"
        )


def check_lookup_name(name: str) -> None:
    """A job name given to status, logs or delete: checked before it reaches the API (in a URL
    path and a label selector)."""
    if not (_DNS1035.fullmatch(name or "") and len(name) <= LABEL_VALUE_MAX):
        raise UsageError(f"NAME: {name!r} is not a job name; job names are lowercase letters, digits and '-', "
                         f"starting with a letter, at most {LABEL_VALUE_MAX} characters (see `torchfleet list`)")


def name_or_local(args: argparse.Namespace) -> None:
    """`status` and `logs` take a job's NAME or a local run's --local DIR: exactly one of them."""
    if (args.name is None) == (args.local is None):
        got = f"; got {args.name} and --local" if args.name else ""
        message = (f"required: NAME (a job's name) or --local DIR (a local run's folder), one of them, e.g. "
                   f"torchfleet {args.command} resnet-a{got}")
        if getattr(args, "parser", None) is not None:
            args.parser.error(message)  # argparse's usage line and exit 2, as for any missing argument
        raise UsageError(message)


def check_label_value(flag: str, value: str) -> None:
    if len(value) > LABEL_VALUE_MAX or not LABEL_VALUE.fullmatch(value):
        raise UsageError(f"{flag}: {value!r} cannot be a Kubernetes label value; at most {LABEL_VALUE_MAX} "
                         "letters, digits, '-', '_' or '.', beginning and ending with a letter or digit")


def check_zone(zone: str) -> None:
    check_label_value("--zone", zone)  # it becomes the nodeSelector's topology.kubernetes.io/zone value
    if not _ZONE.fullmatch(zone):
        raise UsageError(f"--zone: expected a zone as the nodes' topology.kubernetes.io/zone label names it "
                         f"(lowercase letters, digits, '-'), e.g. us-west-2a, us-central1-a or eastus-1; got {zone!r}")


def check_image(image: str | None) -> None:
    if not image:
        raise UsageError(f"--image: required, e.g. --image {image_ref.EXAMPLE}")
    ref = image_ref.parse(image)
    # A spot replacement pulls the image again: a moving tag could run different code on
    # different nodes of one job, so the image must name a version.
    if not ref.digest and (not ref.tag or ref.tag == "latest"):
        raise UsageError(f"--image: {image!r} names no fixed version; give REPO:TAG (not latest) or REPO@sha256:...")


def check_run_as_user(uid: int) -> None:
    # The training namespace enforces the `restricted` Pod Security level, which refuses uid 0
    # (runAsNonRoot): https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
    if isinstance(uid, bool) or not isinstance(uid, int) or not 0 < uid <= UID_MAX:
        raise UsageError(f"--run-as-user: expected a uid from 1 to {UID_MAX} (the namespace refuses root, "
                         f"Kubernetes keeps uids in 32 bits), got {uid!r}; the training image's user is {TRAINING_UID}")


def training_command(command: Sequence[str]) -> tuple[str, ...]:
    """The user's command as torchrun's script part (after the launcher's own options).

    torchrun runs a script with Python itself, so ``python train.py`` becomes ``train.py``,
    ``python -m pkg.train`` becomes ``--module pkg.train``, and any other program runs
    with ``--no-python``.
    """
    argv = list(command)
    if not argv:
        raise UsageError("the training command is missing: put it after --, e.g. -- python train.py --lr 0.1")
    if not argv[0].strip():
        raise UsageError(f"the training command: the program after -- is empty ({argv[0]!r}); "
                         "e.g. -- python train.py --lr 0.1")
    if any("\0" in arg for arg in argv):
        raise UsageError("the training command: an argument contains a NUL character, which no program can receive")
    if re.fullmatch(r"python(3(\.\d+)?)?", argv[0].rsplit("/", 1)[-1]):
        rest = argv[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            if not rest[1].strip():
                raise UsageError("the training command: the module after python -m is empty; e.g. -m team.train")
            return ("--module", *rest[1:])
        if rest and not rest[0].strip():
            raise UsageError(f"the training command {' '.join(argv)!r}: the script after python is empty; "
                             "e.g. -- python train.py")
        if not rest or rest[0].startswith("-"):
            raise UsageError(
                f"the training command {' '.join(argv)!r}: give a script or -m MODULE after python; "
                "interpreter options cannot pass through torchrun (use --env PYTHONUNBUFFERED=1 and the like)"
            )
        return tuple(rest)
    if argv[0].endswith(".py"):
        return tuple(argv)
    return ("--no-python", *argv)
