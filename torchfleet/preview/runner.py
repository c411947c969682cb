"""synth(): run the Torchfleet program for one stack under mocks and return what it registered."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import config as runtime_config

from torchfleet.preview import plans
from torchfleet.preview.mocks import TorchfleetMocks
from torchfleet.preview.monitor import SECRET, Recorded, RecordingMonitor
from torchfleet.preview.stack_file import load_stack_file

REPO = Path(__file__).resolve().parents[2]
PROJECT = "torchfleet"


@dataclass
class SynthResult:
    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any]  # secrets as "[secret]"
    spec: Any = None  # the PlatformSpec the program was built from

    def of_type(self, type_: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Recorded:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
        return found[0]

    def children(self, parent: Recorded) -> list[Recorded]:
        return [r for r in self.resources if r.parent == parent.key]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the program creates, as a manifest (apiVersion, kind, ...)."""
        objects = []
        for r in self.resources:
            if r.custom and r.type.startswith("kubernetes:") and "apiVersion" in r.inputs:
                obj = {k: v for k, v in r.inputs.items() if k in _K8S_FIELDS or k not in _NOT_K8S}
                objects.append(_integral(obj))
        return objects

    def depends_on(self, r: Recorded) -> set[str]:
        """Keys of every resource `r` waits for, directly or through what it waits for, and through
        its provider (a Kubernetes resource waits for whatever its provider waits for)."""
        by_urn = {x.urn: x for x in self.resources}
        seen: set[str] = set()
        todo = [r]
        while todo:
            current = todo.pop()
            urns = list(current.options.get("dependencies") or [])
            provider = (current.options.get("provider") or "").split("::")
            if len(provider) > 1:
                urns.append("::".join(provider[:-1]))  # "<urn>::<id>"
            for urn in urns:
                dep = by_urn.get(urn)
                if dep is not None and dep.key not in seen:
                    seen.add(dep.key)
                    todo.append(dep)
        return seen

    def to_json(self) -> dict[str, Any]:
        keys = {r.urn: r.key for r in self.resources}
        return {
            "stack": self.stack,
            "resources": [
                {
                    "type": r.type,
                    "name": r.name,
                    "parent": r.parent,
                    "inputs": r.printable,
                    "options": plans.printable_options(r, keys),
                }
                for r in self.resources
            ],
            "outputs": self.outputs,
            # What `pulumi destroy` would do, and what a replacement would collide with (plans.py).
            "destroy": plans.destroy_plan(self.resources).to_json(),
            "replaceCollisions": plans.replace_collisions(self.resources),
        }


def _integral(value: Any) -> Any:
    """Numbers cross the Pulumi wire as doubles (replicas: 3.0); the provider sends 3, and so
    must the manifests we write, or checks comparing integers (checkov's runAsUser) misread them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


_K8S_FIELDS = {"apiVersion", "kind", "metadata", "spec", "data", "stringData", "rules", "roleRef", "subjects"}
# Inputs pulumi-kubernetes adds that are not part of the object.
_NOT_K8S = {"name", "__id"}


def stack_config(stack_file: Path) -> tuple[str, dict[str, str], list[str]]:
    """(stack name, config as the engine passes it, secret keys) from a Pulumi.<stack>.yaml.

    Project defaults from Pulumi.yaml apply first, as the CLI applies them. Encrypted values
    cannot be read offline and stand in as "[secret]".
    """
    stack_file = Path(stack_file)
    name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    # Size-budgeted, duplicate-refusing, shape-checked (raises StackFileError, a ConfigError: exit 2).
    config, secret_keys = engine_config(load_stack_file(stack_file))
    return name, config, secret_keys


def engine_config(stack_config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(config as the engine passes it, secret keys) from a stack file's `config:` mapping, with the
    project defaults of Pulumi.yaml under it (torchfleet/preview/day2.py passes a changed mapping)."""
    config: dict[str, str] = {}
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    for key, decl in (project.get("config") or {}).items():
        if isinstance(decl, dict) and "default" in decl:
            config[key if ":" in key else f"{PROJECT}:{key}"] = _engine_value(decl["default"])
    secret_keys = []
    for key, value in stack_config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
            value = SECRET
        config[key] = _engine_value(value)
    return config, secret_keys


def _engine_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def synth(stack: str, config: dict[str, str], secret_keys: list[str] | None = None) -> SynthResult:
    """Run the program; raises spec.ConfigError (before any resource) when the config is invalid."""
    from components import config as platform_config
    from components.platform import TrainingPlatform

    runtime_config.set_all_config(dict(config), secret_keys or [])
    monitor = RecordingMonitor(TorchfleetMocks())
    # preview=False: outputs resolve, so no check silently skips on an unknown.
    pulumi.runtime.set_mocks(TorchfleetMocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)
    spec = platform_config.load()
    outputs: dict[str, Any] = {}

    def program():
        platform = TrainingPlatform(PROJECT, spec)

        async def collect() -> None:
            for key, value in platform.outputs.items():
                out = pulumi.Output.from_input(value)
                outputs[key] = SECRET if await out.is_secret() else await out.future()

        return pulumi.Output.from_input(asyncio.ensure_future(collect()))

    pulumi.runtime.test(program)()
    return SynthResult(stack=stack, resources=list(monitor.recorded), outputs=dict(sorted(outputs.items())), spec=spec)


def stack_spec(stack_file: Path):
    """The validated PlatformSpec of a stack file, read as the program reads it; raises ConfigError."""
    from components.config import parse_engine_config

    name, config, _ = stack_config(stack_file)
    return parse_engine_config(config, stack=name)


def synth_file(stack_file: Path) -> SynthResult:
    name, config, secret_keys = stack_config(stack_file)
    return synth(name, config, secret_keys)
