"""checkov on the pods and network policy `torchfleet submit` creates (both operators), as the project
does for every manifest it renders (docs/facts.md, "Conventions"). The operators' custom resources are not scanned by
checkov, so each job's pod template is written out as the Pod the controller will create."""

from dataclasses import replace

import yaml

from components import spec as platform
from tests.torchfleet.checkov import checkov_results
from torchfleet.jobs import manifests
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

# Checks that do not fit a training pod, each with why (keep every reason true).
SKIPS = {
    "CKV_K8S_8": "Liveness probe: a training worker serves nothing to probe; a hung collective ends at the "
                 "process-group timeout and the controller acts on the exit code.",
    "CKV_K8S_9": "Readiness probe: no Service routes traffic by readiness; workers meet through etcd rendezvous.",
    "CKV_K8S_11": "CPU limit: CFS throttling starves the data loaders and so the GPU; the request reserves the "
                  "pod's share of the node, sized from the catalog.",
    "CKV_K8S_22": "Read-only root filesystem: torchrun and the trainer write error files and caches under /tmp "
                  "and $HOME inside the image, whose layout the image owns.",
    "CKV_K8S_43": "Image digest: researchers give REPO:TAG (moving tags such as latest are refused before "
                  "submit); a digest cannot be required of every experiment image.",
}

# Checks skipped for pods on the local stack only (the CPU documents below), each with why.
LOCAL_SKIPS = {
    "CKV_K8S_15": "Image pull policy Always: the local stack runs images loaded into the node with `kind load "
                  "docker-image`, which a pull would not find; every other target pulls Always.",
}


def _documents(operator, cpu=False):
    """A GPU job on the defaults, or a CPU job on the local stack with an --allow-egress policy."""
    if cpu:
        t = replace(targets.from_stack("local"), operator=operator)
        flags = dict(name=f"ckv-cpu-{operator}", gpu=None, cpu=True, gpus_per_node=None, allow_egress=["0.0.0.0/0"])
    else:
        t = replace(targets.defaults(), operator=operator)
        flags = dict(name=f"ckv-{operator}", gpu="t4", gpus_per_node=1)
    req = build_request(t, nodes="2:4", image="registry.example.com/team/train:1.4.2",
                        command=["python", "train.py"], **flags)
    job = manifests.build(req, t)
    template = manifests.worker_spec(job)["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{req.name}-worker-0", "namespace": t.namespace, **template["metadata"]},
           "spec": template["spec"]}
    return [pod, *([job] if manifests.is_indexed_job(job) else []), *manifests.network_policies(req, t)]


def test_job_pods_pass_checkov(tmp_path):
    for operator in platform.OPERATORS:
        for cpu in (False, True):
            documents = _documents(operator, cpu)
            (tmp_path / f"{operator}-{cpu}.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    results = checkov_results(tmp_path, SKIPS)
    failed = [f"{c['check_id']} {c['check_name']} ({c['resource']})"
              for r in results for c in r.get("failed_checks", [])
              if not (c["check_id"] in LOCAL_SKIPS and ".ckv-cpu-" in c["resource"])]
    passed = [(c["check_id"], c["resource"]) for r in results for c in r.get("passed_checks", [])]
    assert failed == []
    pods = {resource for _, resource in passed if resource.startswith("Pod.") and resource.endswith("-worker-0")}
    assert len(pods) == 2 * len(platform.OPERATORS)  # every operator's pods, GPU and CPU, were scanned
    # the `job` operator's Indexed Job is a core object checkov knows: scanned as itself too, and its template
    # as a Pod named by its labels
    assert {resource for _, resource in passed if resource.startswith("Job.")} == {
        "Job.elastic-job.ckv-job", "Job.elastic-job.ckv-cpu-job"}
    pods |= {resource for _, resource in passed if resource.startswith(("Pod.elastic-job.ckv-job.",
                                                                          "Pod.elastic-job.ckv-cpu-job."))}
    assert len(pods) == 2 * len(platform.OPERATORS) + 2
    # CKV2_K8S_6 "pods lack an associated NetworkPolicy": the job's own policy selects its pods.
    assert {resource for check, resource in passed if check == "CKV2_K8S_6"} == pods
