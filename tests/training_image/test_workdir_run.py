"""``submit --workdir`` end to end on this machine: the pod the CLI writes, played by hand. Its init container's
exact command unpacks the packed folder onto a temporary "shared store", then its training container's exact
command and args (the training image's launcher, the etcd-v2 rendezvous on the session's etcd) run in the
container's ``workingDir``, with the container's environment. The script imports a module beside it and the
checkpoint lands under the job's folder: the code a researcher packed is the code that trained.

Only what the cluster fills in differs: ``$(POD_IP)`` is 127.0.0.1, the rendezvous endpoint the local etcd,
the archive's mount point a temporary folder, and ``python`` this interpreter.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from elastic_trainer.local import IMAGE_DIR

from torchfleet.cli import main
from torchfleet.jobs import manifests, workdir

MAIN = """\
import sys

import steps  # a module beside the script: found because the command runs in the unpacked folder
import train

if __name__ == "__main__":  # the data loader's workers (forkserver) run this file again, as any spawn does
    train.main([*sys.argv[1:], f"--total-steps={steps.TOTAL}"])
"""


@pytest.mark.slow
def test_the_packed_code_trains_in_its_unpacked_folder(etcd, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(IMAGE_DIR / "examples" / "train.py", code / "train.py")
    (code / "main.py").write_text(MAIN)
    (code / "steps.py").write_text("TOTAL = 20\n")
    mount = tmp_path / "shared"
    capsys.readouterr()
    flags = ["--cpu", "--image", "registry.example.com/t:1", "--workdir", str(code), "--mount", str(mount)]
    code_exit = main(["submit", "packed", *flags, "--dry-run", "--", "python", "main.py", "--global-batch-size=16"])
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert code_exit == 0
    maps = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ConfigMap"}
    job = next(d for d in documents if d["kind"] == "Job")
    spec = manifests.worker_spec(job)["template"]["spec"]

    parts = tmp_path / "parts"  # the projected volume, as the kubelet lays it out
    parts.mkdir()
    archive = next(v for v in spec["volumes"] if v["name"] == workdir.VOLUME)
    for source in archive["projected"]["sources"]:
        item = source["configMap"]["items"][0]
        data = maps[source["configMap"]["name"]]["binaryData"][item["key"]]
        (parts / item["path"]).write_bytes(base64.b64decode(data))
    init = spec["initContainers"][0]["command"]
    unpacked = subprocess.run([sys.executable, *init[1:3], str(parts), *init[4:]], capture_output=True, text=True,
                              timeout=120)  # fmt: skip
    assert unpacked.returncode == 0, unpacked.stderr

    worker = spec["containers"][0]
    env = {e["name"]: e["value"] for e in worker["env"] if "value" in e}
    env.update(POD_IP="127.0.0.1", PATH=os.environ["PATH"], HOME=str(tmp_path), PYTHONPATH=str(IMAGE_DIR))
    endpoint = f"--rdzv_endpoint={etcd.endpoint}"
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in worker["args"]]
    args = [endpoint if a.startswith("--rdzv_endpoint=") else a for a in args]
    command = [sys.executable, *worker["command"][1:], *args]
    done = subprocess.run(command, cwd=worker["workingDir"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    checkpoints = sorted((mount / "packed" / "checkpoints").glob("ckpt-*/meta.json"))
    assert checkpoints, f"no checkpoint under {mount / 'packed'}"
    assert json.loads(checkpoints[-1].read_text())["step"] == 20  # steps.py's TOTAL: the packed module ran
    assert env[workdir.WORKDIR_ENV] == worker["workingDir"]
