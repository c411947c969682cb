"""Fixed GCP names for what `pulumi destroy` keeps (the Filestore instance, its VPC), one per stack.

RFC 1035 labels of at most 63 characters (https://cloud.google.com/compute/docs/naming-resources):
lowercase letters, digits and '-', starting with a letter. A stack name that does not fit is cut
and given a short hash of the full name, so two stacks that share a long prefix stay apart.
"""

from __future__ import annotations

import hashlib
import re

MAX = 63


def gcp_name(stack: str, what: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-")
    name = f"torchfleet-{slug}-{what}"
    if len(name) > MAX or slug != stack:
        digest = hashlib.sha256(stack.encode()).hexdigest()[:6]
        head = f"torchfleet-{slug}"[: MAX - len(what) - 8].rstrip("-")
        name = f"{head}-{digest}-{what}"
    return name
