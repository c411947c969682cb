"""The offline plan of a config change: what `pulumi up` would create, update, replace or delete.

Both configs run through the program under mocks (runner.synth, the same stack name, so the same
URNs); resources are matched by URN (type, name and parents) and their recorded inputs compared.
Each resource is then:

- create / delete: only in the new / old program (a deleted `protect`ed resource fails the `up`: refused;
  a `retainOnDelete` one is left in the cloud and dropped from the state);
- replace: a changed input is one its type's provider replaces on (force_new/<file>.yaml, read by
  force_new_rules), or one its `replaceOnChanges` option names, or it depends on a replaced resource's
  output for such an input (unknown until that one exists), or its provider is replaced. A replacement is
  delete-first when the resource is `deleteBeforeReplace` (pulumi-kubernetes also deletes first a named
  object it recreates under the same name, provider.go Diff), else create-first, and a create-first
  replacement of a resource whose cloud name is fixed collides ("already exists": plans.fixed_name);
- update: inputs changed, none of them replacing; ignored: every changed input is under the resource's
  `ignoreChanges` (Pulumi sends the old value); unchanged.

A changed resource whose type has no row yet is `unknown` (update or replace, not known): the plan says
which file lacks the row instead of guessing. Pulumi's dynamic resources (components/clouds/propagation.py,
settle.py) decide with their own provider's diff(), which is called here.

Refusals: changes the cloud refuses or that lose data, from the rules each cloud registers
(components/clouds/day2.py), and any replacement of the store (components/clouds/lifecycle.py's data).
What a mock cannot show: values the cloud computes (a replaced resource's new id is a mock id here, so
what depends on it is followed through the recorded property dependencies instead), and a provider's
server-side checks.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components import placeholders
from components.clouds import day2 as refusal_rules
from components.clouds import lifecycle
from components.spec.parse import _TOP_KEYS
from torchfleet.preview import force_new_rules, mock_aws, plans
from torchfleet.preview import guardrails as policy_checks
from torchfleet.preview.force_new_rules import Rules, covers
from torchfleet.preview.monitor import Recorded
from torchfleet.preview.stack_file import StackFileError, load_stack_file, parse_yaml_text

# The config's top-level keys (components/spec/parse.py), for --set's did-you-mean on a path into a missing key.
KNOWN_TOP_KEYS = [f"torchfleet:{k}" for k in sorted(_TOP_KEYS)]
ACTIONS = ("create", "replace", "update", "unknown", "delete", "ignored", "unchanged")
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
# Inputs that are not the resource's own: a dynamic resource's pickled provider.
_NOT_INPUTS = {"__provider"}


@dataclass
class ResourceChange:
    action: str  # one of ACTIONS
    type: str
    name: str
    paths: list[str] = field(default_factory=list)  # changed input paths (all of them, ignored ones too)
    replaced_by: list[str] = field(default_factory=list)  # what forces the replacement, each with why
    ignored: list[str] = field(default_factory=list)  # changed paths under ignoreChanges
    order: str | None = None  # replace: "delete-first" | "create-first"
    collides: str | None = None  # create-first replacement: the fixed cloud name both would hold
    note: str = ""  # delete: kept / protected; unknown: which rules file lacks the row
    # A changed input the provider declares as a set (force_new rows' `sets:`): path -> (added, removed).
    set_changes: dict[str, tuple[list[Any], list[Any]]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.type}::{self.name}"

    def shown(self, path: str) -> str:
        """A changed path as the plan prints it: a set with what it gains and loses, not list positions."""
        if path not in self.set_changes:
            return path
        added, removed = self.set_changes[path]
        return f"{path} (a set: " + ", ".join([f"+{_text(v)}" for v in added] + [f"-{_text(v)}" for v in removed]) + ")"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "type": self.type, "name": self.name}
        for name in ("paths", "replaced_by", "ignored"):
            if getattr(self, name):
                out[name.replace("_b", "B")] = getattr(self, name)
        if self.set_changes:
            out["setChanges"] = {p: {"added": a, "removed": r} for p, (a, r) in self.set_changes.items()}
        for name in ("order", "collides", "note"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


@dataclass
class Day2Plan:
    stack: str
    changes: list[ResourceChange]  # every custom resource, in registration order (old-only ones last)
    refusals: list[refusal_rules.Refusal] = field(default_factory=list)
    described: str = ""  # what changed, as the user gave it
    cautions: list[refusal_rules.Refusal] = field(default_factory=list)  # applies, but read first (exit 0)
    placeholders: list[str] = field(default_factory=list)  # the changed config's (components/placeholders.py)

    # What `torchfleet check` says of the changed config: each broken guardrail refuses (exit 2), and the
    # cost before and after (torchfleet/preview/guardrails.py).
    guardrails: list[policy_checks.GuardrailRefusal] = field(default_factory=list)
    costs: list[policy_checks.CostChange] = field(default_factory=list)

    def by_action(self, action: str) -> list[ResourceChange]:
        return [c for c in self.changes if c.action == action]

    def get(self, type_: str, name: str) -> ResourceChange:
        found = [c for c in self.changes if c.type == type_ and c.name == name]
        assert len(found) == 1, f"no change for {type_}::{name}"
        return found[0]

    @property
    def collisions(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.collides]

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "change": self.described,
            "refused": [{"key": r.key, "reason": r.reason, "instead": r.instead} for r in self.refusals],
            "collisions": [f"{c.key} ({c.collides})" for c in self.collisions],
            "cautions": [{"key": r.key, "reason": r.reason, "instead": r.instead} for r in self.cautions],
            "counts": {a: len(self.by_action(a)) for a in ACTIONS},
            "resources": [c.to_json() for c in self.changes if c.action != "unchanged"],
            "guardrails": [g.to_json() for g in self.guardrails],
            "cost": [c.to_json() for c in self.costs],
        }


# ---- comparing inputs ----------------------------------------------------------------------------

def _child(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def set_change(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
    """(added, removed) between two lists taken as sets: order means nothing, each element once."""
    before = {_text(v): v for v in old}
    after = {_text(v): v for v in new}
    return [after[k] for k in after if k not in before], [before[k] for k in before if k not in after]


def changed_keys(old_config: dict[str, Any], new_config: dict[str, Any]) -> list[str]:
    """The config paths that differ, as --set takes them: torchfleet:gpuPools[0].maxNodes (what a broken
    guardrail names as the change that breaks it, torchfleet/preview/guardrails.py)."""
    out: list[str] = []
    for key in list(old_config) + [k for k in new_config if k not in old_config]:
        out += changed_paths(old_config.get(key), new_config.get(key), key)
    return out


def changed_paths(old: Any, new: Any, path: str = "", sets: frozenset[str] = frozenset()) -> list[str]:
    """The input paths whose values differ, as deep as both sides are objects or lists.

    Lists compare by position (a list of subnet ids that changes order changes at each index: what a
    provider does with it is its type's rule), except where the provider's schema declares a set (``sets``,
    paths as force_new rows write them): that changes at its own path, and only when an element comes or
    goes. An input present on one side only is changed at its path.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in list(old) + [k for k in new if k not in old]:
            if not path and key in _NOT_INPUTS:
                continue
            out += changed_paths(old.get(key), new.get(key), _child(path, key), sets)
        return out
    if isinstance(old, list) and isinstance(new, list):
        if path and force_new_rules.normalize(path) in sets:
            return [path] if any(set_change(old, new)) else []
        out = []
        for i in range(max(len(old), len(new))):
            out += changed_paths(old[i] if i < len(old) else None, new[i] if i < len(new) else None,
                                 _child(path, i), sets)
        return out
    return [] if _same(old, new) else [path or "<inputs>"]


def _value_at(inputs: dict[str, Any], path: str) -> Any:
    value: Any = inputs
    for name, index, key in _TOKEN.findall(path):
        step = name or key
        if step:
            value = value.get(step) if isinstance(value, dict) else None
        elif index.isdigit():
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
    return value


_TOKEN = re.compile(r'\.?([A-Za-z_$][A-Za-z0-9_$]*)|\[(\d+|\*)\]|\["([^"]*)"\]')


def _tokens(path: str) -> list[str]:
    return [name or (f"[{index}]" if index else f'"{key}"') for name, index, key in _TOKEN.findall(path)]


def _ignored(path: str, ignore_changes: list[str]) -> bool:
    """Pulumi's ignoreChanges: a path ignores itself and everything under it; `[*]` is any item of a list,
    `[0]` that item only (pulumi/pulumi sdk/go/common/resource/properties_path.go, ParsePropertyPath)."""
    changed = _tokens(path)
    for ignore in ignore_changes:
        rule = _tokens(ignore)
        if len(rule) <= len(changed) and all(
            r == c or (r == "[*]" and c.startswith("[")) for r, c in zip(rule, changed, strict=False)
        ):
            return True
    return False


# ---- classifying ---------------------------------------------------------------------------------

def _kubernetes_object(r: Recorded) -> bool:
    return (r.type.startswith("kubernetes:") and r.type != "kubernetes:helm.sh/v3:Release"
            and "metadata" in r.inputs)


def _dynamic_replaces(old: Recorded, new: Recorded, paths: list[str]) -> list[str] | None:
    """A dynamic resource's own provider diff: the inputs it replaces on, or None when it cannot be asked."""
    blob = new.inputs.get("__provider")
    if not isinstance(blob, str):
        return None
    try:
        import dill

        provider = dill.loads(base64.b64decode(blob))  # noqa: S301 (the program's own provider, pickled by it)
        result = provider.diff(f"{old.name}-id", dict(old.inputs), dict(new.inputs))
    except Exception:  # a provider that cannot be asked offline: say unknown
        return None
    if result.changes is False:
        return []
    return [f"{p} (its provider's diff)" for p in (result.replaces or [])]


def _order(r: Recorded, old: Recorded) -> str:
    if r.options.get("deleteBeforeReplace"):
        return "delete-first"
    if _kubernetes_object(r):
        meta_new, meta_old = r.inputs.get("metadata") or {}, old.inputs.get("metadata") or {}
        if meta_new.get("name") and meta_new.get("name") == meta_old.get("name") \
                and meta_new.get("namespace") == meta_old.get("namespace"):
            return "delete-first"  # pulumi-kubernetes provider.go Diff: deleteBeforeReplace for a named object
    return "create-first"


def _sets_of(type_: str, rules: Rules) -> frozenset[str]:
    """The inputs a type's provider keeps as sets; none when its rules file is broken (a changed resource
    of that file raises in _judge, as before)."""
    try:
        rule = rules.get(type_)
    except force_new_rules.RulesError:
        return frozenset()
    return frozenset(rule.sets) if rule else frozenset()


def classify(old: list[Recorded], new: list[Recorded], rules: Rules) -> list[ResourceChange]:
    """Every custom resource of either program, classified (pure: recorded resources in, changes out)."""
    old_by_urn = {r.urn: r for r in old if r.custom}
    new_by_urn = {r.urn: r for r in new if r.custom}
    changes: dict[str, ResourceChange] = {}
    for urn, r in new_by_urn.items():
        before = old_by_urn.get(urn)
        if before is None:
            changes[urn] = ResourceChange("create", r.type, r.name)
            continue
        sets = _sets_of(r.type, rules)
        paths = changed_paths(before.inputs, r.inputs, sets=sets)
        ignore = list(r.options.get("ignoreChanges") or [])
        ignored = [p for p in paths if _ignored(p, ignore)]
        effective = [p for p in paths if p not in ignored]
        change = ResourceChange("unchanged", r.type, r.name, paths=paths, ignored=ignored)
        for p in paths:
            if force_new_rules.normalize(p) in sets:
                old_list, new_list = _value_at(before.inputs, p), _value_at(r.inputs, p)
                if isinstance(old_list, list) and isinstance(new_list, list):
                    change.set_changes[p] = set_change(old_list, new_list)
        changes[urn] = change
        if not effective:
            change.action = "ignored" if ignored else "unchanged"
            continue
        _judge(change, before, r, effective, rules)
    # What depends on a replaced (or newly created) resource's outputs sees them unknown, and what a
    # replaced provider manages is replaced with it: repeat until nothing more is replaced.
    while True:
        replaced = {u for u, c in changes.items() if c.action == "replace"}
        # A replaced resource that keeps its fixed cloud name keeps the names and ARNs made of it.
        renamed = {u for u in replaced if plans.fixed_name(new_by_urn[u]) is None
                   or plans.fixed_name(new_by_urn[u]) != plans.fixed_name(old_by_urn[u])}
        grew = False
        for urn, r in new_by_urn.items():
            change = changes[urn]
            if change.action in ("replace", "create"):
                continue
            forced = _forced_by_others(r, replaced, renamed, rules, new_by_urn)
            if forced:
                change.action = "replace"
                change.replaced_by += forced
                # The engine replaces what a replaced provider manages without asking that provider's diff:
                # only the deleteBeforeReplace option orders it.
                by_provider_only = all(why.startswith("its provider ") for why in forced)
                change.order = ("delete-first" if r.options.get("deleteBeforeReplace") else "create-first") \
                    if by_provider_only else _order(r, old_by_urn[urn])
                grew = True
        if not grew:
            break
    for urn, change in changes.items():
        # Replaced only because its provider is: the new one is made in the new cluster, no collision.
        if change.action == "replace" and change.order == "create-first" \
                and any(not why.startswith("its provider ") for why in change.replaced_by):
            before, after = old_by_urn[urn], new_by_urn[urn]
            name = plans.fixed_name(after)
            if name is not None and name == plans.fixed_name(before):
                change.collides = name
    for urn, r in old_by_urn.items():
        if urn not in new_by_urn:
            note = ""
            if r.options.get("protect"):
                note = "protected: the `up` fails on it and deletes nothing"
            elif r.options.get("retainOnDelete"):
                note = "kept: dropped from the state, left in the cloud"
            changes[urn] = ResourceChange("delete", r.type, r.name, note=note)
    return list(changes.values())


def _judge(change: ResourceChange, before: Recorded, r: Recorded, effective: list[str], rules: Rules) -> None:
    forced: list[str] = []
    for on in r.options.get("replaceOnChanges") or []:
        forced += [f"{p} (replaceOnChanges {on})" for p in effective if covers(on, p)]
    if r.type.startswith("pulumi-python:dynamic:"):
        dynamic = _dynamic_replaces(before, r, effective)
        if dynamic is None:
            change.action, change.note = "unknown", "a dynamic resource whose provider could not be asked"
            return
        forced += dynamic
    else:
        rule = rules.get(r.type)
        if rule is None and not forced:
            missing = rules.missing_file(r.type)
            where = missing or f"force_new/{force_new_rules.file_of(r.type) or '<no file for this package>'}.yaml"
            change.action = "unknown"
            change.note = f"no forceNew row for {r.type} in {where}: update or replace is not known"
            return
        if rule is not None:
            forced += [f"{p} (forceNew {f}, {rule.source})" for p in effective for f in rule.force_new if covers(f, p)]
    if forced:
        change.action, change.replaced_by, change.order = "replace", _unique(forced), _order(r, before)
    else:
        change.action = "update"


def _forced_by_others(r: Recorded, replaced: set[str], renamed: set[str], rules: Rules,
                      new_by_urn: dict[str, Recorded]) -> list[str]:
    """Pulumi replaces every resource of a replaced provider; an input that takes a replaced resource's
    output (its recorded property dependency) is unknown until the new one exists, and replaces the
    resource when it is a force-new input (as a provider's diff of an unknown value does in `preview`)."""
    forced = []
    provider = (r.options.get("provider") or "").rsplit("::", 1)[0]
    if provider in replaced:
        forced.append(f"its provider {new_by_urn[provider].name} is replaced")
    rule = rules.get(r.type)
    for key, urns in (r.options.get("propertyDependencies") or {}).items():
        for urn in urns:
            if urn not in renamed or urn not in new_by_urn:
                continue
            dep = new_by_urn[urn]
            force_new = list(rule.force_new) if rule else []
            force_new += list(r.options.get("replaceOnChanges") or [])
            if any(covers(f, key) for f in force_new):
                forced.append(f"{key} (unknown until the new {dep.type}::{dep.name} exists)")
    return _unique(forced)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def store_refusals(changes: list[ResourceChange], cloud: str) -> list[refusal_rules.Refusal]:
    """A replaced or deleted store is refused whatever the cloud's own rules say: the new one is empty."""
    data = lifecycle.KEPT_WITH_THE_DATA.get(cloud, {})
    out = []
    for c in changes:
        if c.type in data and c.action in ("replace", "delete"):
            why = "; ".join(c.replaced_by) if c.action == "replace" else "it is no longer in the program"
            out.append(refusal_rules.Refusal(
                c.key, f"would be {c.action}d ({data[c.type]}): {why}",
                "keep the store's settings as they are, or move the data to a new stack's store first "
                "(docs/day-2.md)"))
    return out


# ---- configs -------------------------------------------------------------------------------------

def parse_set(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` from --set: KEY is `namespace:name` with an optional `.path` or `[i]` (as `pulumi config set
    --path` takes it), VALUE is YAML (so JSON too): `torchfleet:zones=["us-west-2b","us-west-2c"]`."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise StackFileError([f"--set {text!r}: expected KEY=VALUE, e.g. --set 'torchfleet:zones=[\"us-west-2b\"]'"])
    head = re.split(r"[.\[]", key, maxsplit=1)[0]
    if head.count(":") != 1 or not all(head.split(":")):
        raise StackFileError([f"--set {text!r}: the key must start with namespace:name, e.g. torchfleet:network"])
    return key, parse_yaml_text(value, f"--set {key}") if value.strip() else ""


def _path_parts(key: str) -> list[str | int]:
    head, rest = re.match(r"^([^.\[]+)(.*)$", key).groups()  # type: ignore[union-attr]
    parts: list[str | int] = [head]
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", rest):
        parts.append(int(index) if index else name)
    if "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts[1:]) != rest:
        raise StackFileError([f"--set {key}: a path is key.sub.key or key[0].sub, e.g. torchfleet:network.cidr"])
    return parts


def apply_changes(config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The config with each change set; a key may hold a path into its value (`torchfleet:network.cidr`,
    `torchfleet:gpuPools[0].maxNodes`). A None value removes the key (or the item under it)."""
    out = copy.deepcopy(config)
    for key, value in changes.items():
        parts = _path_parts(key)
        target: Any = out
        hint = ""  # a step into a key the config does not have: the one meant, if one is close
        for i, part in enumerate(parts[:-1]):
            nxt = parts[i + 1]
            if isinstance(target, dict):
                if part not in target:
                    hint = _did_you_mean(str(part), list(target) if i else [*target, *KNOWN_TOP_KEYS])
                target = target.setdefault(part, [] if isinstance(nxt, int) else {})
            elif isinstance(target, list) and isinstance(part, int) and part < len(target):
                target = target[part]
            else:
                raise StackFileError([f"--set {key}: {_shown(parts[: i + 1])} is not an object or list holding it"
                                      f"{hint}"])
        last = parts[-1]
        if isinstance(target, dict) and not isinstance(last, int):
            if value is None:
                target.pop(last, None)
            else:
                target[last] = value
        elif isinstance(target, list) and isinstance(last, int) and last <= len(target):
            if value is None:
                if last < len(target):
                    target.pop(last)
            elif last == len(target):
                target.append(value)
            else:
                target[last] = value
        else:
            raise StackFileError([f"--set {key}: {_shown(parts[:-1])} cannot hold {_shown(parts)}"])
    return out


def _did_you_mean(name: str, keys: list[str]) -> str:
    """"; did you mean torchfleet:gpuPools?" (issue: `--set torchfleet:gpuPool[0].maxNodes=16` said only
    that the path holds nothing), else the keys there are."""
    # Compared without the namespace: every top-level key shares `torchfleet:`, which made any name close.
    by_tail = {k.split(":")[-1]: k for k in keys if isinstance(k, str)}
    close = difflib.get_close_matches(name.split(":")[-1], list(by_tail), n=1, cutoff=0.7)
    if close:
        return f" ({name} is not in the config); did you mean {by_tail[close[0]]}?"
    return f" ({name} is not in the config; it has: {', '.join(map(str, keys))})" if keys else ""


def _shown(parts: list[str | int]) -> str:
    return str(parts[0]) + "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts[1:])


def describe(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in changes.items())


# ---- the plan ------------------------------------------------------------------------------------

def plan_configs(stack: str, old_config: dict[str, Any], new_config: dict[str, Any],
                 rules: Rules | None = None, described: str = "") -> Day2Plan:
    """The plan of changing ``stack`` from ``old_config`` to ``new_config`` (both as a stack file's `config:`
    holds them). Raises spec.ConfigError when either config is invalid (the new one's problems named)."""
    from components.config import parse_engine_config
    from torchfleet.preview.runner import engine_config, synth

    rules = rules or force_new_rules.shipped()
    runs = []
    for config in (old_config, new_config):
        engine, secret_keys = engine_config(config)
        spec = parse_engine_config(engine, stack=stack)  # ConfigError before anything is synthesized
        runs.append((spec, engine, secret_keys))
    (old_spec, old_engine, old_secrets), (new_spec, new_engine, new_secrets) = runs
    old = synth(stack, old_engine, old_secrets)
    # The changed program runs against what the old one leaves running: a cloud module reads some of it
    # at preview (components/clouds/aws/live.py: the cluster's minor, zones, node group sizes), and the
    # mocks answer those reads from the old program's resources.
    with mock_aws.running(old.resources):
        new = synth(stack, new_engine, new_secrets)
    changes = classify(old.resources, new.resources, rules)
    refusals = refusal_rules.refusals(refusal_rules.ConfigChange(old_spec, new_spec, old_config, new_config))
    refusals += store_refusals(changes, old_spec.cloud)
    old_inputs = {f"{r.type}::{r.name}": dict(r.inputs) for r in old.resources if r.custom}
    cautions = refusal_rules.cautions(old_spec.cloud, changes, old_inputs)
    broken = policy_checks.refusals(old_spec, new_spec, old.resources, new.resources,
                                    changed_keys(old_config, new_config))
    costs = policy_checks.cost_changes(old_spec, new_spec)
    return Day2Plan(stack, changes, refusals, described, cautions, placeholders.warnings(new_spec),
                    guardrails=broken, costs=costs)


def plan_stack_file(stack_file: Path, changes: dict[str, Any] | None = None, against: Path | None = None,
                    rules: Rules | None = None) -> Day2Plan:
    """The plan of a stack file changed by ``changes`` (dotted keys, see apply_changes) or replaced by the
    config of ``against`` (another stack file), under the first file's stack name."""
    stack = Path(stack_file).name.removeprefix("Pulumi.").removesuffix(".yaml")
    old_config = load_stack_file(stack_file)
    new_config = load_stack_file(against) if against is not None else dict(old_config)
    described = f"--against {against}" if against is not None else ""
    if changes:
        new_config = apply_changes(new_config, changes)
        described = ", ".join(filter(None, [described, describe(changes)]))
    return plan_configs(stack, old_config, new_config, rules, described)
