"""`torchfleet check`: run the guardrails (components/policy/) on a stack, offline.

Synthesizes the stack under mocks (as `torchfleet synth` does), then runs every rule with the
stack's own limits (torchfleet:guardrails). Prints one line per violation, "rule  resource  why",
and on stderr the most the stack can cost per hour at list prices (torchfleet/cost.py) and the quotas
and APIs the cloud must grant before `pulumi up` is useful (components/clouds/preflight.py), and whether this
machine reaches the API the stack makes (torchfleet/reach.py). The example stacks' placeholders
(components/placeholders.py: 203.0.113.0/24, an all-zero admin) are errors, one line each, "placeholder  KEY
why; replace it: pulumi config set --path ...": `pulumi up` refuses them.
Exit codes: 0 clean, 1 violations or placeholders, 2 the stack cannot be checked (bad config, missing file) or
--policy-config-out cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from components import placeholders, policy
from components.clouds import preflight
from torchfleet import aws_admins, azure_admins, cost, output_paths, reach, synth_summary
from torchfleet.synth import required_stack, stack_option, synth_or_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="run the guardrail policies on a stack offline (no cloud, no Pulumi CLI)",
        description="Exit codes: 0 clean, 1 violations (one line each: rule, resource, why), 2 invalid stack.",
    )
    stack_option(p)
    p.add_argument(
        "--policy-config-out",
        type=Path,
        help="also write the stack's limits as a --policy-pack-config file for the CrossGuard pack in policy/",
    )
    p.add_argument(
        "--allow-placeholders",
        action="store_true",
        help="report the example stacks' placeholders (203.0.113.0/24, an all-zero admin) as warnings, not "
             "errors: for a preview of the shipped stacks (CI); `pulumi up` still refuses them",
    )
    p.set_defaults(func=run)


def resources_of(recorded: list[Any]) -> list[policy.Resource]:
    """The recording monitor's resources in the shape the rules take (and CrossGuard gives)."""
    return [{"type": r.type, "name": r.name, "inputs": r.inputs, "options": r.options} for r in recorded]


def run(args: argparse.Namespace) -> int:
    if args.policy_config_out is not None:
        output_paths.check_file("--policy-config-out", args.policy_config_out)  # before the synth
    result = synth_or_report(*required_stack(args))
    if result is None:
        return 2
    guardrails = result.spec.guardrails
    limits = policy.Limits(guardrails.max_gpus, guardrails.allow_on_demand_gpus, guardrails.restrict_public_endpoint)
    if args.policy_config_out:
        try:
            args.policy_config_out.write_text(json.dumps(policy.pack_config(limits), indent=2) + "\n")
        except OSError as error:
            raise output_paths.failed_write("--policy-config-out", args.policy_config_out, error) from None
    found = policy.check(resources_of(result.resources), limits.max_gpus, limits.allow_on_demand_gpus,
                         restrict_public_endpoint=limits.restrict_public_endpoint)
    violations = [v for v in found if not v.advisory]
    # The rules see every registered resource; synth counts only what `up` makes: both said, one count each.
    made, components, providers = synth_summary.counts(result.resources)
    registered = len(result.resources)
    for v in violations:
        print(v.line())
    # The example's values a user must replace (issue 29): errors here, as `pulumi up` refuses them.
    to_replace = placeholders.find(result.spec)
    for p in to_replace:
        line = f"placeholder  {p.key}  {p.line(result.stack)}"
        if args.allow_placeholders:  # a preview of the shipped stacks (CI): said, not failed
            print(f"warning: {line}", file=sys.stderr)
        else:
            print(line)
    # Advisories (public-endpoint unless guardrails.restrictPublicEndpoint) go to stderr and never
    # fail the check: stdout stays one line per violation.
    for v in found:
        if v.advisory:
            print(f"advisory: {v.line()}", file=sys.stderr)
    print(
        f"{result.stack}: {len(violations)} violation(s) and {len(found) - len(violations)} advisory of "
        f"{len(policy.RULES)} rules over {registered} registered: {made} resources (synth's count), {components} "
        f"components, {providers} provider(s) (maxGpus={limits.max_gpus}, "
        f"allowOnDemandGpus={str(limits.allow_on_demand_gpus).lower()}, "
        f"restrictPublicEndpoint={str(limits.restrict_public_endpoint).lower()})",
        file=sys.stderr,
    )
    if to_replace:
        print(f"{result.stack}: {len(to_replace)} placeholder(s) of the example to replace before `pulumi up` "
              "(components/placeholders.py)", file=sys.stderr)
    estimate = cost.stack_estimate(result.spec)  # what the stack can cost at its maximum (issue 13)
    if estimate is not None:
        print(estimate.render(f"{result.stack}, every pool at maxNodes"), file=sys.stderr)
    idle = cost.idle_estimate(result.spec)  # what it costs with no job running (issue 29)
    if idle is not None:
        print(idle.render(f"{result.stack}, idle (no job running)"), file=sys.stderr)
        print(f"  per month ({cost.HOURS_PER_MONTH} h): {idle.total * cost.HOURS_PER_MONTH:.2f} USD", file=sys.stderr)
    needs = preflight.render(result.spec)  # quotas and APIs the cloud must grant first (issue 20)
    if needs:
        print(needs, file=sys.stderr)
    # Whether this machine reaches the API the stack makes (issue 29); advice, never the exit code.
    for line in reach.report(result.spec, result.stack):
        print(line, file=sys.stderr)
    # Azure grants cluster admin to torchfleet:admins only: is the caller one? (issue 29); advice too.
    for line in azure_admins.report(result.spec):
        print(line, file=sys.stderr)
    # So does AWS: is $TORCHFLEET_AWS_CALLER in torchfleet:admins? (`pulumi up` refuses otherwise); advice.
    for line in aws_admins.report(result.spec):
        print(line, file=sys.stderr)
    return 1 if violations or (to_replace and not args.allow_placeholders) else 0
