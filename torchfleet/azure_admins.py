"""Is whoever runs `pulumi up` an admin of the Azure cluster? (issue 29: torchfleet:admins is the one source)

The AKS stack grants cluster admin only to torchfleet:admins; nothing follows the caller. A caller left out
would create the cluster and then get 403 on every Kubernetes resource of the same `up`. `torchfleet check`
asks this module: the caller's object id is the `oid` claim of the ARM token the Azure CLI holds
(`az account get-access-token`, read locally; the token is not printed or kept). $TORCHFLEET_AZURE_CALLER
names the object id instead (a service principal's, when `pulumi up` runs through ARM_* variables and no
`az` session), or turns the check off (`off`). Never fails the check: advice on stderr.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

from components.spec import PlatformSpec

CALLER_ENV = "TORCHFLEET_AZURE_CALLER"
KEY = "torchfleet:admins"
TIMEOUT_S = 30


def token_object_id(token: str) -> str | None:
    """The `oid` claim of a JWT (its payload is base64url JSON), or None."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, UnicodeDecodeError):
        return None
    oid = claims.get("oid") if isinstance(claims, dict) else None
    return oid if isinstance(oid, str) else None


def caller_object_id() -> tuple[str | None, str]:
    """(object id, where it came from) of whoever runs `pulumi up` here, or (None, why not)."""
    named = os.environ.get(CALLER_ENV)
    if named:
        return named.strip().lower(), f"${CALLER_ENV}"
    az = shutil.which("az")
    if az is None:
        return None, "no Azure CLI on PATH"
    try:
        done = subprocess.run([az, "account", "get-access-token", "--query", "accessToken", "-o", "tsv"],
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"`az account get-access-token` failed ({type(error).__name__})"
    if done.returncode != 0:
        return None, "`az account get-access-token` failed (not logged in? `az login`)"
    oid = token_object_id(done.stdout)
    return (oid.lower(), "the Azure CLI's token") if oid else (None, "the Azure CLI's token has no oid claim")


def report(spec: PlatformSpec, lookup=caller_object_id) -> list[str]:
    """What `check` prints about the caller and torchfleet:admins (each line starts with "admins: ")."""
    if spec.cloud != "azure" or os.environ.get(CALLER_ENV, "").strip().lower() == "off":
        return []
    listed = {item.split(":", 1)[1].lower(): item for item in spec.access.admins}
    oid, source = lookup()
    if oid is None:
        return [f"admins: could not tell who runs `pulumi up` here ({source}); that identity must be in {KEY} "
                f"or the `up` fails with 403 on the Kubernetes resources (set ${CALLER_ENV} to its object id to check)"]
    if oid in listed:
        return [f"admins: you ({oid}, from {source}) are in {KEY} as {listed[oid]}"]
    groups = [item for item in spec.access.admins if item.startswith("Group:")]
    through = f" unless you are a member of {', '.join(groups)}" if groups else ""
    return [f"admins: warning: {KEY} does not list you ({oid}, from {source}){through}: `pulumi up` would create "
            f"the cluster and then get 403 on every Kubernetes resource. Add yourself: "
            f"pulumi config set --path '{KEY}[{len(spec.access.admins)}]' User:{oid} (ServicePrincipal:{oid} for a "
            "service principal)"]
