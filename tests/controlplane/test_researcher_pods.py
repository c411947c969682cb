"""What a researcher's pods may claim to be, where they may run and what they may read, against the real API
server as the researcher (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml): the labels,
hostname and subdomain the CLI writes and no others, a Service only for its own Lighthouse, placement as the CLI
writes it, a GPU limit on every pod that may land on a GPU node, and no Secret through the environment.

Each refusal is tried as the attacker would: the CLI's own objects (``submit --dry-run`` for a cloud target, so
with the zone co-location it writes there, or the reader pod) with the one field changed; the same objects
unchanged are admitted (test_the_clis_objects_are_admitted). Objects that would be admitted are sent with
server-side dry-run, which runs admission, the policy's included (test_the_policy_runs_on_server_dry_run).
"""

from __future__ import annotations

import copy
import itertools

import pytest
import yaml

from tests.controlplane import operators
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import IMAGE
from tests.controlplane.test_researcher import reader as cli_reader
from tests.controlplane.test_researcher import refused, researcher_kubectl
from torchfleet.cli import main

_names = itertools.count()

LABELS = "a pod may carry only the labels"
TEMPLATE_LABELS = "a job's pod template may carry only torchfleet's labels"
HOSTNAME = "no hostname or subdomain"
GPU = "has a limit of nvidia.com/gpu in every container"
SECRETS = "reads no Secret"


def reader(layer) -> dict:
    """The CLI's reader pod, with who made it as the CLI records it (reader_pod.CREATED_BY; the researcher is
    alice), which the reader-owner policy requires of a reader pod."""
    pod = cli_reader(layer)
    pod["metadata"].setdefault("annotations", {})["torchfleet.io/created-by"] = "alice"
    return pod


def name(prefix: str = "tier-pods") -> str:
    return f"{prefix}-{next(_names)}"


def cli_documents(layer, capsys, job: str, *flags: str) -> dict[str, dict]:
    """What ``torchfleet submit JOB --dry-run`` prints for the default (aws) target, by kind, in the tier's
    namespace; without a stack the target is a cloud one, so the job's pods carry the zone co-location."""
    capsys.readouterr()
    code = main(["submit", job, "--gpu", "t4", "--nodes", "2", "--image", IMAGE, *flags, "--dry-run", "--",
                 "python", "train.py"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    documents = [d for d in yaml.safe_load_all(out) if d]
    for document in documents:
        document["metadata"]["namespace"] = layer.namespace
    by_kind: dict[str, dict] = {}
    for document in documents:
        by_kind.setdefault(document["kind"], document)  # the first of a kind: the job, then its own
    return by_kind


def admitted(layer, kubeconfig, document: dict) -> None:
    code, out = researcher_kubectl(layer, kubeconfig, "create", "--dry-run=server", "-f", "-",
                                   input=yaml.safe_dump(document))  # fmt: skip
    assert code == 0, out


def template(job: dict) -> dict:
    if job["kind"] == "ElasticJob":
        return job["spec"]["replicaSpecs"]["Worker"]["template"]
    return job["spec"]["template"]


# ---- the CLI's own objects are admitted ------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [[], ["--recovery", "inplace"]], ids=["restart", "inplace"])
def test_the_clis_objects_are_admitted(training_layer, researcher, capsys, tmp_path, extra):
    """The Job with its zone co-location, GPU limit and --workdir init container; in place also the Lighthouse's
    Deployment and Service. The tier's own submit tests (test_researcher.py) cover the local target's objects."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = name()
    documents = cli_documents(training_layer, capsys, job, "--workdir", str(tmp_path), *extra)
    kinds = {"Job", "NetworkPolicy", "ConfigMap"} | ({"Deployment", "Service"} if extra else set())
    assert kinds <= set(documents), sorted(documents)
    assert template(documents["Job"])["spec"]["affinity"]["podAffinity"], "the cloud target's co-location"
    assert template(documents["Job"])["spec"]["initContainers"], "the workdir's init container"
    for kind in sorted(kinds):
        admitted(training_layer, researcher, documents[kind])


def test_the_policy_runs_on_server_dry_run(training_layer, researcher):
    """The fuzz test (test_researcher_fuzz.py) sends everything with dry-run: the policy must refuse there too,
    and what it admits there is not made."""
    pod = reader(training_layer)
    pod["metadata"]["labels"]["app.kubernetes.io/name"] = "etcd"
    code, out = researcher_kubectl(training_layer, researcher, "create", "--dry-run=server", "-f", "-",
                                   input=yaml.safe_dump(pod))  # fmt: skip
    assert code != 0 and LABELS in out, out
    pod = reader(training_layer)
    admitted(training_layer, researcher, pod)
    code, out = researcher_kubectl(training_layer, researcher, "get", "pod", pod["metadata"]["name"])
    assert code != 0 and "NotFound" in out, out


# ---- posing as etcd, a Lighthouse or another job ---------------------------------------------------------------


@pytest.mark.parametrize(
    "labels",
    [
        {"app.kubernetes.io/name": "etcd"},  # etcd's Services, PDB and NetworkPolicies select it
        {"app.kubernetes.io/instance": "etcd", "app.kubernetes.io/part-of": "torchfleet"},
        {"torchfleet.io/lighthouse": "victim"},  # another job's Lighthouse Service
        {"torchfleet.io/job": "victim"},  # another job's policies and co-location
        {"torchfleet.io/role": "training"},  # a standalone pod the training policies would admit
        {"torchfleet.io/reader": "victim"},  # a reader label on a pod not named for that job
    ],
    ids=["etcd-name", "etcd-instance", "lighthouse", "job", "role", "reader-of-another"],
)
def test_a_pod_posing_as_etcd_or_a_job_is_refused(training_layer, researcher, labels):
    pod = reader(training_layer)
    pod["metadata"]["labels"].update(labels)
    refused(training_layer, researcher, pod, LABELS)


def test_a_pod_answering_for_etcd_0_is_refused(training_layer, researcher):
    """hostname etcd-0 and subdomain etcd-peers: a second etcd-0.etcd-peers record beside the member's."""
    pod = reader(training_layer)
    pod["spec"] |= {"hostname": "etcd-0", "subdomain": "etcd-peers"}
    refused(training_layer, researcher, pod, HOSTNAME)
    pod = reader(training_layer)
    pod["spec"]["subdomain"] = "etcd-peers"
    refused(training_layer, researcher, pod, HOSTNAME)


@pytest.mark.parametrize(
    "labels",
    [
        {"torchfleet.io/job": "victim"},
        {"app.kubernetes.io/name": "etcd"},
        {"torchfleet.io/lighthouse": "victim"},
        {"torchfleet.io/role": "control"},
    ],
    ids=["another-job", "etcd", "lighthouse", "role"],
)
@pytest.mark.parametrize("operator", ["job", "torchelastic"])
def test_a_job_template_posing_as_another_is_refused(training_layer, researcher, capsys, labels, operator):
    """The CLI's Job (or ElasticJob) with one more template label: a job's pods are labelled with its own name."""
    if operator == "torchelastic":
        operators.apply_elasticjob_crd(training_layer.cp)
    job = cli_documents(training_layer, capsys, name(), "--operator", operator)
    [job] = [d for k, d in job.items() if k in ("Job", "ElasticJob")]
    template(job)["metadata"]["labels"].update(labels)
    refused(training_layer, researcher, job, TEMPLATE_LABELS)


def test_a_job_template_with_a_hostname_is_refused(training_layer, researcher, capsys):
    job = cli_documents(training_layer, capsys, name())["Job"]
    template(job)["spec"] |= {"hostname": "etcd-0", "subdomain": "etcd-peers"}
    refused(training_layer, researcher, job, HOSTNAME)


def test_a_job_with_its_own_selector_is_refused(training_layer, researcher, capsys):
    """manualSelector: the template's labels (and so the pods') would be the researcher's to choose."""
    job = cli_documents(training_layer, capsys, name())["Job"]
    job["spec"] |= {"manualSelector": True, "selector": {"matchLabels": {"torchfleet.io/job": job["metadata"]["name"]}}}
    refused(training_layer, researcher, job, "no manualSelector")


def test_a_lighthouse_for_another_job_is_refused(training_layer, researcher, capsys):
    """A Deployment and Service of the CLI's in-place job, renamed: a second Lighthouse for job `victim` would
    split its quorum, and a Service may not select etcd or another job's pods."""
    documents = cli_documents(training_layer, capsys, "victim", "--recovery", "inplace")
    deployment, service = documents["Deployment"], documents["Service"]
    attacker = name()
    deployment["metadata"]["name"] = f"{attacker}-lighthouse"
    refused(training_layer, researcher, deployment, "a Deployment is a job's Lighthouse")
    service["metadata"]["name"] = f"{attacker}-lighthouse"
    refused(training_layer, researcher, service, "a Service selects only its own job's Lighthouse")
    service["spec"]["selector"] = {"app.kubernetes.io/name": "etcd"}
    refused(training_layer, researcher, service, "a Service selects only its own job's Lighthouse")
    service["spec"]["selector"] = {"torchfleet.io/lighthouse": attacker, "torchfleet.io/job": "victim"}
    refused(training_layer, researcher, service, "a Service selects only its own job's Lighthouse")


# ---- placement ------------------------------------------------------------------------------------------------

OTHER_NAMESPACES = {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": "etcd"}},
                    "topologyKey": "kubernetes.io/os", "namespaceSelector": {}}  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"priorityClassName": "system-node-critical"}, "priorityClassName is torchfleet-training or none"),
        ({"priorityClassName": "torchfleet-control"}, "priorityClassName is torchfleet-training or none"),
        ({"nodeName": "manager-0"}, "sets no nodeName"),
        ({"runtimeClassName": "nvidia"}, "sets no nodeName, runtimeClassName"),
        (
            {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [OTHER_NAMESPACES]}}},
            "affinity is only the CLI's",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "affinity is only the CLI's",
        ),
        ({"tolerations": [{"operator": "Exists"}]}, "tolerates only the taints"),
        ({"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}, "tolerates only the taints"),
        ({"nodeSelector": {"kubernetes.io/hostname": "manager-0"}}, "nodeSelector names only"),
        ({"nodeSelector": {"torchfleet.io/pool": "gpu"}}, "nodeSelector names only"),
    ],
    ids=[
        "node-critical",
        "control",
        "node-name",
        "runtime-class",
        "anti-affinity-everywhere",
        "node-affinity",
        "tolerate-all",
        "critical-addons",
        "hostname-selector",
        "gpu-pool",
    ],
)
def test_placement_the_cli_never_writes_is_refused(training_layer, researcher, spec, why):
    """The reader pod placed as an attacker would: above etcd's priority, on a node of their choosing, or keeping
    etcd and other namespaces' pods off every node (an existing pod's required anti-affinity holds for its
    whole topology domain)."""
    if "runtimeClassName" in spec:  # the class must exist, or the RuntimeClass plugin refuses it first
        handler = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                   "handler": "nvidia"}  # fmt: skip
        kubectl(training_layer.cp, "apply", "-f", "-", input=yaml.safe_dump(handler))
    pod = reader(training_layer)
    pod["spec"] |= copy.deepcopy(spec)
    refused(training_layer, researcher, pod, why)


@pytest.mark.parametrize(
    "term",
    [
        {
            "labelSelector": {"matchLabels": {"torchfleet.io/job": "victim"}},
            "topologyKey": "topology.kubernetes.io/zone",
        },
        {"labelSelector": {"matchLabels": {"torchfleet.io/job": "SELF"}}, "topologyKey": "kubernetes.io/hostname"},
        {
            "labelSelector": {"matchLabels": {"torchfleet.io/job": "SELF"}},
            "topologyKey": "topology.kubernetes.io/zone",
            "namespaceSelector": {},
        },
        {
            "labelSelector": {"matchLabels": {"torchfleet.io/job": "SELF"}},
            "topologyKey": "topology.kubernetes.io/zone",
            "namespaces": ["kube-system"],
        },
    ],
    ids=["another-job", "one-node", "every-namespace", "kube-system"],
)
def test_a_job_co_located_other_than_the_cli_does_is_refused(training_layer, researcher, capsys, term):
    job = cli_documents(training_layer, capsys, name())["Job"]
    term = yaml.safe_load(yaml.safe_dump(term).replace("SELF", job["metadata"]["name"]))
    template(job)["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = [term]
    refused(training_layer, researcher, job, "affinity is only the CLI's")


# ---- the manager pool: nothing of a researcher's beside etcd (issue 30) -----------------------------------------

MANAGER = "never torchfleet.io/pool=manager"
MANAGER_TAINT = "never a manager pool's taint"
# Each cloud's manager taint (components/spec/model.py MANAGER_TAINTS), tolerated as an attacker would.
MANAGER_TOLERATIONS = {
    "eks-critical-addons": {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    "gke-managed": {"key": "components.gke.io/gke-managed-components", "operator": "Exists"},
    "aks-manager": {"key": "torchfleet.io/pool", "operator": "Equal", "value": "manager", "effect": "NoSchedule"},
    "pool-exists": {"key": "torchfleet.io/pool", "operator": "Exists"},  # tolerates the manager and the CPU pool
    "pool-no-value": {"key": "torchfleet.io/pool", "effect": "NoSchedule"},  # Equal to "": not the CPU pool
    # Variations a hostile researcher tries (not failing-first: the key allow-list already refused them): the EKS
    # key alone, any effect; with NoExecute and tolerationSeconds; the AKS value with NoExecute.
    "eks-key-only": {"key": "CriticalAddonsOnly", "operator": "Exists"},
    "eks-noexecute-seconds": {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 5},
    "aks-manager-noexecute": {"key": "torchfleet.io/pool", "operator": "Equal", "value": "manager",
                              "effect": "NoExecute"},
}


def manager_pool_objects(layer, capsys) -> dict[str, tuple[dict, dict]]:
    """What a researcher places: the reader pod, an in-place job's Lighthouse Deployment, a --cpu Job; each with
    its pod spec."""
    pod = reader(layer)
    lighthouse = cli_documents(layer, capsys, name(), "--recovery", "inplace")["Deployment"]
    capsys.readouterr()
    code = main(["submit", name(), "--cpu", "--nodes", "1", "--image", IMAGE, "--dry-run", "--", "python", "t.py"])
    out = capsys.readouterr().out
    assert code == 0, out
    (job,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Job"]
    job["metadata"]["namespace"] = layer.namespace
    return {"Pod": (pod, pod["spec"]), "Deployment": (lighthouse, template(lighthouse)["spec"]),
            "Job": (job, template(job)["spec"])}  # fmt: skip


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Job"])
def test_the_cli_places_its_cpu_pods_on_the_cpu_pool(training_layer, researcher, capsys, kind):
    """The reader, a Lighthouse and a --cpu job select the CPU pool and tolerate its taint exactly, and are
    admitted so."""
    document, spec = manager_pool_objects(training_layer, capsys)[kind]
    assert spec["nodeSelector"].get("torchfleet.io/pool") == "cpu", spec.get("nodeSelector")
    assert {"key": "torchfleet.io/pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"} in \
        spec["tolerations"]
    admitted(training_layer, researcher, document)


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Job"])
def test_a_researcher_pod_selecting_the_manager_pool_is_refused(training_layer, researcher, capsys, kind):
    """The old limits admitted torchfleet.io/pool=manager on a Pod or Deployment (the reader, TensorBoard and the
    Lighthouse were placed there), so any researcher ran an image of her choice beside etcd."""
    document, spec = manager_pool_objects(training_layer, capsys)[kind]
    spec["nodeSelector"]["torchfleet.io/pool"] = "manager"
    refused(training_layer, researcher, document, MANAGER)


@pytest.mark.parametrize("toleration", list(MANAGER_TOLERATIONS.values()), ids=list(MANAGER_TOLERATIONS))
@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Job"])
def test_a_researcher_pod_tolerating_a_manager_taint_is_refused(training_layer, researcher, capsys, kind,
                                                                toleration):
    """Every cloud's manager taint, and the CPU pool's key tolerated more widely than exactly cpu (the key is
    the Azure and tier manager pool's too), with no selector: the scheduler would otherwise be free to place the
    pod on a manager node."""
    document, spec = manager_pool_objects(training_layer, capsys)[kind]
    spec.pop("nodeSelector", None)
    spec["tolerations"] = [*spec.get("tolerations", []), toleration]
    refused(training_layer, researcher, document, MANAGER_TAINT)


def test_a_researcher_pod_without_a_pool_lands_nowhere_near_etcd(training_layer, researcher):
    """The tier's manager nodes are tainted as the clouds' are: a pod with no selector and no toleration (admitted:
    the limits ask for no selector) is never bound to a manager node. Untainted, as the manager pool was on every
    cloud, the scheduler bound such a pod to one (a --cpu job's pods landed beside etcd). Every pool of the tier
    is tainted now, so it stays unscheduled: what a cloud stack without a CPU pool does with it too."""
    pod = reader(training_layer)
    pod["spec"].pop("nodeSelector", None)
    pod["spec"].pop("tolerations", None)
    created = researcher_kubectl(training_layer, researcher, "create", "-f", "-", input=yaml.safe_dump(pod))
    assert created[0] == 0, created[1]
    pod_name = pod["metadata"]["name"]
    try:
        def unschedulable():
            live = get(training_layer.cp, "pod", pod_name, "-n", training_layer.namespace)
            conditions = {c["type"]: c for c in live["status"].get("conditions", [])}
            scheduled = conditions.get("PodScheduled", {})
            return (live if live["spec"].get("nodeName") or scheduled.get("reason") == "Unschedulable" else None)

        live = wait_for(f"the scheduler's verdict on {pod_name}", unschedulable)
        assert not live["spec"].get("nodeName"), f"bound to {live['spec']['nodeName']}"
        message = {c["type"]: c for c in live["status"]["conditions"]}["PodScheduled"]["message"]
        assert "had untolerated taint" in message, message  # kube-scheduler 1.35 names no taint, only the count
    finally:
        kubectl(training_layer.cp, "delete", "pod", pod_name, "-n", training_layer.namespace, "--wait=false")


def test_the_platforms_pods_run_on_the_tainted_manager_nodes(training_layer):
    """etcd and its gate are bound to manager nodes despite their taint, which they tolerate
    (components/kube/transforms.py set_manager_selector)."""
    ns = training_layer.namespace

    def bound() -> list[dict] | None:
        listed = get(training_layer.cp, "pods", "-n", ns, "-l", "app.kubernetes.io/part-of=torchfleet")["items"]
        pods = [p for p in listed if p["metadata"]["labels"].get("app.kubernetes.io/name") in ("etcd", "etcd-gate")]
        return pods if pods and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for("etcd's and the gate's pods bound", bound)
    assert {p["metadata"]["labels"]["app.kubernetes.io/name"] for p in pods} == {"etcd", "etcd-gate"}
    for pod in pods:
        node = get(training_layer.cp, "node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"]["torchfleet.io/pool"] == "manager", pod["metadata"]["name"]
        assert node["spec"]["taints"] == [{"key": "torchfleet.io/pool", "value": "manager", "effect": "NoSchedule"}]


# ---- GPUs ------------------------------------------------------------------------------------------------------


def test_a_pod_on_gpu_nodes_without_a_gpu_is_refused(training_layer, researcher, capsys):
    """With the device plugin's default strategy a container the plugin gave no GPU sees every GPU of its node
    (the image's NVIDIA_VISIBLE_DEVICES=all): the reader pod tolerating the GPU taint, the CLI's Job without its
    limit, and its --workdir init container without the void variable are refused."""
    pod = reader(training_layer)
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    refused(training_layer, researcher, pod, GPU)
    pod = reader(training_layer)
    pod["spec"]["nodeSelector"] = {"torchfleet.io/gpu": "t4"}
    refused(training_layer, researcher, pod, GPU)
    job = cli_documents(training_layer, capsys, name())["Job"]
    for part in ("requests", "limits"):
        del template(job)["spec"]["containers"][0]["resources"][part]["nvidia.com/gpu"]
    refused(training_layer, researcher, job, GPU)
    job = cli_documents(training_layer, capsys, name())["Job"]
    template(job)["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0"
    template(job)["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0"
    refused(training_layer, researcher, job, GPU)


def test_a_gpu_pods_init_container_without_void_is_refused(training_layer, researcher, capsys, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = cli_documents(training_layer, capsys, name(), "--workdir", str(tmp_path))["Job"]
    [init] = template(job)["spec"]["initContainers"]
    init["env"] = [e for e in init["env"] if e["name"] != "NVIDIA_VISIBLE_DEVICES"]
    refused(training_layer, researcher, job, GPU)


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_a_container_choosing_its_gpus_is_refused(training_layer, researcher, capsys, tmp_path, where):
    """Set in the pod, the variable overrides the list the device plugin gave the container (the kubelet puts the
    container's own variables after the plugin's)."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = cli_documents(training_layer, capsys, name(), "--workdir", str(tmp_path))["Job"]
    container = template(job)["spec"][where][0]
    container["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
    refused(training_layer, researcher, job, "NVIDIA_VISIBLE_DEVICES is the device plugin's to set")


# ---- no Secret through the environment ----------------------------------------------------------------------


SECRET_ENV = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "anything", "key": "token"}}}


@pytest.mark.parametrize(
    ("where", "field", "value"),
    [
        ("containers", "env", [SECRET_ENV]),
        ("containers", "envFrom", [{"secretRef": {"name": "anything"}}]),
        ("containers", "envFrom", [{"configMapRef": {"name": "anything"}}]),  # may carry NVIDIA_VISIBLE_DEVICES
        ("initContainers", "env", [SECRET_ENV]),
        ("initContainers", "envFrom", [{"secretRef": {"name": "anything"}}]),
    ],
    ids=["env", "envFrom", "envFrom-configmap", "init-env", "init-envFrom"],
)
@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_a_secret_through_the_environment_is_refused(training_layer, researcher, capsys, tmp_path, where, field,
                                                     value, kind):  # fmt: skip
    """A Secret volume is refused; its keys as variables were not."""
    if kind == "Pod":
        document = reader(training_layer)
        spec = document["spec"]
        if where == "initContainers":
            spec["initContainers"] = [copy.deepcopy(spec["containers"][0]) | {"name": "first"}]
    else:
        (tmp_path / "train.py").write_text("print('hi')\n")
        document = cli_documents(training_layer, capsys, name(), "--workdir", str(tmp_path))["Job"]
        spec = template(document)["spec"]
    container = spec[where][0]
    container[field] = [*container.get(field, []), *copy.deepcopy(value)]
    refused(training_layer, researcher, document, SECRETS)


PROBE_HOST = "names no host"
METADATA = {"host": "169.254.169.254", "path": "/computeMetadata/v1/instance/service-accounts/default/token",
            "port": 80, "httpHeaders": [{"name": "Metadata-Flavor", "value": "Google"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("livenessProbe", {"httpGet": METADATA}),
        ("readinessProbe", {"tcpSocket": {"host": "etcd-0.etcd-peers", "port": 2379}}),
        ("startupProbe", {"httpGet": METADATA}),
        ("lifecycle", {"postStart": {"httpGet": METADATA}}),
        ("lifecycle", {"preStop": {"tcpSocket": {"host": "169.254.169.254", "port": 80}}}),
    ],
    ids=["liveness", "readiness-tcp", "startup", "postStart", "preStop-tcp"],
)
@pytest.mark.parametrize("kind", ["Pod", "Job", "Deployment"])
def test_a_probe_or_hook_aimed_at_another_host_is_refused(training_layer, researcher, capsys, field, value, kind):
    """The kubelet makes a probe's or hook's request from the node, past every NetworkPolicy; Pod Security refuses a
    host only from v1.34 and the namespace pins v1.30. The CLI's reader, Job and Lighthouse with one probe added."""
    if kind == "Pod":
        document = reader(training_layer)
        spec = document["spec"]
    else:
        document = cli_documents(training_layer, capsys, name(), "--recovery", "inplace")[kind]
        spec = template(document)["spec"] if kind == "Job" else document["spec"]["template"]["spec"]
    spec["containers"][0][field] = copy.deepcopy(value)
    refused(training_layer, researcher, document, PROBE_HOST)


# ---- defence in depth: the namespace's quotas hold whoever makes the pod -------------------------------------


@pytest.mark.parametrize(
    ("spec", "quota"),
    [
        ({"priorityClassName": "system-node-critical"}, "torchfleet-no-critical-priority"),
        ({"priorityClassName": "system-cluster-critical"}, "torchfleet-no-critical-priority"),
        (
            {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [OTHER_NAMESPACES]}}},
            "torchfleet-no-cross-namespace-affinity",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {}, "topologyKey": "kubernetes.io/os", "namespaces": ["default"]}
                        ]
                    }
                }
            },
            "torchfleet-no-cross-namespace-affinity",
        ),
    ],
    ids=["node-critical", "cluster-critical", "anti-affinity-everywhere", "affinity-to-default"],
)
def test_the_quotas_refuse_what_the_policy_refuses_even_from_the_admin(training_layer, spec, quota):
    """k8s/base/jobs/resourcequota-*.yaml: the admin (whom the researcher limits do not hold) makes the pod, as a
    policy left unbound or a binding's selector that misses the namespace would let a researcher."""
    layer = training_layer
    wait_for(f"quota {quota} counted", lambda: get(layer.cp, "resourcequota", quota, "-n", layer.namespace)
             .get("status", {}).get("hard"))  # fmt: skip
    pod = reader(layer)
    pod["spec"] |= copy.deepcopy(spec)
    out = kubectl(layer.cp, "create", "-n", layer.namespace, "-f", "-", input=yaml.safe_dump(pod), check=False)
    assert "exceeded quota" in out and quota in out, out
