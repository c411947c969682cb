"""Property (issue 12, item 3, the stack half): whatever a stack file holds, `torchfleet synth
--stack-file` exits 0 or 2, never prints a traceback, and every name in a successful synth passes
the clouds' limits (components/limits.py).

Hypothesis builds the files from the repository's own stacks (stacks/*.yaml) with mutations: any
key set to any YAML value (right and wrong types, huge numbers, odd text, nested lists and
mappings), nested fields of the structured keys changed, keys removed, keys of the wrong cloud or
misspelt, a random stack name (the file name), and text-level damage (a line repeated: a duplicate
key; an alias bomb appended; a number of thousands of digits; the file cut short; bytes that are
not text). The run is in-process
(`torchfleet.cli.main`, as the console script calls it), bounded and derandomized so CI sees the
same examples every time.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from components import limits
from tests.harness import REPO
from torchfleet.cli import main
from torchfleet.preview import runner
from torchfleet.preview.stack_file import load_stack_file

STACKS = {path.name: load_stack_file(path) for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml"))}
TOP_KEYS = [
    "torchfleet:cloud", "torchfleet:zones", "torchfleet:kubernetesVersion", "torchfleet:managerPool",
    "torchfleet:gpuPools", "torchfleet:storage", "torchfleet:training", "torchfleet:network",
    "torchfleet:autoscaler", "torchfleet:guardrails",
    "aws:region", "gcp:region", "gcp:project", "azure-native:location",  # each cloud's, on every stack
    "torchfleet:gpuPool", "torchfleet:zone", "kubernetes:context", "aws:profile",  # typos and other providers
]
FIELDS = [
    "gpu", "maxNodes", "minNodes", "machineTypes", "spot", "zones", "diskSizeGb", "machineType", "protect",
    "tier", "sizeGb", "operator", "namespace", "etcdReplicas", "cidr", "publicAccessCidrs", "natGateways",
    "scaleDownUnneededTime", "scaleDownDelayAfterAdd", "maxGpus", "allowOnDemandGpus", "maxNode",
]
# Values close to right ones, where the interesting limits are.
NEAR_MISSES = [
    "aws", "gcp", "azure", "local", "us-west-2", "us-west-2a", "us-west-2z", "mars-north-1", "us-central1",
    "us-central1-a", "eastus", "East US 2 (fake)", "1", "2", "4", "t4", "l4", "k80", "a100-80gb", "h100", "1.33",
    "1.35", "1.99", "1.10", "10.0.0.0/16", "10.0.0.0/8", "0.0.0.0/0", "10.0.0.0/24", "192.168.0.0/16",
    "m6i.large", "m6i.lrage", "e2-standard-4", "Standard_D4s_v5", "g4dn.xlarge", "BASIC_HDD", "Premium_LRS",
    "5m", "kubeflow", "torchelastic", "n" * 39, "n" * 40, "n" * 63, "my-ml-project", "My Project!!", "single",
    99999999999999999999, 450, 451, 1000, 1001, 7, 9, 16384, 65434, 102401, 0, -1,
]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.text(max_size=40), st.sampled_from(NEAR_MISSES),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8),
                                                                inner, max_size=4),
    max_leaves=12,
)
stack_names = st.one_of(
    st.sampled_from([name.removeprefix("Pulumi.").removesuffix(".yaml") for name in STACKS]),
    st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=110),
    # Any printable text a file name can hold (no '/', no NUL), kept short of the 255-byte limit.
    st.text(alphabet=st.characters(exclude_characters="/\0", exclude_categories=("Cs", "Cc")), min_size=1,
            max_size=40),
)


@st.composite
def mutated_config(draw) -> dict:
    config = json.loads(json.dumps(STACKS[draw(st.sampled_from(sorted(STACKS)))]))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        kind = draw(st.sampled_from(["set", "nested", "delete"]))
        key = draw(st.sampled_from(TOP_KEYS + sorted(config)))
        if kind == "set":
            config[key] = draw(values)
        elif kind == "delete":
            config.pop(key, None)
        elif isinstance(config.get(key), dict):
            config[key][draw(st.sampled_from(FIELDS))] = draw(values)
        elif isinstance(config.get(key), list) and config[key]:
            i = draw(st.integers(min_value=0, max_value=len(config[key]) - 1))
            if isinstance(config[key][i], dict):
                config[key][i][draw(st.sampled_from(FIELDS))] = draw(values)
            else:
                config[key][i] = draw(values)
    return config


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "  torchfleet:bomb:\n" + "".join(f"    {line}\n" for line in lines)


@st.composite
def stack_file_content(draw) -> bytes:
    text = yaml.safe_dump({"config": draw(mutated_config())}, allow_unicode=True, sort_keys=False)
    damage = draw(st.sampled_from(["none"] * 6 + ["repeat-line", "bomb", "cut", "bytes", "long-number"]))
    lines = text.splitlines(keepends=True)
    if damage == "repeat-line" and len(lines) > 1:
        i = draw(st.integers(min_value=1, max_value=len(lines) - 1))
        lines.insert(i, lines[i])
        text = "".join(lines)
    elif damage == "bomb":
        text += alias_bomb(draw(st.integers(min_value=2, max_value=9)))
    elif damage == "long-number":  # past Python's 4300-digit int() limit
        text += f"  torchfleet:{draw(st.sampled_from(FIELDS))}: " + "9" * draw(st.integers(4000, 5000)) + "\n"
    elif damage == "cut":
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    elif damage == "bytes":
        return draw(st.binary(max_size=200))
    return text.encode("utf-8")


def run_synth(stack: str, content: bytes) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"Pulumi.{stack}.yaml"
        path.write_bytes(content)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["synth", "--json", "--stack-file", str(path)])
        return code, out.getvalue(), err.getvalue()


@settings(
    max_examples=30, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(stack=stack_names, content=stack_file_content())
def test_synth_of_any_stack_file_exits_0_or_2_and_writes_only_valid_names(stack, content):
    code, out, err = run_synth(stack, content)
    event(f"exit {code}")  # --hypothesis-show-statistics shows the mix of valid and refused files
    assert code in (0, 2), f"exit {code}:\n{err}"
    assert "Traceback" not in err and "Traceback" not in out
    if code == 2:
        assert out == "" and err.strip(), "an input error says why on stderr and prints nothing else"
        assert len(err) < 20_000, "one line per problem, not the value that caused it"
        return
    doc = json.loads(out)
    resources = doc["resources"]
    assert resources
    assert limits.name_problems(resources) == []
    # Whatever the stack: `pulumi destroy` is never blocked by a protected resource, and no
    # replacement recreates a fixed name while the old one exists (issue 20, plans.py).
    assert doc["destroy"]["blocked"] == [] and doc["replaceCollisions"] == []


def test_the_unmutated_stacks_are_valid():
    # The control: the property starts from these, so most examples reach a real synth
    # (tests/components/test_limits.py walks their names; --hypothesis-show-statistics shows
    # the share of examples that exit 0).
    for name in STACKS:
        spec = runner.stack_spec(REPO / "stacks" / name)
        assert spec.stack == name.removeprefix("Pulumi.").removesuffix(".yaml")
