"""What every command that talks to a cluster shares: its options (--stack, --kubeconfig, --context,
-n/--namespace, --operator), the Session they resolve to (the Target, and the kubeconfig to reach it), and the
JobClient connected for it.

submit and sweep (commands.py), list/status/logs/delete (inspect_commands.py), tensorboard and the results
commands build on it; it imports none of them. A wrong namespace or context is a UsageError (exit 2) before
anything connects.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from components import spec as platform
from components.spec.namespaces import reserved_namespace
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import UsageError

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
EXIT_DOC = "Exit codes: 0 ok; 2 usage or validation error (nothing submitted); 1 cluster error."


def cluster_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster (one of --stack or --kubeconfig/--context; default: the current context)")
    g.add_argument("--stack", help="a stack's name (aws-usw2, in stacks/) or its file (any path, e.g. "
                                   "stacks/Pulumi.aws-usw2.yaml): its pools, operator, namespace; its kubeconfig "
                                   "output is read through Pulumi (default: $TORCHFLEET_STACK, then the config file)")
    g.add_argument("--stacks-dir", type=Path, default=targets.STACKS_DIR, help=argparse.SUPPRESS)
    g.add_argument("--kubeconfig", type=Path, help="a kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    g.add_argument("--context", help="a context in the kubeconfig")
    g.add_argument("-n", "--namespace", help=f"default: the stack's, else {platform.DEFAULT_NAMESPACE}")
    g.add_argument("--operator", choices=platform.OPERATORS,
                   help=f"default: the stack's, else {platform.OPERATORS[0]}: job makes a Kubernetes Indexed Job "
                        "(no controller needed); kubeflow a PyTorchJob; torchelastic an ElasticJob (its 2020 "
                        "controller cannot start pods under the restricted Pod Security level: README.md)")


@dataclass
class Session:
    target: targets.Target
    kubeconfig_data: Any = None
    context: str | None = None  # the local stack's kubernetes:context, when its config sets one


def resolve_target(args: argparse.Namespace, *, need_cluster: bool) -> Session:
    """The target from --stack (file, then Pulumi outputs when a cluster is needed) or the defaults."""
    data = context = None
    if args.context is not None and not args.context.strip():
        raise UsageError("--context: empty; give a context of the kubeconfig (`kubectl config get-contexts`)")
    if args.stack is not None:
        t = targets.from_stack(args.stack, args.stacks_dir)
        if need_cluster and not (args.kubeconfig or args.context) and t.cloud == "local":
            # The local stack deploys to the kubeconfig's current context, or to its kubernetes:context
            # (components/clouds/local.py): the same cluster, reached without the Pulumi CLI (issue 22).
            context = targets.local_context(args.stack, args.stacks_dir)
        elif need_cluster and not (args.kubeconfig or args.context):
            outputs = targets.read_stack_outputs(t.stack or args.stack)  # a path names its stack too
            t = targets.with_outputs(t, outputs)
            data = outputs.get("kubeconfig")
            if not data:
                raise UsageError(f"--stack {args.stack}: the stack has no kubeconfig output; has it been deployed "
                                 "(pulumi up)? Or pass --kubeconfig/--context")
    else:
        t = targets.defaults(getattr(args, "cloud", None) or targets.DEFAULT_CLOUD)
    if args.namespace is not None:
        if not _DNS_LABEL.fullmatch(args.namespace):
            raise UsageError(f"--namespace: must be a DNS label (lowercase letters, digits, '-'), "
                             f"got {args.namespace!r}")
        if (why := reserved_namespace(args.namespace)) is not None:
            # Issue 23: `submit -n kube-system` was accepted; a job there escapes the training
            # namespace's restricted Pod Security and default-deny policies (components/spec/namespaces.py).
            raise UsageError(f"--namespace: {why}; jobs run in the stack's training namespace "
                             f"(training.namespace, default {platform.DEFAULT_NAMESPACE})")
        t = replace(t, namespace=args.namespace, etcd_endpoint=targets.default_etcd_endpoint(args.namespace))
    if args.operator:
        t = replace(t, operator=args.operator)
    return Session(t, data, context)


def job_client(args: argparse.Namespace, session: Session):
    from torchfleet.jobs.cluster import JobClient
    from torchfleet.jobs.kubeconfig import connect

    api = connect(args.kubeconfig, args.context or session.context, session.kubeconfig_data)
    return JobClient(api, session.target.namespace, session.target.operator)


def connect_session(args: argparse.Namespace):
    """The Session and a JobClient connected for it: what a command on an existing job starts with."""
    session = resolve_target(args, need_cluster=True)
    return session, job_client(args, session)
