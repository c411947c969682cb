"""Results out of a real local run (issue 21): the launcher, torchrun and etcd train the synthetic example
with TORCHFLEET_OUTPUT_DIR set as a cluster pod has it; then `torchfleet checkpoints` lists the run's
checkpoints and `torchfleet cp` downloads its final model, through the same store_script.py a cluster's
reader pod runs, and the model loads with torch alone.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from elastic_trainer.store.checkpoint import CheckpointStore

from torchfleet.cli import main

STEPS, EVERY = 12, 4


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_a_local_runs_checkpoints_are_listed_and_its_final_model_downloaded(make_job, tmp_path, capsys):
    store = tmp_path / "store"
    job = make_job(f"--total-steps={STEPS}", "--global-batch-size=8", f"--checkpoint-every={EVERY}",
                   "--keep-checkpoints=3", "--eval-every=6", nnodes="1:1", workdir=store / "run1",
                   extra_env={"TORCHFLEET_OUTPUT_DIR": str(store / "run1" / "output")})
    job.start_node("node0")
    job.wait_for("done", 300)
    assert job.nodes[0].wait(60) == 0
    assert [e["step"] for e in job.events.snapshot() if e.kind == "eval"] == [6, 12]

    code, out, err = cli(capsys, "checkpoints", "run1", "--shared-dir", str(store), "--verify", "-o", "json")
    assert code == 0, err
    listed = json.loads(out)["checkpoints"]
    assert [(c["step"], c["verified"], c["checked"]) for c in listed] == [(s, True, "sha256") for s in (12, 8, 4)]
    assert all(c["bytes"] > 0 and c["reason"] in ("periodic", "final") for c in listed)

    code, out, err = cli(capsys, "cp", "run1:output/model", str(tmp_path / "model"), "--shared-dir", str(store))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["model.json", "model.pt"]
    assert "100%" in err
    card = json.loads((tmp_path / "model" / "model.json").read_text())
    assert card["step"] == STEPS and card["bytes"] == (tmp_path / "model" / "model.pt").stat().st_size
    # read by a bare Python (-I: no PYTHONPATH) that has torch and nothing of Torchfleet
    load = "import sys, torch; torch.save(dict(torch.load(sys.argv[1], weights_only=True)), sys.argv[2])"
    subprocess.run([sys.executable, "-I", "-c", load, str(tmp_path / "model" / "model.pt"), str(tmp_path / "copy.pt")],
                   check=True, timeout=120, cwd="/")
    exported = torch.load(tmp_path / "copy.pt", weights_only=True)
    final, meta = CheckpointStore(store / "run1" / "checkpoints").load_latest("cpu")[:2]
    assert meta["step"] == STEPS
    assert exported.keys() == final["model"].keys()
    assert all(torch.equal(exported[k], final["model"][k]) for k in exported)  # the final weights, exactly

    # a flipped byte keeps the size: only --verify sees it, and says which file
    state = store / "run1" / "checkpoints" / listed[0]["name"] / "state.pt"
    data = bytearray(state.read_bytes())
    data[-1] ^= 0xFF
    state.write_bytes(bytes(data))
    code, out, _ = cli(capsys, "checkpoints", "run1", "--shared-dir", str(store))
    assert code == 0 and out.splitlines()[1].endswith("size ok"), out
    code, out, _ = cli(capsys, "checkpoints", "--local", str(store / "run1"), "--verify")  # the run's own folder
    assert out.splitlines()[1].endswith("NO: state.pt: sha256 differs from meta.json's"), out
    assert out.splitlines()[2].endswith("sha256 ok"), out

    # the whole checkpoints folder, into an existing folder (as cp does)
    (tmp_path / "all").mkdir()
    code, out, err = cli(capsys, "cp", "run1:checkpoints", str(tmp_path / "all"), "--shared-dir", str(store))
    assert code == 0, err
    assert {c["name"] for c in listed} <= {p.name for p in (tmp_path / "all" / "checkpoints").iterdir()}
    assert (tmp_path / "all" / "checkpoints" / listed[0]["name"] / "state.pt").read_bytes() == bytes(data)
