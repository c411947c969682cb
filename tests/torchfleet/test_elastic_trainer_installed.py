"""`import elastic_trainer` works from the installed package, outside the repository (issue 32).

Before, no distribution carried it: `python my_train.py`, pytest or a notebook in a researcher's venv
failed with "No module named 'elastic_trainer'" (only the suite's pythonpath and the image's PYTHONPATH
found it). pyproject now ships it in the torchfleet distribution, from training-image/. It imports
without torch, so the slim command line (test_slim_install.py) is unchanged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "training-image" / "elastic_trainer"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **extra}


def test_the_wheel_carries_every_module_and_imports_from_where_it_is_installed(tmp_path):
    # built from a copy: the build writes build/ and *.egg-info next to pyproject.toml
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for part in ("torchfleet", "components", "training-image/elastic_trainer"):
        shutil.copytree(REPO / part, src / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", src)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, timeout=300, env=_env())
    (wheel,) = (tmp_path / "dist").glob("torchfleet-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("elastic_trainer/")}
    wanted = {f"elastic_trainer/{p.relative_to(SOURCE).as_posix()}" for p in SOURCE.rglob("*.py")
              if "__pycache__" not in p.parts}
    assert wanted <= shipped, sorted(wanted - shipped)

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, timeout=300, env=_env())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-c", "import elastic_trainer, elastic_trainer.launcher, "
                           "elastic_trainer.task_check; print(elastic_trainer.__file__)"],
                          cwd=elsewhere, env=_env(PYTHONPATH=str(site)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(site)


def test_this_venvs_install_has_it_outside_the_suites_pythonpath(tmp_path):
    """.ci/setup's `pip install -e .[dev]`: a script run from anywhere imports the trainer."""
    script = tmp_path / "my_train.py"
    script.write_text("from elastic_trainer.trainer import TrainConfig, train\nprint(TrainConfig.__module__)\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "elastic_trainer.train_config"
