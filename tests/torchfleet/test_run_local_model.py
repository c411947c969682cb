"""`run --local` exports the final model as a cluster job does, and the README's cp line takes it (issue 32).

Before, a local run's folder had no output/ (nothing set $TORCHFLEET_OUTPUT_DIR), so README "8. Outputs"'s
`cp NAME:output/model` had nothing to copy after a local run. A real run, then the README's own line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "training-image" / "examples" / "train.py"


def _torchfleet(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchfleet", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_local_run_exports_the_model_and_the_readmes_cp_line_takes_it(tmp_path):
    tag = new_tag()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TORCHFLEET_")}, TAG_VARIABLE: tag}
    run = _torchfleet(["run", "--local", "--nodes", "1", "--name", "spiral", "--", str(TEMPLATE),
                       "--total-steps=20", "--global-batch-size=8"], tmp_path, env)
    assert run.returncode == 0, run.stderr
    assert_none_left(tag)
    card = json.loads((tmp_path / "torchfleet-runs" / "spiral" / "output" / "model" / "model.json").read_text())
    assert card["step"] == 20
    said = "torchfleet cp :output/model ./spiral-model --local torchfleet-runs/spiral"
    assert said in run.stdout, run.stdout

    readme = (REPO / "README.md").read_text()
    (line,) = re.findall(r"^torchfleet cp :output/model .*--local torchfleet-runs/NAME.*$", readme, re.MULTILINE)
    argv = shlex.split(line.replace("NAME", "spiral"), comments=True)
    done = _torchfleet(argv[1:], tmp_path, env)
    assert done.returncode == 0, done.stderr
    copied = tmp_path / argv[3]
    assert sorted(p.name for p in copied.iterdir()) == ["model.json", "model.pt"]
