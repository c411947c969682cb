"""Where a job goes: a stack (its config file and its Pulumi outputs) or the platform defaults.

The stack file says which GPU pools exist (so "unknown GPU for this stack" is caught before
anything is sent), the operator, namespace and cloud (so machine sizes and the spot notice).
The kubeconfig is a secret stack output and only Pulumi can read it; everything else the CLI
needs is in the stack file, which is why ``--dry-run`` never calls Pulumi.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from components import spec as platform
from components.catalog import machines
from components.clouds.traits import CLOUD_TRAITS
from components.kube import manifests as kube_manifests
from torchfleet import stack_ref
from torchfleet.jobs.errors import ClusterError, UsageError

REPO = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO / "stacks"  # Pulumi.yaml: stackConfigDir: stacks
DEFAULT_CLOUD = "aws"
ETCD_PORT = kube_manifests.ETCD_CLIENT_PORT
PULUMI = "pulumi"  # the CLI on PATH, as the automation API finds it
PULUMI_TIMEOUT_S = 120  # a remote backend (Pulumi Cloud, S3) answers in seconds; a dead one must not hang


def default_etcd_endpoint(namespace: str) -> str:
    # The training layer's etcd client Service in the job namespace: what the stack's
    # etcdEndpoint output reports, so a dry run without Pulumi prints the same endpoint.
    return kube_manifests.etcd_endpoint(namespace)


@dataclass(frozen=True)
class Target:
    stack: str | None
    cloud: str
    operator: str
    namespace: str
    claim: str
    etcd_endpoint: str  # host:port
    grace_s: int  # the cloud's spot notice: the pods' termination grace period
    pools: tuple[platform.GpuPoolSpec, ...] | None  # None: no stack, so any catalog GPU is accepted
    max_gpus: int | None = None  # the stack's guardrail
    region: str | None = None  # Azure zone labels carry it
    zones: tuple[str, ...] | None = None  # the stack's zones, as its config names them; None: no stack
    datasets: tuple[str, ...] | None = None  # the stack's torchfleet:datasets names; None: no stack
    # The node a CPU job's pods run on: the CPU pool's machine type and its (vCPUs, memory GiB)
    # from components/catalog/machines.yaml; None without a cloud stack or without a CPU pool.
    cpu_node: tuple[str, int, float] | None = None
    # Whether the stack has a CPU pool (torchfleet:cpuPool), where the CLI's pods without a GPU go on a cloud;
    # None: no stack, so it is not known (and not checked).
    cpu_pool: bool | None = None

    @property
    def etcd_host(self) -> str:
        return self.etcd_endpoint.rsplit(":", 1)[0]

    @property
    def etcd_port(self) -> int:
        return int(self.etcd_endpoint.rsplit(":", 1)[1])


def defaults(cloud: str = DEFAULT_CLOUD, namespace: str | None = None) -> Target:
    """The platform defaults: the first operator (job: an Indexed Job), namespace elastic-job, the default claim."""
    if cloud not in CLOUD_TRAITS:
        raise UsageError(f"--cloud: must be one of {', '.join(CLOUD_TRAITS)}, got {cloud!r}")
    ns = namespace or platform.DEFAULT_NAMESPACE
    return Target(
        stack=None,
        cloud=cloud,
        operator=platform.OPERATORS[0],
        namespace=ns,
        claim=platform.DEFAULT_CLAIM,
        etcd_endpoint=default_etcd_endpoint(ns),
        grace_s=CLOUD_TRAITS[cloud].spot_notice_s,
        pools=None,
    )


def stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """The file of ``--stack``: a name in stacks/ or a path (torchfleet/stack_ref.py)."""
    return stack_ref.resolve(stack, stacks_dir)


def from_stack(stack: str, stacks_dir: Path = STACKS_DIR) -> Target:
    """Read and validate the stack file exactly as the program does (components.spec.parse); a
    malformed file (not YAML, duplicate keys, an alias bomb: preview/stack_file.py) is a
    ConfigError too, so every problem with it is a UsageError (exit 2)."""
    from torchfleet.preview.runner import stack_spec

    try:
        spec = stack_spec(stack_file(stack, stacks_dir))
    except platform.ConfigError as error:
        raise UsageError(f"--stack {stack}: {error}") from None
    t = spec.training
    return Target(
        stack=spec.stack,
        cloud=spec.cloud,
        operator=t.operator,
        namespace=t.namespace,
        claim=t.claim_name,
        etcd_endpoint=default_etcd_endpoint(t.namespace),
        grace_s=t.termination_grace_s,
        pools=spec.gpu_pools,
        max_gpus=spec.guardrails.max_gpus,
        region=spec.region,
        zones=tuple(spec.zones),
        datasets=tuple(d.name for d in spec.datasets),
        cpu_node=_cpu_node(spec),
        cpu_pool=spec.cpu_pool is not None,
    )


def _cpu_node(spec: platform.PlatformSpec) -> tuple[str, int, float] | None:
    machine = spec.cpu_pool.machine_type if spec.cpu_pool else ""
    found = machines.shape(spec.cloud, machine) if machine else None
    return (machine, *found) if found else None


def require_cpu_pool(target: Target, what: str) -> None:
    """Refuse, before anything is sent, a pod without a GPU on a cloud stack that has no CPU pool: every pool of
    it is tainted (the GPU pools, and the manager pool, which no researcher's pod may use: issue 30), so the pod
    would stay Pending for good. WHAT names the flag or command that needs the pool."""
    if target.cloud == "local" or target.cpu_pool is not False:
        return
    raise UsageError(
        f"{what}: stack {target.stack} has no CPU pool, where pods without a GPU run (never on the manager pool "
        f"beside etcd); add torchfleet:cpuPool to its config, e.g. cpuPool: {{maxNodes: 2}} (it scales from "
        "zero; docs/config.md), and `pulumi up`"
    )



def local_context(stack: str, stacks_dir: Path = STACKS_DIR) -> str | None:
    """The kubeconfig context a local stack deploys to: its ``kubernetes:context``, or None for the
    current one (the Kubernetes provider's own config, read as the program's provider reads it)."""
    from torchfleet.preview.runner import stack_config

    _, config, _ = stack_config(stack_file(stack, stacks_dir))
    return config.get("kubernetes:context") or None


def with_outputs(target: Target, outputs: dict[str, Any]) -> Target:
    """Prefer what the deployed stack reports over what its file implies."""
    changes: dict[str, Any] = {}
    if outputs.get("namespace"):
        changes["namespace"] = outputs["namespace"]
        changes["etcd_endpoint"] = default_etcd_endpoint(outputs["namespace"])
    if outputs.get("sharedClaim"):
        changes["claim"] = outputs["sharedClaim"]
    if outputs.get("etcdEndpoint"):
        endpoint = str(outputs["etcdEndpoint"]).removeprefix("http://").removeprefix("https://")
        changes["etcd_endpoint"] = endpoint if ":" in endpoint else f"{endpoint}:{ETCD_PORT}"
    if outputs.get("operator") in platform.OPERATORS:
        changes["operator"] = outputs["operator"]
    return replace(target, **changes)


def read_stack_outputs(stack: str, work_dir: Path = REPO) -> dict[str, Any]:
    """The stack's outputs, secrets included (the kubeconfig), from the Pulumi CLI.

    ``pulumi stack output --json --show-secrets --stack NAME`` is the command Pulumi's automation API runs
    for them (pulumi/automation/_local_workspace.py, stack_outputs); run here directly, without the
    automation API's ``stack select`` first, which changed the checkout's selected stack as a side effect.
    """
    argv = [PULUMI, "stack", "output", "--json", "--show-secrets", "--stack", stack, "--non-interactive"]
    try:
        done = subprocess.run(argv, cwd=work_dir, capture_output=True, text=True, timeout=PULUMI_TIMEOUT_S,
                              env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "1"})
    except FileNotFoundError:  # this machine's setup, like a missing kubeconfig: exit 2 (issue 32), not 1
        raise UsageError(
            "--stack: reading the stack's kubeconfig output needs the Pulumi CLI, which is not installed "
            "(https://www.pulumi.com/docs/iac/download-install/); or pass --kubeconfig/--context"
        ) from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"--stack {stack}: pulumi did not answer within {PULUMI_TIMEOUT_S} s (is its backend "
                           "reachable?); or pass --kubeconfig/--context") from None
    error = " ".join(done.stderr.split())
    if done.returncode != 0:
        if re.search(r"no stack named .* found", error):  # the automation API's StackNotFoundError test
            raise UsageError(f"--stack: Pulumi has no stack {stack!r}; run `pulumi stack ls` to see yours")
        raise ClusterError(f"--stack {stack}: pulumi could not read the stack outputs: {error[-400:]}")
    try:
        outputs = json.loads(done.stdout)
    except ValueError:
        outputs = None
    if not isinstance(outputs, dict):
        raise ClusterError(f"--stack {stack}: pulumi printed no JSON object of outputs: {done.stdout[:200]!r}")
    return outputs
