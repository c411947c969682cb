"""Every stack's Kubernetes provider and an unreachable cluster: nothing set, on purpose (issue 29).

What pulumi-kubernetes does when it cannot reach the API server (provider/pkg/provider/provider.go at
v4.25.0, and tests/controlplane/test_pulumi_unreachable.py on the real engine):

- `pulumi preview` degrades by itself when the connection is *refused*: the provider marks the cluster
  unreachable instead of failing, and diffs the inputs against the state client-side, in seconds. An
  endpoint restricted to other addresses (a runner outside network.publicAccessCidrs) *drops* the
  connection attempts instead, and the provider's preview then waits without bound (minutes, on the real
  engine): a preview from such a runner needs TORCHFLEET_PREVIEW_WITHOUT_CLUSTER=true, set by the
  workflow after its probe, which hands the provider a refusing loopback endpoint
  (components/clouds/offline_preview.py). Either way it shows the program's changes without the
  server's dry run. (`skipUpdateUnreachable` would instead answer the old inputs, hiding the very
  changes under review.)
- `pulumi destroy` fails on each Kubernetes object unless `deleteUnreachable` is true, which drops each
  object from the state and deletes nothing. Right for a cluster that is gone (deleted out of band, or a
  failed `up`); wrong for a cluster that is alive and only unreachable from here: what its objects hold in
  the cloud (volumes the etcd claims provisioned, load balancers) outlives them and keeps billing.
  And a provider that keeps `deleteUnreachable` makes every `pulumi refresh` from such a machine drop
  every object of a living cluster from the state.

So no provider sets either option, and the escape stays an explicit act for `destroy` alone:
`PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy` (the provider reads the variable when its inputs do
not set the option). An explicit `delete_unreachable=False` would close that escape; leaving it unset
lets the Python SDK copy the variable into the provider's inputs when the program runs
(pulumi_kubernetes/provider.py: `if delete_unreachable is None: ... get_env_bool(...)`), where it would
stay for every later refresh and destroy. So a program run (`up`, `preview`, `torchfleet synth`) with
either variable set is refused, before any resource; so is a run other than a preview with
TORCHFLEET_PREVIEW_WITHOUT_CLUSTER set (offline_preview.requested), in the same list of problems.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from components.clouds import offline_preview
from components.spec import ConfigError

# The variables pulumi_kubernetes' Provider copies into its inputs when the program runs.
VARIABLES = ("PULUMI_K8S_DELETE_UNREACHABLE", "PULUMI_K8S_SKIP_UPDATE_UNREACHABLE")


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Raise ConfigError naming each variable that is set; docs/deploy.md#when-the-api-cannot-be-reached."""
    found = [name for name in VARIABLES if name in environ]
    problems = [
        f"{name}={environ[name]!r} is set: the Kubernetes provider would keep it in the stack's state, and "
        "every later refresh or destroy from a machine that cannot reach the cluster would forget its objects "
        "(docs/deploy.md#when-the-api-cannot-be-reached). Unset it for `pulumi up`/`preview`; it belongs to "
        "`pulumi destroy` of a cluster that is gone"
        for name in found
    ]
    try:
        offline_preview.requested(environ)
    except ConfigError as e:
        problems += e.problems
    if problems:
        raise ConfigError(problems)
