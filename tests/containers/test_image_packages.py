"""The image's Python packages are the project venv's (issue 31: reuse what .ci/setup installed):
the same files, not a second download, and all of torch's nvidia-* libraries, which torch 2.13.0
needs to import at all, GPU or not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.containers import image as image_build

PROBE = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p] + [sys.argv[1]]\n"
         "import torch\n"
         "m = torch.nn.Linear(4, 1); (m(torch.randn(8, 4)) ** 2).mean().backward()\n"
         "print('trained', torch.__version__, torch.cuda.is_available())\n")


def _site_copy(dest: Path, leave_out: set[str]) -> Path:
    """The venv's site-packages as hard links (no space), without the top-level names LEAVE_OUT."""
    dest.mkdir()
    for entry in image_build.VENV_SITE.iterdir():
        if entry.name not in leave_out:
            subprocess.run(["cp", "-al", str(entry), str(dest)], check=True)
    return dest


def _probe(site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-c", PROBE, str(site)], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"]}, timeout=600, check=False)


def test_torch_does_not_import_on_a_cpu_without_its_nvidia_libraries(tmp_path):
    """Why the CPU image carries 2.7 GB of CUDA libraries: torch/__init__.py's _load_global_deps
    cannot load libtorch_global_deps.so (NEEDED libcudart) and preloads the 16 nvidia-* libraries
    with required=True. If a torch pin stops needing them, this fails: then leave them out. A venv
    with a CPU build of the pin (PyTorch's CPU index, ci.yml) has none to leave out."""
    if not (image_build.VENV_SITE / "nvidia").is_dir():
        pytest.skip(f"{image_build.VENV_SITE} has no nvidia-* libraries (a CPU build of torch): nothing to leave out")
    without = _probe(_site_copy(tmp_path / "without", {"nvidia"}))
    assert without.returncode != 0
    assert "ValueError: libcublasLt.so.*[0-9] not found in the system path" in without.stderr, without.stderr
    # the same copy with them trains on the CPU: nothing else is missing (triton is not needed to import)
    subprocess.run(["cp", "-al", str(image_build.VENV_SITE / "nvidia"), str(tmp_path / "without")], check=True)
    with_them = _probe(tmp_path / "without")
    assert with_them.returncode == 0 and "trained 2.13.0" in with_them.stdout, with_them.stderr


def test_the_packages_are_the_venvs_files(image):
    """Hard links to the venv's installed files (or, where a file is not root's, copies of them):
    the pinned torch wheel as .ci/setup installed and tested it, its bytecode included."""
    site = image.rootfs / image_build.SITE_PACKAGES
    torch = metadata.distribution("torch")
    for rel in ("torch/__init__.py", "torch/lib/libtorch_cpu.so", "torch/__pycache__/__init__.cpython-311.pyc"):
        venv_file = Path(torch.locate_file(rel))
        assert (site / rel).read_bytes() == venv_file.read_bytes(), rel
    assert os.path.samefile(site / "torch/lib/libtorch_cpu.so", Path(torch.locate_file("torch/lib/libtorch_cpu.so")))
    # every venv distribution the image needs at its version, only those: no dev tools, no console scripts
    names = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"torch", "numpy", "nvidia_cublas", "python_etcd", "tensorboard", "torchft"} <= names
    assert not names & {"pytest", "pulumi", "ruff", "torchfleet"}
    assert not (site / "bin").exists()


UNPACK = ("import io, sys, tarfile, tempfile\n"
          "b = io.BytesIO()\n"
          "with tarfile.open(fileobj=b, mode='w:gz') as t:\n"
          "    for name, link in (('train.py', ''), ('escape', '/etc/passwd')):\n"
          "        i = tarfile.TarInfo(name)\n"
          "        if link: i.type, i.linkname = tarfile.SYMTYPE, link\n"
          "        t.addfile(i, io.BytesIO(b''))\n"
          "b.seek(0)\n"
          "with tarfile.open(fileobj=b, mode='r:gz') as t:\n"
          "    try: t.extractall(tempfile.mkdtemp(), filter='data')\n"
          "    except tarfile.AbsoluteLinkError as e: print('refused', e)\n"
          "print(sys.version.split()[0])\n")


def test_the_images_python_unpacks_workdir_code_with_the_data_filter(image):
    """The --workdir init container extracts with tarfile's `data` filter (PEP 706) and refuses to run
    without it (torchfleet/jobs/workdir.py). Debian bookworm's python3.11 (3.11.2) has none, so on the
    image as first built every --workdir pod's init container exited 1 (seen on the real node,
    test_real_training.py); the build takes tarfile.py from its own 3.11.4+ stdlib (STDLIB_NEWER)."""
    done = subprocess.run([shutil.which("chroot") or "chroot", str(image.rootfs), "python", "-I", "-B", "-c", UNPACK],
                          capture_output=True, text=True, env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused 'escape' is a link to an absolute path", "3.11.2"], done.stdout
