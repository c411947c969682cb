"""Which of the package's extras a missing module belongs to (pyproject.toml), to say what to install.

The command line installs alone (``pip install torchfleet``: the Kubernetes client and Pulumi's base
SDK); the Pulumi program's cloud SDKs (``platform``: synth, check, pulumi up) and the trainer's torch
(``train``: the demo; ``inplace``: its in-place mode) are extras (issue 21). A command that needs one
on an install without it ends in one line saying which, instead of "unexpected error".
"""

from __future__ import annotations

EXTRAS = {
    "pulumi_aws": ("platform", "the Pulumi cloud SDKs"),
    "pulumi_gcp": ("platform", "the Pulumi cloud SDKs"),
    "pulumi_azure_native": ("platform", "the Pulumi cloud SDKs"),
    "pulumi_kubernetes": ("platform", "the Pulumi cloud SDKs"),
    "torch": ("train", "torch and the trainer's libraries"),
    "numpy": ("train", "torch and the trainer's libraries"),
    "etcd": ("train", "torch and the trainer's libraries"),
    "torchft": ("inplace", "torchft, for in-place recovery"),
}


def hint(module: str | None) -> str | None:
    """What to install for ``module`` (a ModuleNotFoundError's name), or None if no extra provides it."""
    found = EXTRAS.get((module or "").split(".")[0])
    if found is None:
        return None
    extra, what = found
    return (f"needs torchfleet's `{extra}` extra ({what}), which this install lacks: pip install "
            f"'torchfleet[{extra}]' (from a checkout: pip install -e '.[{extra}]')")
