"""The ElasticJob controller's Deployment against what its 2020 binary does at start.

Regression (issue 19): the controller exited at start. Its klog v0.4.0 never gets InitFlags
(pytorch/elastic kubernetes/main.go), so it logs to files under os.TempDir(), and the Deployment
had a read-only root with nothing mounted at /tmp: `log: exiting because of error ... read-only
file system`, exit 2 (kubernetes/klog#89).
"""

from __future__ import annotations

from components.kube import K8S_BASE
from tests.k8s.rendered import load_one

DEPLOYMENT = K8S_BASE / "controller" / "deployment.yaml"


def test_controller_can_write_its_klog_files_under_tmp():
    pod = load_one(DEPLOYMENT)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    assert "/tmp" in mounts, "klog v0.x writes its log files to /tmp"
    assert not mounts["/tmp"].get("readOnly")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    tmp = volumes[mounts["/tmp"]["name"]]
    # A size limit: a pod that writes logs forever is evicted before it fills the node's disk.
    assert set(tmp) == {"name", "emptyDir"} and tmp["emptyDir"]["sizeLimit"]


def test_controller_passes_only_the_flags_its_main_defines():
    # main.go defines --metrics-addr and --enable-leader-election and nothing else (no klog.InitFlags):
    # any other flag, -logtostderr included, ends flag.Parse with exit 2.
    (container,) = load_one(DEPLOYMENT)["spec"]["template"]["spec"]["containers"]
    names = {a.split("=", 1)[0].lstrip("-") for a in container["args"]}
    assert names <= {"metrics-addr", "enable-leader-election"}
