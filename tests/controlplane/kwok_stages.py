"""kwok's stages for the test tier: how a fake node and a fake pod move through their lifecycle.

Nodes and the start of a pod's life are kwok's own "fast" stages, read from the pinned kwok module
(sigs.k8s.io/kwok kustomize/stage/, the same files `kwokctl` loads), so they change only with the
pin. kwok's own pod-complete stage is left out on purpose: it ends every Job-owned pod at once with
exit 0, and a training pod runs until it is told to stop. Our one stage of our own, pod-exit, ends
a running pod the way the kubelet reports a container that exited: a test writes the exit code
into the pod's EXIT_CODE_ANNOTATION, and the pod turns Succeeded (0) or Failed (any other code)
with that code in its container status, which is what a Job's podFailurePolicy and the operators
read. kwok's pod-complete still ends the pods of the platform's own one-shot Jobs (the store's
owner Job: a chown that exits 0), which carry no training role label.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path

import yaml

from components.spec import LABEL_ROLE
from tests.controlplane import build
from torchfleet.jobs.reader_pod import LABEL_READER

NODE_ANNOTATION = "kwok.x-k8s.io/node"  # kwok manages the nodes that carry it (value "fake")
EXIT_CODE_ANNOTATION = "torchfleet.test/exit-code"

KWOK_STAGE_FILES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-delete.yaml",
)

POD_EXIT = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-exit
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $code := index .metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {{{{ if eq $code "0" }}}}Completed{{{{ else }}}}Error{{{{ end }}}}
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {{{{ if eq $code "0" }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
"""


@cache
def kwok_source() -> Path:
    """The pinned kwok module's folder in Go's module cache (the build downloaded it)."""
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=build.MODULES / "kwok",
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def _one_shot_complete(stages: Path) -> str:
    """kwok's pod-complete, narrowed to Job pods that are not training pods, nor the reader pods of
    `torchfleet checkpoints | cp` a job owns (they idle until the CLI deletes them: reader_pod.py)."""
    stage = yaml.safe_load((stages / "pod/fast/pod-complete.yaml").read_text())
    stage["metadata"]["name"] = "pod-complete-one-shot"
    stage["spec"]["selector"]["matchExpressions"] += [
        {"key": f'.metadata.labels["{LABEL_ROLE}"]', "operator": "DoesNotExist"},
        {"key": f'.metadata.labels["{LABEL_READER}"]', "operator": "DoesNotExist"},
    ]
    return yaml.safe_dump(stage)


def config() -> str:
    """kwok's --config: its node and pod stages, the one-shot Jobs' completion, and pod-exit."""
    stages = kwok_source() / "kustomize" / "stage"
    documents = [(stages / name).read_text() for name in KWOK_STAGE_FILES]
    return "\n---\n".join([*documents, _one_shot_complete(stages), POD_EXIT])
