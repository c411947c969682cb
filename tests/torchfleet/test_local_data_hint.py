"""Datasets on the local stack: one hint, the same in the stack's validation, `submit --dataset`,
`upload dataset:NAME` and docs/data.md (issue 32).

Before, submit and upload said "its datasets: none (add torchfleet:datasets to the stack file)", and a
local stack file with that key was then refused ("no object-store driver ... copy data onto the shared
store with `torchfleet upload`", which has no way onto a kind node's store).
"""

from __future__ import annotations

from pathlib import Path

from components.spec.datasets import LOCAL_DATA_HINT
from torchfleet.cli import main

REPO = Path(__file__).resolve().parents[2]


def _err(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_submit_upload_and_the_stack_file_say_the_same(tmp_path, capsys):
    code, err = _err(["submit", "j", "--stack", "local", "--cpu", "--dataset", "imagenet", "--dry-run", "--",
                      "python", "train.py"], capsys)
    assert code == 2 and err.strip().endswith(f"--dataset: stack local has no datasets: {LOCAL_DATA_HINT}"), err
    code, err = _err(["upload", str(tmp_path), "dataset:imagenet", "--stack", "local"], capsys)
    assert code == 2 and err.strip().endswith(f"DEST: stack local has no datasets: {LOCAL_DATA_HINT}"), err
    stack = tmp_path / "Pulumi.mine.yaml"
    stack.write_text("config:\n  torchfleet:cloud: local\n  torchfleet:datasets:\n    - {name: x, bucket: y}\n")
    code = main(["synth", "--stack-file", str(stack)])
    out, err = capsys.readouterr()
    assert code == 2 and f"torchfleet:datasets: remove this key: {LOCAL_DATA_HINT}" in out + err, out + err


def test_the_doc_shows_what_the_hint_says():
    doc = (REPO / "docs" / "data.md").read_text()
    assert "### Datasets on the local stack" in doc and '"Datasets on the local stack"' in LOCAL_DATA_HINT
    command = LOCAL_DATA_HINT.split("`")[1]
    assert f"\n{command}\n" in doc  # the doc's command is the hint's, word for word
    # a job sees only its own folder of the store (issue 30): the data goes there
    assert "/mnt/shared/JOB/imagenet" in doc and "/mnt/shared/JOB/imagenet" in LOCAL_DATA_HINT
    # in its maker's folder (store_folder.py): kind's admin's, made with the group too
    assert "/var/lib/torchfleet/shared/@kubernetes-admin/JOB/`" in LOCAL_DATA_HINT
    assert "2775 /var/lib/torchfleet/shared/@kubernetes-admin /var/lib/torchfleet/shared/@kubernetes-admin/JOB " in doc
