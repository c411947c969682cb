"""`torchfleet plan`: what a config change would do to a deployed stack, offline, before `pulumi up`.

    torchfleet plan --stack aws-usw2 --set 'torchfleet:zones=["us-west-2a","us-west-2c"]'
    torchfleet plan --stack aws-usw2 --against my-edited/Pulumi.aws-usw2.yaml

Both configs are synthesized under mocks and compared resource by resource (torchfleet/preview/day2.py):
replacements (and which input forces each, from the provider's own rules), create-first replacements
that collide on a fixed name, refusals (a change the cloud refuses or one that loses the store's data,
each with the safe sequence), updates, ignored changes. The changed config is also held to what
`torchfleet check` holds it to (torchfleet/preview/guardrails.py): a guardrail it breaks refuses the change,
and the cost check prints (every pool at maxNodes, idle) is shown before and after. Exit codes: 0 the
change can be applied, 1 a replacement would collide (the `up` would fail half-applied), 2 the change is
refused (by a cloud's rule or a guardrail) or the input is wrong (a config error, a bad --set). docs/day-2.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.spec import ConfigError
from torchfleet import stack_ref
from torchfleet.jobs.errors import UsageError
from torchfleet.synth import required_stack, stack_option

EXIT_COLLIDES = 1
EXIT_REFUSED = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="what a config change would replace, update or refuse, offline (before `pulumi up`)",
        description="Compares the stack's config with a changed one (--set, --against) under mocks. Exit codes: "
                    "0 the change can be applied, 1 a replacement would collide on a fixed name, 2 refused (a "
                    "cloud's rule, or a guardrail `torchfleet check` would fail on) or invalid input.",
    )
    stack_option(p)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a changed config value, YAML or JSON: torchfleet:zones='[\"us-west-2a\",\"us-west-2c\"]'; "
                        "a path into a value as `pulumi config set --path` takes it: "
                        "torchfleet:gpuPools[0].maxNodes=4; repeatable")
    p.add_argument("--against", type=Path, metavar="STACK_FILE",
                   help="the changed config as another stack file (its config replaces the stack's; --set applies "
                        "on top of it)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (for scripts and CI)")
    p.add_argument("--all", action="store_true", help="also list the unchanged resources")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchfleet.preview import day2
    from torchfleet.preview.force_new_rules import RulesError

    stack, flag = required_stack(args)
    if not args.sets and args.against is None:
        raise UsageError("give the change: --set KEY=VALUE (repeatable) or --against STACK_FILE, e.g. "
                         "--set 'torchfleet:zones=[\"us-west-2a\",\"us-west-2c\"]'")
    stack_file = stack_ref.resolve(str(stack), flag=flag)  # a UsageError: exit 2, naming the flag
    against = stack_ref.resolve(str(args.against), flag="--against") if args.against is not None else None
    try:
        changes = dict(day2.parse_set(text) for text in args.sets)
        plan = day2.plan_stack_file(stack_file, changes, against)
    except ConfigError as error:
        print(f"torchfleet plan: {error}", file=sys.stderr)
        return EXIT_REFUSED
    except RulesError as error:  # a shipped rules file broken: ours to fix, not the user's
        raise RuntimeError(f"torchfleet/preview/force_new: {error}") from None
    for line in plan.placeholders:  # a warning: the plan stands, `pulumi up` refuses them (issue 29)
        print(f"warning: {line}", file=sys.stderr)
    if args.json:
        json.dump(plan.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(plan, show_all=args.all))
    if plan.refusals or plan.guardrails:
        return EXIT_REFUSED
    return EXIT_COLLIDES if plan.collisions else 0


def render(plan, show_all: bool = False) -> str:
    lines = [f"plan: {plan.stack}: {plan.described}"]
    if plan.refusals:
        lines.append("REFUSED (nothing to apply as it is):")
        lines += [f"  {r.line()}" for r in plan.refusals]
    if plan.guardrails:  # what `torchfleet check` fails on in the changed config (and CrossGuard at `up`)
        lines.append("REFUSED by the guardrails (`torchfleet check` on the changed config fails):")
        lines += [f"  {g.line()}" for g in plan.guardrails]
    if plan.collisions:
        lines.append("COLLISIONS (created before the old one is deleted, under the same name: `up` fails there):")
        lines += [f"  {c.key}: {c.collides}" for c in plan.collisions]
    if plan.cautions:
        lines.append("CAUTION (applies, but read this first):")
        lines += [f"  {r.line()}" for r in plan.cautions]
    sections = [("replace", "replace"), ("unknown", "changed, provider rule unknown"), ("create", "create"),
                ("delete", "delete"), ("update", "update in place"), ("ignored", "ignored (ignoreChanges)")]
    if show_all:
        sections.append(("unchanged", "unchanged"))
    for action, title in sections:
        found = plan.by_action(action)
        if not found:
            continue
        lines.append(f"{title} ({len(found)}):")
        for c in found:
            lines.append(f"  {c.key}{_detail(c)}")
    counts = ", ".join(f"{len(plan.by_action(a))} {a}" for a in ("create", "replace", "update", "delete", "unknown",
                                                                  "ignored", "unchanged"))
    lines.append(f"{counts}")
    lines += [c.line() for c in plan.costs]
    return "\n".join(lines)


def _detail(c) -> str:
    # An input the provider keeps as a set prints as one, with what it gains and loses (ResourceChange.shown).
    if c.action == "replace":
        return f" [{c.order}]: " + "; ".join(c.replaced_by)
    if c.action in ("update", "ignored"):
        return ": " + ", ".join(c.shown(p) for p in (c.ignored if c.action == "ignored" else c.paths))
    if c.action == "unknown":
        return f": {', '.join(c.shown(p) for p in c.paths)} ({c.note})"
    return f" ({c.note})" if c.note else ""
