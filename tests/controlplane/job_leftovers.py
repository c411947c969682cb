"""What a researcher's job leaves in the cluster and in etcd, for the end-to-end tests on the real node
(test_real_training.py): `torchfleet delete` and `kubectl delete job` must leave none of its objects
(docs/jobs.md: everything submit makes is owned by the job, so the garbage collector takes it along), and
every etcd key of its run must expire (docs/training-layer.md: every write through the etcd gate carries
a TTL of at most 2 h; the run's store directory, which has none, is the gate's sweep's).
"""

from __future__ import annotations

import json

# Every kind submit makes or the cluster makes for it (a Deployment's ReplicaSet, a Service's
# EndpointSlices), plus Secrets and PodDisruptionBudgets, which it must never leave either.
KINDS = (
    "pods", "jobs.batch", "configmaps", "secrets", "services", "endpointslices.discovery.k8s.io",
    "networkpolicies.networking.k8s.io", "deployments.apps", "replicasets.apps", "poddisruptionbudgets.policy",
)  # fmt: skip
LABELS = ("torchfleet.io/job", "torchfleet.io/lighthouse")
RDZV_ANNOTATION = "torchfleet.io/rdzv-id"
MAX_TTL_S = 7200  # the gate's limit on every write (rules.py; docs/training-layer.md)


def objects(node, namespace: str, job: str, job_uid: str = "") -> list[str]:
    """KIND/NAME of every object of the namespace that belongs to JOB: labelled with it (its pods, its
    Lighthouse's), owned by it (or by what it owns, by name), or named for it (`JOB-...`, `job-JOB...`)."""
    items = json.loads(node.kubectl("get", ",".join(KINDS), "-n", namespace, "-o", "json"))["items"]
    found = []
    for item in items:
        meta = item["metadata"]
        name, labels = meta["name"], meta.get("labels") or {}
        owners = meta.get("ownerReferences") or []
        ours = (
            any(labels.get(label) == job for label in LABELS)
            or any(o["uid"] == job_uid or o["name"] == job or o["name"].startswith(f"{job}-") for o in owners)
            or name in (job, f"job-{job}")
            or name.startswith((f"{job}-", f"job-{job}-"))
        )
        if ours:
            found.append(f"{item['kind']}/{name}")
    return sorted(found)


def run_keys(node, namespace: str, rdzv_id: str) -> list[dict]:
    """Every etcd v2 node under the run's rendezvous and store keys, read from inside an etcd gate pod
    (which reaches etcd by its Service name): [{key, dir, ttl}] (ttl None: none set)."""
    code = (
        "import json, sys, urllib.error, urllib.request\n"
        "out = []\n"
        "def walk(n):\n"
        "    out.append({'key': n['key'], 'dir': bool(n.get('dir')), 'ttl': n.get('ttl')})\n"
        "    for c in n.get('nodes', []): walk(c)\n"
        "for prefix in sys.argv[1:]:\n"
        "    try:\n"
        "        with urllib.request.urlopen(f'http://etcd:2379/v2/keys{prefix}?recursive=true', timeout=30) as r:\n"
        "            walk(json.load(r)['node'])\n"
        "    except urllib.error.HTTPError as e:\n"
        "        if e.code != 404: raise\n"
        "print(json.dumps(out))\n"
    )
    prefixes = (f"/torch/elastic/rendezvous/{rdzv_id}", f"/torch/elastic/store/{rdzv_id}")
    out = node.kubectl("exec", "-n", namespace, "deployment/etcd-gate", "--", "python", "-c", code, *prefixes)
    return json.loads(out)


def keys_without_expiry(keys: list[dict], rdzv_id: str) -> list[dict]:
    """The keys that would stay for ever: any non-directory without a TTL or with one past the gate's
    limit, and any directory without a TTL outside the run's store directory (that one and those etcd
    makes in it for a `/` in a key's base64 name are the gate's sweep's: etcd_gate/sweep.py)."""
    store_dir = f"/torch/elastic/store/{rdzv_id}"
    return [
        k for k in keys
        if (k["dir"] and k["ttl"] is None and not (k["key"] == store_dir or k["key"].startswith(store_dir + "/")))
        or (not k["dir"] and (k["ttl"] is None or k["ttl"] > MAX_TTL_S))
    ]  # fmt: skip
