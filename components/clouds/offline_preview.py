"""A pull-request preview from a machine that cannot reach the cluster's API, in bounded time (issue 29).

A GitHub-hosted runner is outside network.publicAccessCidrs (EKS's public endpoint, AKS's authorized
ranges). Such an endpoint does not refuse the runner's connections, it drops them: the provider's
Configure (pulumi-kubernetes provider/pkg/provider/provider.go at v4.25.0, lines 872-884: the server
version, then the discovery of every resource type) waits on each dial, and on the real engine a preview
against a dropping endpoint had not finished after 7 minutes (tests/controlplane/test_pulumi_preview_offline.py
shows it has not finished after a minute and kills it). A *refused* connection fails those two calls at
once: the provider marks the cluster unreachable and diffs the program's inputs against the state
client-side (the same file: 3 s on the real engine).

So, with TORCHFLEET_PREVIEW_WITHOUT_CLUSTER=true and only in a dry run, each cloud's Kubernetes provider
gets a kubeconfig whose one server is a port on 127.0.0.1 that this process holds bound and never
listens on (the kernel answers a SYN to it with a reset: refused, without a timeout). Nothing else of the
kubeconfig is kept: no credentials, no exec plugin to run. The stacks give the provider the cluster's own
id as `clusterIdentifier` (components/clouds/lifecycle.py), and DiffConfig (provider.go lines 408-421)
plans no replacement while that id is unchanged: the changed kubeconfig is an update of the provider, not
a replacement of every Kubernetes object.

What the switch guards, and what it cannot: it is read by the program, and the Pulumi CLI runs the program
for `pulumi preview` and `pulumi up` only; `pulumi refresh` and `pulumi destroy` configure the provider from
the state and run no program unless given `--run-program` (pulumi/pulumi pkg/cmd/pulumi/operations/refresh.go
and destroy.go at v3.274.0, the flag's default is PULUMI_RUN_PROGRAM). So `pulumi up` with the switch set is
refused before any resource (as are `refresh`/`destroy --run-program`: a real run must reach the cluster, and
the provider would keep the loopback kubeconfig in the state), while a plain `refresh` or `destroy` never sees
it: they dial the kubeconfig kept in the state, the cluster's own (a preview saves no state), and from outside
network.publicAccessCidrs fail after about a minute of dropped dials. `pulumi preview --refresh` (and
`up --refresh`) refreshes first in the same way, before the program runs: the switch does not help it either,
and the provider's error then suggests PULUMI_K8S_DELETE_UNREACHABLE=true, which on a living cluster would drop
every Kubernetes object from the state (unreachable.py). Refreshing is supported only from a machine that
reaches the API; .github/workflows/preview.yml never refreshes (tests/checks/test_workflows.py).

Which provider the line numbers are. They are v4.25.0's (commit f47bc2d6f199, 2026-01-15): the
pulumi-resource-kubernetes that tests/controlplane/build.py builds (modules/pulumi-kubernetes/go.mod), which
is the newest the Go module proxy serves (`go list -m github.com/pulumi/pulumi-kubernetes/provider/v4@latest`
answers that pseudo-version; `@v4.34.2` answers 403 "This module version is not available", 2026-11-28).
The Python SDK is pinned at 4.34.2 (pyproject.toml), and a user's `pulumi up` runs the provider plugin of the
SDK's version, 4.34.2; on the test tier the engine warns that the SDK expected >=4.34.2 and has 4.25.0. So the
real-engine tests here ran 4.25.0's Configure and DiffConfig, not 4.34.2's; that they behave the same in
4.34.2 is not tested on this machine.

Why a switch the workflow sets after its own probe (`python -m torchfleet.api_probe`), not a probe in the
program: the program stays free of network calls of its own and gives the same plan for the same inputs
(`torchfleet synth` runs it under mocks); what a preview shows changes only when someone asked for it, and
the workflow writes that it did into the run's summary; a laptop whose VPN blinks still gets the real
provider, not a silent client-side diff. Without the switch nothing changes.

What such a preview shows: every change of the program, cloud and Kubernetes (each Kubernetes object's
inputs diffed against the state). What it cannot: anything only the API server knows (drift, admission,
the schema of a CRD, what a server-side dry run would refuse); docs/deploy.md#ci-preview-from-hosted-runners.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping

import pulumi

from components.spec import ConfigError

SWITCH = "TORCHFLEET_PREVIEW_WITHOUT_CLUSTER"
NAME = "torchfleet-offline-preview"

# The socket that keeps the refusing port ours for the life of the program (a bound socket that never
# listens: connections to it are reset, and no other process can bind the port meanwhile).
_held: socket.socket | None = None


def requested(environ: Mapping[str, str] = os.environ, dry_run: bool | None = None) -> bool:
    """Whether the switch is on; raises ConfigError for a value other than true/false, or for a real run."""
    value = environ.get(SWITCH)
    if value is None or value == "false":
        return False
    if value != "true":
        raise ConfigError([f"{SWITCH}={value!r}: set it to true (preview without the cluster) or unset it"])
    if not (_dry_run() if dry_run is None else dry_run):
        raise ConfigError([
            f"{SWITCH}=true is set for a run that is not a preview: `pulumi up` (and `refresh`/`destroy` with "
            "--run-program) must reach the cluster (the provider would keep a loopback kubeconfig in the state). "
            "Unset it; it is "
            "for `pulumi preview` from a machine outside network.publicAccessCidrs "
            "(docs/deploy.md#ci-preview-from-hosted-runners)"
        ])
    return True


def _dry_run() -> bool:
    return pulumi.runtime.is_dry_run()


def refusing_port() -> int:
    """A port on 127.0.0.1 that refuses connections while this process lives."""
    global _held
    if _held is None:
        _held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        _held.bind(("127.0.0.1", 0))
    return _held.getsockname()[1]


def loopback_kubeconfig(port: int) -> str:
    """A kubeconfig with one server, https://127.0.0.1:PORT, and no credentials."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME}}],
        "current-context": NAME,
        "users": [{"name": NAME, "user": {}}],
    })


def provider_kubeconfig(kubeconfig: pulumi.Input[str], environ: Mapping[str, str] = os.environ) -> pulumi.Input[str]:
    """KUBECONFIG for a cloud's Kubernetes provider (one that has a clusterIdentifier): the loopback one
    when the switch is on in a preview, else KUBECONFIG itself."""
    if not requested(environ):
        return kubeconfig
    return pulumi.Output.secret(loopback_kubeconfig(refusing_port()))
