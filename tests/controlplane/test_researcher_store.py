"""Each job its own folder of the shared store (issue 30), on the real API server as alice
(k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml, "the shared store: each job its own folder").

Every job's pods run as uid 10001, which owns every checkpoint: before, each mounted the whole store, so a job's
code could rewrite another job's --workdir code (run by the victim's pods at their next start) or its checkpoints.
Now the CLI mounts only ``subPath: <job>`` (torchfleet/jobs/pod_template.py shared_mount), and the policy refuses
any other way to the store: the whole claim, another job's folder, a subPathExpr (expanded by the kubelet from
the pod's own environment, so never checkable at admission), a second volume of the claim, a reader or
TensorBoard pod that writes, a pod of no job; and a projected ConfigMap that is not the job's own --workdir code.

What only a kubelet shows (it makes a missing folder with the store root's mode and group, and mounts nothing
else) is not run here: the tier's nodes are kwok's, which run no container (issue 31 builds a real one).

Each attack is the CLI's own object (``submit --dry-run``, the reader and TensorBoard pods) with one field changed;
the same objects unchanged are admitted, sent with server-side dry-run.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.controlplane import operators
from tests.controlplane.test_jobs import IMAGE
from tests.controlplane.test_researcher import as_researcher, refused, researcher_kubectl
from tests.controlplane.test_researcher_pods import admitted, cli_documents, name, reader, template
from torchfleet.cli import main
from torchfleet.jobs import pod_template, tensorboard
from torchfleet.jobs import target as targets

SUBPATH = "volumeMounts[].subPath of the shared store"
NO_STORE = "mounts none of it"
ONE_VOLUME = "at most one volume of the shared store's claim"
READ_ONLY = "mounts its job's folder read-only"
WORKDIR = "configMap.name must be the job's own --workdir code"
NO_CONFIGMAP = "projects no ConfigMap"
VOLUMES = "a pod may mount only the claims"
CLAIM = "shared-data"  # the tier's shared claim (k8s/base/storage/claim.yaml)


def workdir_job(layer, capsys, tmp_path, *flags: str) -> dict:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return cli_documents(layer, capsys, name("tier-store"), "--workdir", str(tmp_path), *flags)["Job"]


def shared_mounts(spec: dict) -> list[dict]:
    """Every container's mount of the shared volume (the worker's and the --workdir init container's)."""
    return [m for c in spec.get("initContainers", []) + spec["containers"] for m in c.get("volumeMounts", [])
            if m["name"] == pod_template.SHARED_VOLUME]  # fmt: skip


def tensorboard_pod(layer, job: str) -> dict:
    target = targets.defaults("aws", layer.namespace)
    return tensorboard.build_pod(job, f"/mnt/shared/{job}", "/mnt/shared", IMAGE, target)


# ---- what the CLI makes is admitted -----------------------------------------------------------------------------


def test_the_clis_pods_mount_only_their_jobs_folder_and_are_admitted(training_layer, researcher, capsys, tmp_path):
    job = workdir_job(training_layer, capsys, tmp_path)
    mounts = shared_mounts(template(job)["spec"])
    assert len(mounts) == 2 and {m["subPath"] for m in mounts} == {job["metadata"]["name"]}, mounts
    admitted(training_layer, researcher, job)
    for pod in (reader(training_layer), tensorboard_pod(training_layer, "tier-store-tb")):
        [mount] = shared_mounts(pod["spec"])
        assert mount["readOnly"] and pod["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"], pod
        admitted(training_layer, researcher, pod)


def test_a_sweeps_jobs_project_the_sweeps_workdir_and_are_admitted(training_layer, researcher, capsys, tmp_path):
    """A sweep's jobs <sweep>-<n> share one set of ConfigMaps named for the sweep (workdir.py)."""
    (tmp_path / "train.py").write_text("import sys; print(sys.argv)\n")
    sweep = name("tier-sweep")
    capsys.readouterr()
    code = main(["sweep", sweep, "--param", "lr=0.1,0.01", "--gpu", "t4", "--nodes", "2", "--image", IMAGE,
                 "--workdir", str(tmp_path), "--dry-run", "--", "python", "train.py"])  # fmt: skip
    documents = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert code == 0
    jobs = [d for d in documents if d["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in jobs] == [f"{sweep}-0", f"{sweep}-1"]
    for job in jobs:
        job["metadata"]["namespace"] = training_layer.namespace
        projected = [v for v in template(job)["spec"]["volumes"] if "projected" in v]
        assert projected[0]["projected"]["sources"][0]["configMap"]["name"].startswith(f"{sweep}-workdir-")
        admitted(training_layer, researcher, job)


# ---- a job's pods: only the job's own folder --------------------------------------------------------------------


def _whole(mount: dict, job: str) -> None:
    mount.pop("subPath")


def _another(mount: dict, job: str) -> None:
    mount["subPath"] = "victim"


def _below_another(mount: dict, job: str) -> None:
    mount["subPath"] = "victim/checkpoints"


def _expr(mount: dict, job: str) -> None:
    mount.pop("subPath")
    mount["subPathExpr"] = "$(TORCHFLEET_JOB)"  # the pod's own env: alice sets it to the victim's name


# (A subPath with '..' never reaches admission: the API server's validation refuses it, "must not contain '..'".)
@pytest.mark.parametrize("change", [_whole, _another, _below_another, _expr],
                         ids=["whole-store", "another-job", "inside-another-job", "subPathExpr"])
@pytest.mark.parametrize("where", ["worker", "workdir-init"])
def test_a_job_reaching_beyond_its_own_folder_is_refused(training_layer, researcher, capsys, tmp_path, change, where):
    job = workdir_job(training_layer, capsys, tmp_path)
    spec = template(job)["spec"]
    container = spec["containers"][0] if where == "worker" else spec["initContainers"][0]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == pod_template.SHARED_VOLUME]
    change(mount, job["metadata"]["name"])
    refused(training_layer, researcher, job, SUBPATH)


def test_an_elasticjob_mounting_the_whole_store_is_refused(training_layer, researcher, capsys):
    operators.apply_elasticjob_crd(training_layer.cp)
    job = cli_documents(training_layer, capsys, name("tier-store"), "--operator", "torchelastic")["ElasticJob"]
    for mount in shared_mounts(template(job)["spec"]):
        mount.pop("subPath")
    refused(training_layer, researcher, job, SUBPATH)


def test_a_second_volume_of_the_claim_is_refused(training_layer, researcher, capsys, tmp_path):
    """Two volumes of the claim: the second one, mounted whole, would be a way around the first's subPath."""
    job = workdir_job(training_layer, capsys, tmp_path)
    spec = template(job)["spec"]
    spec["volumes"].append({"name": "again", "persistentVolumeClaim": {"claimName": CLAIM}})
    spec["containers"][0]["volumeMounts"].append({"name": "again", "mountPath": "/mnt/again",
                                                  "subPath": job["metadata"]["name"]})  # fmt: skip
    refused(training_layer, researcher, job, ONE_VOLUME)


@pytest.mark.parametrize(
    "volume",
    [
        {"name": "x", "csi": {"driver": "efs.csi.aws.com", "volumeAttributes": {"path": "/"}}},
        {"name": "x", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "elastic-job-shared-data",
            "resources": {"requests": {"storage": "1Gi"}}}}}},
    ],
    ids=["inline-csi", "ephemeral-claim-of-the-volume"],
)  # fmt: skip
def test_the_store_through_another_volume_is_refused(training_layer, researcher, capsys, tmp_path, volume):
    """The same storage another way: an inline CSI volume of the store's driver, or an ephemeral claim naming the
    store's PersistentVolume (which its claimRef would refuse to bind anyway). A researcher makes no claim of her
    own (the Role has no persistentvolumeclaims: test_no_claim_of_ones_own)."""
    job = workdir_job(training_layer, capsys, tmp_path)
    spec = template(job)["spec"]
    spec["volumes"].append(volume)
    spec["containers"][0]["volumeMounts"].append({"name": "x", "mountPath": "/mnt/x"})
    refused(training_layer, researcher, job, VOLUMES)


def test_no_claim_of_ones_own(training_layer, researcher):
    for verb in ("create", "update", "patch"):
        _, out = researcher_kubectl(training_layer, researcher, "auth", "can-i", verb, "persistentvolumeclaims")
        assert out.strip() == "no", out
    _, out = researcher_kubectl(training_layer, researcher, "auth", "can-i", "create", "persistentvolumes")
    assert out.splitlines()[0] == "no", out  # then kubectl's warning: persistentvolumes are cluster-scoped


# ---- readers, TensorBoard and other pods --------------------------------------------------------------------------


def _reader_elsewhere(pod: dict) -> None:
    pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = "victim"


def _reader_whole(pod: dict) -> None:
    pod["spec"]["containers"][0]["volumeMounts"][0].pop("subPath")


def _writable_mount(pod: dict) -> None:
    pod["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = False


def _writable_claim(pod: dict) -> None:
    pod["spec"]["volumes"][0]["persistentVolumeClaim"].pop("readOnly")


@pytest.mark.parametrize(
    ("change", "why"),
    [(_reader_elsewhere, SUBPATH), (_reader_whole, SUBPATH), (_writable_mount, READ_ONLY),
     (_writable_claim, READ_ONLY)],
    ids=["another-folder", "whole-store", "writable-mount", "writable-claim"],
)
@pytest.mark.parametrize("kind", ["reader", "tensorboard"])
def test_a_reader_or_tensorboard_pod_beyond_its_jobs_folder_or_writing_is_refused(training_layer, researcher, change,
                                                                                  why, kind):  # fmt: skip
    """Anyone may start a reader or TensorBoard pod for any job (the namespace is shared for reading): it reads
    only that job's folder, and writes nothing there (a writable "reader" of the victim's job was the way in)."""
    pod = reader(training_layer) if kind == "reader" else tensorboard_pod(training_layer, name("tier-store-tb"))
    change(pod)
    refused(training_layer, researcher, pod, why)


def test_a_pod_of_no_job_mounting_the_store_is_refused(training_layer, researcher, capsys):
    """A pod without a reader or TensorBoard label (the policy allows it) has no folder; a Lighthouse neither."""
    pod = reader(training_layer)
    del pod["metadata"]["labels"]["torchfleet.io/reader"]
    pod["metadata"]["name"] = name("tier-store-plain")
    refused(training_layer, researcher, pod, NO_STORE)
    deployment = cli_documents(training_layer, capsys, name("tier-store"), "--recovery", "inplace")["Deployment"]
    spec = template(deployment)["spec"]
    spec["volumes"] = [*spec.get("volumes", []), {"name": "shared", "persistentVolumeClaim": {"claimName": CLAIM}}]
    spec["containers"][0].setdefault("volumeMounts", []).append(
        {"name": "shared", "mountPath": "/mnt/shared", "subPath": deployment["metadata"]["name"]})
    refused(training_layer, researcher, deployment, NO_STORE)


# ---- --workdir ConfigMaps: the job's own ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config_map",
    [
        "victim-workdir-0123abcd-0",  # another job's code
        "{job}-workdir-0123abcd-0-x",  # not the CLI's form
        "{job}-workdir-0123abcd",
        "{job}x-workdir-0123abcd-0",
        "anything",
    ],
    ids=["another-job", "suffix", "no-part", "longer-name", "free-name"],
)
def test_another_jobs_configmaps_are_refused(training_layer, researcher, capsys, tmp_path, config_map):
    job = workdir_job(training_layer, capsys, tmp_path)
    projected = next(v for v in template(job)["spec"]["volumes"] if "projected" in v)
    projected["projected"]["sources"][0]["configMap"]["name"] = config_map.format(job=job["metadata"]["name"])
    refused(training_layer, researcher, job, WORKDIR)


def test_a_sweep_label_opens_only_a_sweeps_own_jobs(training_layer, researcher, capsys, tmp_path):
    """The sweep's ConfigMaps only for a job named <sweep>-<n>: alice's job labelled sweep victim is refused."""
    job = workdir_job(training_layer, capsys, tmp_path)
    template(job)["metadata"]["labels"]["torchfleet.io/sweep"] = "victim"
    projected = next(v for v in template(job)["spec"]["volumes"] if "projected" in v)
    projected["projected"]["sources"][0]["configMap"]["name"] = "victim-workdir-0123abcd-0"
    refused(training_layer, researcher, job, WORKDIR)


def test_a_reader_projecting_a_configmap_is_refused(training_layer, researcher, capsys, tmp_path):
    job = workdir_job(training_layer, capsys, tmp_path)
    projected = copy.deepcopy(next(v for v in template(job)["spec"]["volumes"] if "projected" in v))
    pod = reader(training_layer)
    pod["spec"]["volumes"].append(projected)
    pod["spec"]["containers"][0]["volumeMounts"].append({"name": projected["name"], "mountPath": "/code"})
    refused(training_layer, researcher, pod, NO_CONFIGMAP)


# ---- a folder outlives its job, a name does not: each job's folder is in its maker's (issue 30) -----------------
#
# A job's folder keeps its checkpoints, outputs and --workdir code after the job is deleted, and a job name is its
# maker's only while the job exists (validatingadmissionpolicy-owner.yaml). With subPath <job>, whoever submitted a
# job of the same name later mounted the old folder and read or rewrote it. Now subPath <maker's folder>/<job>, the
# maker the object's own torchfleet.io/created-by (store_folder.py; the policy's variable storePath).

MAKERS_FOLDER = "names no folder"


def user_kubeconfig(layer, folder, username: str):
    """A researcher USERNAME in torchfleet:researchers, made as conftest's alice is ('/' escaped for openssl)."""
    import base64

    from tests.controlplane.cluster import openssl
    from tests.controlplane.conftest import GROUP

    pki = layer.cp.workdir / "pki"
    subject = "/CN=" + username.replace("\\", "\\\\").replace("/", "\\/") + f"/O={GROUP}"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "u.key", "-out", "u.csr", "-subj", subject, cwd=folder)
    openssl("x509", "-req", "-in", "u.csr", "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
            "-CAcreateserial", "-out", "u.crt", "-days", "1", cwd=folder)  # fmt: skip
    data = {n: base64.b64encode((folder / n).read_bytes()).decode() for n in ("u.crt", "u.key")}
    config = yaml.safe_load(layer.cp.kubeconfig.read_text())
    config["users"] = [{"name": "u", "user": {"client-certificate-data": data["u.crt"],
                                              "client-key-data": data["u.key"]}}]
    config["contexts"][0]["context"]["user"] = "u"
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def as_made_by(document: dict, user: str) -> dict:
    """DOCUMENT recording USER as its maker (object and templates) and its store mounts left as they are: sent with
    record=False, so that no helper puts a subPath of the builders' form into the maker's folder."""
    from torchfleet.jobs.cluster import CREATED_BY, pod_templates

    document = copy.deepcopy(document)
    for metadata in [document["metadata"], *(t.setdefault("metadata", {}) for t in pod_templates(document))]:
        metadata.setdefault("annotations", {})[CREATED_BY] = user
    return document


def sent_as_is(layer, kubeconfig, document: dict) -> tuple[int, str]:
    return researcher_kubectl(layer, kubeconfig, "create", "--dry-run=server", "-f", "-",
                              input=yaml.safe_dump(document), record=False)  # fmt: skip


def set_store(document: dict, sub_path: str) -> dict:
    spec = document["spec"] if document["kind"] == "Pod" else template(document)["spec"]
    for mount in shared_mounts(spec):
        mount["subPath"] = sub_path
    return document


def stored_sub_paths(layer, job: str) -> set[str]:
    from tests.controlplane.layer import get

    obj = get(layer.cp, "job", job, "-n", layer.namespace)
    return {m["subPath"] for m in shared_mounts(obj["spec"]["template"]["spec"])}


@pytest.fixture(scope="module")
def bob(training_layer, tmp_path_factory):
    return user_kubeconfig(training_layer, tmp_path_factory.mktemp("bob"), "bob")


def test_a_reused_job_name_gets_its_new_makers_folder_never_the_old_one(training_layer, researcher, bob, capsys,
                                                                         tmp_path, monkeypatch):  # fmt: skip
    """alice's job is deleted, her folder stays; bob submits a job of the same name: his pods mount his own folder,
    and every way of his to hers (her folder by name, the old layout's <job>, a reader of the name) is refused.
    On the previous policy and CLI bob's job mounted <job>: alice's folder (and the old layout's is refused here)."""
    from tests.controlplane.layer import kubectl, wait_for
    from torchfleet.jobs import reader_pod

    layer = training_layer
    monkeypatch.setenv("HOME", str(tmp_path))
    job = name("tier-reuse")
    (tmp_path / "train.py").write_text("print('hi')\n")
    submit = ["submit", job, "--gpu", "t4", "--nodes", "1", "--image", IMAGE, "--workdir", str(tmp_path), "--",
              "python", "train.py"]  # fmt: skip
    code, out = as_researcher(layer, researcher, capsys, *submit)
    assert code == 0, out
    assert stored_sub_paths(layer, job) == {f"@alice/{job}"}  # the worker's and the --workdir init container's
    code, out = as_researcher(layer, researcher, capsys, "delete", job)
    assert code == 0, out
    wait_for(f"job {job} gone", lambda: kubectl(layer.cp, "get", "job", job, "-n", layer.namespace,
                                                "--ignore-not-found", "-o", "name").strip() == "")  # fmt: skip

    bobs = cli_documents(layer, capsys, job, "--workdir", str(tmp_path))["Job"]
    for sub_path in (job, f"@alice/{job}", f"@alice/{job}/checkpoints"):
        code, out = sent_as_is(layer, bob, as_made_by(set_store(copy.deepcopy(bobs), sub_path), "bob"))
        assert code != 0 and SUBPATH in out and f"must be @bob/{job}," in out, (sub_path, out)
    target = targets.defaults("aws", layer.namespace)
    readers = [reader_pod.build_pod(reader_pod.pod_name(job), job, "/mnt/shared", IMAGE, target, None, creator="bob"),
               tensorboard.build_pod(job, f"/mnt/shared/{job}", "/mnt/shared", IMAGE, target)]
    for pod in readers:
        pod["metadata"]["namespace"] = layer.namespace
        for sub_path in (job, f"@alice/{job}"):
            code, out = sent_as_is(layer, bob, as_made_by(set_store(copy.deepcopy(pod), sub_path), "bob"))
            assert code != 0 and f"must be @bob/{job}," in out, (pod["metadata"]["name"], sub_path, out)

    code, out = as_researcher(layer, bob, capsys, *submit)
    assert code == 0, out
    assert stored_sub_paths(layer, job) == {f"@bob/{job}"}
    as_researcher(layer, bob, capsys, "delete", job)


@pytest.mark.parametrize("username", ["eve:x/../y", "carol%3Ab", "Dave@example.org", ".."],
                         ids=["colon-slash-dots", "percent", "email", "dots"])
def test_the_policy_and_the_cli_name_the_same_folder_for_any_username(training_layer, capsys, tmp_path, monkeypatch,
                                                                      username):  # fmt: skip
    """A real submit by USERNAME is admitted with the CLI's folder (the policy computed the same one in CEL), and a
    folder of another mapping (the raw username, unescaped) is refused: one path element, never a traversal."""
    from torchfleet.jobs import store_folder

    layer = training_layer
    monkeypatch.setenv("HOME", str(tmp_path))
    kubeconfig = user_kubeconfig(layer, tmp_path, username)
    job = name("tier-user")
    code, out = as_researcher(layer, kubeconfig, capsys, "submit", job, "--gpu", "t4", "--nodes", "1", "--image",
                              IMAGE, "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    assert stored_sub_paths(layer, job) == {store_folder.sub_path(username, job)}
    as_researcher(layer, kubeconfig, capsys, "delete", job)
    raw = cli_documents(layer, capsys, name("tier-user"))["Job"]
    code, out = sent_as_is(layer, kubeconfig, as_made_by(set_store(raw, f"@{username}/{raw['metadata']['name']}"),
                                                         username))  # fmt: skip
    if "/" in username or ":" in username or "%" in username:  # ('..' as an element: the API server's own check)
        assert code != 0 and (SUBPATH in out or "must not contain '..'" in out), out


def test_a_username_that_names_no_folder_mounts_nothing_and_the_cli_says_so(training_layer, capsys, tmp_path,
                                                                          monkeypatch):  # fmt: skip
    """'dave smith' (a space): the CLI refuses before making anything (exit 2), the policy refuses any store mount."""
    layer = training_layer
    monkeypatch.setenv("HOME", str(tmp_path))
    kubeconfig = user_kubeconfig(layer, tmp_path, "dave smith")
    job = name("tier-nofolder")
    code, out = as_researcher(layer, kubeconfig, capsys, "submit", job, "--gpu", "t4", "--nodes", "1", "--image",
                              IMAGE, "--", "python", "train.py")  # fmt: skip
    assert code == 2 and "cannot name a folder of the shared store" in out, out
    from tests.controlplane.layer import kubectl

    assert kubectl(layer.cp, "get", "jobs,networkpolicies", "-n", layer.namespace, "-l", f"torchfleet.io/job={job}",
                   "-o", "name").strip() == ""  # fmt: skip
    document = cli_documents(layer, capsys, job)["Job"]
    for sub_path in (f"@dave smith/{job}", job):
        refused_one = as_made_by(set_store(copy.deepcopy(document), sub_path), "dave smith")
        code, out = sent_as_is(layer, kubeconfig, refused_one)
        assert code != 0 and MAKERS_FOLDER in out, out
