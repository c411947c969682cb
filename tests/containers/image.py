"""The training image's CPU variant, built without a registry (issue 31).

    python -m tests.containers.image                  # build or find it; one timed line
    python -m tests.containers.image --archive FILE   # also write its OCI archive (FILE - : stdout)

training-image/Dockerfile starts FROM a CUDA base that only a registry serves. This builds the
same image on a Debian root file system made here instead: mmdebstrap (Debian's packages) with
python3.11, then the Dockerfile's own instructions read from the file, not restated: its ENV,
the groupadd/useradd commands of its RUN, its WORKDIR, its COPYs (examples/, root-owned; the
elastic_trainer package's sources it stages in /tmp/ and pip-installs into site-packages), its USER,
ENTRYPOINT and CMD, so the two cannot drift apart silently
(tests/containers/test_image_config.py compares them with the built image's config).

The Python packages are pip's resolution of the torch and numpy pyproject's `train` extra pins
plus the Dockerfile's requirements.txt, taken from what `.ci/setup` already installed: every
distribution the project venv holds at the resolved version is hard-linked into the image from
the files its RECORD lists (the same torch 2.13.0 wheel, nvidia-* libraries included, and the
bytecode pip compiled at install); only the rest (tensorboard and its dependencies today) is
downloaded as wheels into a wheelhouse. torch 2.13.0 from PyPI cannot leave its nvidia-* wheels
out on a CPU node: torch/__init__.py's _load_global_deps preloads all 16 CUDA libraries
(required=True) when libtorch_global_deps.so cannot find libcudart, and `import torch` fails with
ValueError "libcublasLt.so.*[0-9] not found" without them (docs/benchmarks.md, "Real containers").

The result is a real OCI image written here (no umoci, no registry): three layers, Debian /
packages / code, each a tar (GNU tar, sorted, numeric owners) compressed with zstd
(application/vnd.oci.image.layer.v1.tar+zstd, which containerd unpacks since 1.5), an image
config with Entrypoint, User, Env, WorkingDir, and an index naming it image_ref(), so
`ctr -n k8s.io images import` takes the archive as it is. Beside it the runtime bundle the tests run
with runc: the three trees hard-linked into one rootfs (the same files the layers hold) and umoci's
runtime config of the image's config (the entrypoint as its user).

Everything lives outside the clone, under ~/.cache/torchfleet/image/ (TORCHFLEET_IMAGE_CACHE
moves it), one folder per layer keyed on that layer's inputs: a code-only change writes only the
code layer (seconds), a venv whose packages changed rebuilds the packages layer, Debian is made
once. A second run only checks a stamp. Superseded folders are removed after a build.

Pins: Debian `bookworm` (12) from deb.debian.org, the mirror this machine's apt uses; every
installed package's version is written next to the image (debian-packages.txt), and
TORCHFLEET_DEBIAN_MIRROR=http://snapshot.debian.org/archive/debian/<YYYYMMDDTHHMMSSZ>/ pins a
snapshot where that host is reachable. The Debian Python is 3.11.2, the venv's 3.11 ABI (cp311
wheels, bytecode magic 3495 for every 3.11); the image's `python` is python-is-python3. Its tarfile.py
is this interpreter's (3.11.4+, with PEP 706's extraction filters, which --workdir's init container needs
and Debian's 3.11.2 lacks; STDLIB_NEWER), in the packages layer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = REPO / "training-image"
DOCKERFILE = IMAGE_DIR / "Dockerfile"
REQUIREMENTS = IMAGE_DIR / "requirements.txt"
PYPROJECT = REPO / "pyproject.toml"
CACHE = Path(os.environ.get("TORCHFLEET_IMAGE_CACHE", Path.home() / ".cache" / "torchfleet" / "image"))
WHEELS = CACHE / "wheels"
TAG = "cpu"
# The name containerd files the image under (`ctr images import`): the published repository with the
# trainer's version and -cpu, so a pod naming it (imagePullPolicy IfNotPresent) finds this build
# and never the registry's CUDA image of the same version.
REPOSITORY = "ghcr.io/torchfleet/torchfleet-trainer"
# This interpreter's site-packages: the project venv .ci/setup made (the packages are linked from it).
VENV_SITE = Path(sysconfig.get_paths()["purelib"])

SUITE = "bookworm"
MIRROR = os.environ.get("TORCHFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# python-is-python3: the ENTRYPOINT runs `python`; passwd: the Dockerfile's groupadd/useradd.
DEBIAN_PACKAGES = ("python3.11", "python-is-python3", "passwd")
# Debian's python3.11 puts /usr/local/lib/python3.11/dist-packages on sys.path (pip's place there).
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"
# The packages of pyproject's `train` extra the Dockerfile's base already carries, at those pins.
TRAIN_PINS = ("torch", "numpy")
# Stdlib modules the image's code needs newer than Debian bookworm's python3.11 has them (3.11.2, up to
# 3.11.2-6+deb12u8 without PEP 706's extraction filters: its tarfile.py has no `filter` in extractall,
# and the changelog backports none), taken from this interpreter's stdlib (3.11.4 or later, the same
# 3.11 whose venv the packages come from), as the real base has them: pytorch/pytorch's Dockerfile installs
# conda-forge's `python=3.11`, its newest patch release (pytorch/pytorch 01343dcd Dockerfile, PYTHON_VERSION;
# 3.11.4 came out in June 2023). The --workdir init container unpacks with tarfile's `data` filter and
# refuses to run without it (torchfleet/jobs/workdir.py).
STDLIB_NEWER = ("tarfile.py",)
STDLIB = "usr/lib/python3.11"  # Debian's python3.11 stdlib, which this layer's files replace
# What the build needs: a test names what is missing rather than a cryptic error.
TOOLS = ("mmdebstrap", "umoci", "runc", "tar", "zstd")
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+zstd"
# zstd's default level on every core: on the first GiB of the packages layer's tar, 11 s and 629 MiB
# against gzip -6's 96 s and 660 MiB (2026-11-28, 2 cores, load 6-8; docs/benchmarks.md).
ZSTD = ("zstd", "-q", "-3", "-T0")


class ImageError(RuntimeError):
    pass


@dataclass
class Dockerfile:
    """The instructions of training-image/Dockerfile this build repeats (after its FROM)."""

    env: dict[str, str] = field(default_factory=dict)
    user_commands: list[list[str]] = field(default_factory=list)  # groupadd/useradd of RUN, as argv
    workdir: str = "/"
    copies: list[tuple[str, str]] = field(default_factory=list)  # (source in training-image/, target)
    # COPYs into /tmp/ are a package's sources, which a RUN pip install then installs and rm removes:
    # staged the same way here and installed into the code layer's site-packages
    staged: list[tuple[str, str]] = field(default_factory=list)  # (source in training-image/, /tmp/ target)
    packages: list[str] = field(default_factory=list)  # the /tmp/ folders RUN pip install names
    user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def read_dockerfile(path: Path = DOCKERFILE) -> Dockerfile:
    """Parse the instructions this build repeats. An instruction it does not know fails the
    build, naming it: a new one in the Dockerfile must be repeated here (or listed as the base's)."""
    out = Dockerfile()
    lines = path.read_text().replace("\\\n", " ").splitlines()
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, arg = line.partition(" ")
        op, arg = op.upper(), arg.strip()
        if op in ("ARG", "FROM", "HEALTHCHECK"):
            continue  # the base (replaced by Debian here); HEALTHCHECK NONE is runc's default
        if op == "ENV":
            for item in shlex.split(arg):
                key, _, value = item.partition("=")
                out.env[key] = value
        elif op == "RUN":
            # pip's line is replaced by the wheelhouse install (same requirements.txt); the user
            # lines run as written. Anything else is new and must be handled here.
            for command in arg.split("&&"):
                argv = shlex.split(command)
                if argv[:1] in (["groupadd"], ["useradd"]):
                    out.user_commands.append(argv)
                elif argv[:2] == ["pip", "install"] and argv[-1].startswith("/tmp/") and "-r" not in argv:
                    out.packages.append(argv[-1])  # a package folder staged by COPYs into /tmp/
                elif argv[:2] == ["pip", "install"] or argv[:2] == ["rm", "/tmp/requirements.txt"]:
                    continue
                elif argv[:2] == ["rm", "-r"] and all(a.startswith("/tmp/") for a in argv[2:]):
                    continue  # the staged sources, never in the image here either
                else:
                    raise ImageError(f"{path}: RUN {command.strip()!r} is not repeated by tests/containers/image.py")
        elif op == "WORKDIR":
            out.workdir = arg
        elif op == "COPY":
            source, target = arg.split()
            if source == "requirements.txt":  # installed from the wheelhouse instead
                continue
            if target.startswith("/tmp/"):
                out.staged.append((source.rstrip("/"), target))
            else:
                out.copies.append((source.rstrip("/"), target))
        elif op == "USER":
            out.user = arg
        elif op == "ENTRYPOINT":
            out.entrypoint = json.loads(arg)
        elif op == "CMD":
            out.cmd = json.loads(arg)
        else:
            raise ImageError(f"{path}: {op} is not repeated by tests/containers/image.py")
    return out


def train_pins() -> list[str]:
    """torch==... and numpy==... from pyproject's `train` extra."""
    import tomllib

    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["train"]
    pins = [req for req in extra if req.split("==")[0] in TRAIN_PINS]
    if len(pins) != len(TRAIN_PINS) or not all("==" in pin for pin in pins):
        raise ImageError(f"pyproject.toml: the train extra must pin {', '.join(TRAIN_PINS)} with ==; found {extra}")
    return pins


def _code_files() -> list[Path]:
    spec = read_dockerfile()
    files = []
    for source, _ in [*spec.copies, *spec.staged]:
        root = IMAGE_DIR / source
        files += [p for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts] \
            if root.is_dir() else [root]
    return files


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def image_ref() -> str:
    """REPOSITORY:<training-image/pyproject.toml's version>-cpu."""
    import tomllib

    version = tomllib.loads((IMAGE_DIR / "pyproject.toml").read_text())["project"]["version"]
    return f"{REPOSITORY}:{version}-{TAG}"


def debian_key() -> str:
    """What the Debian layer depends on: the suite, mirror, packages and the Dockerfile's user lines."""
    return _digest([SUITE.encode(), MIRROR.encode(), " ".join(DEBIAN_PACKAGES).encode(),
                    json.dumps(read_dockerfile().user_commands).encode(), _source("_debian_rootfs")])


def packages_key() -> str:
    """What the packages layer depends on, read without the network: the requirements and pins,
    and every distribution installed in the venv (name-version of each dist-info and its RECORD's
    size and mtime), so a venv that changed rebuilds the layer and one that did not is not asked."""
    records = sorted(VENV_SITE.glob("*.dist-info/RECORD"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return _digest([REQUIREMENTS.read_bytes(), " ".join(train_pins()).encode(),
                    sys.version.split()[0].rsplit(".", 1)[0].encode(), _source("_packages_tree"),
                    _source("_stdlib_newer"), *((stdlib / name).read_bytes() for name in STDLIB_NEWER),
                    *(f"{p.parent.name} {p.stat().st_size} {p.stat().st_mtime_ns}".encode() for p in records)])


def _source(name: str) -> bytes:
    """A builder function's source: a change to how a layer is made rebuilds that layer."""
    import inspect

    return inspect.getsource(globals()[name]).encode()


def image_key() -> str:
    """Everything the image is made of, this file included."""
    files = _code_files()
    return _digest([debian_key().encode(), packages_key().encode(), DOCKERFILE.read_bytes(),
                    Path(__file__).read_bytes(), image_ref().encode(),
                    *(str(p.relative_to(IMAGE_DIR)).encode() + b"\0" + p.read_bytes() for p in files)])


@dataclass(frozen=True)
class Image:
    root: Path  # ~/.cache/torchfleet/image/<key>

    @property
    def layout(self) -> Path:
        """The OCI image layout (oci-layout, index.json, blobs/sha256/)."""
        return self.root / "oci"

    @property
    def bundle(self) -> Path:
        """runc's bundle: rootfs/ and config.json."""
        return self.root / "bundle"

    @property
    def rootfs(self) -> Path:
        return self.bundle / "rootfs"

    def _blob(self, descriptor: dict) -> dict:
        algorithm, digest = descriptor["digest"].split(":")
        return json.loads((self.layout / "blobs" / algorithm / digest).read_text())

    def _manifest(self) -> dict:
        index = json.loads((self.layout / "index.json").read_text())
        return self._blob(next(m for m in index["manifests"]
                               if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == TAG))

    def config(self) -> dict:
        """The image config's `config` (Entrypoint, User, Env, ...): index -> manifest -> config blob."""
        return self._blob(self._manifest()["config"])["config"]

    def layers(self) -> list[dict]:
        return self._manifest()["layers"]

    def runtime_config(self) -> dict:
        return json.loads((self.bundle / "config.json").read_text())


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise ImageError(f"{shlex.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-3000:]}")
    return proc


def _debian_rootfs(dest: Path) -> None:
    """mmdebstrap's minbase plus the packages, then the Dockerfile's user commands in a chroot."""
    spec = read_dockerfile()
    hooks = [f'--customize-hook=chroot "$1" {shlex.join(argv)}' for argv in spec.user_commands]
    hooks.append('--customize-hook=chroot "$1" dpkg-query -W > "$1/../debian-packages.txt"')
    _run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
          "--aptopt=Acquire::Languages \"none\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
          "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
          *hooks, SUITE, str(dest), MIRROR])


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    wheel: bool  # downloaded (not in the venv at this version)


def resolve() -> list[Dist]:
    """pip's resolution of the image's requirements against the venv (`pip install --dry-run
    --report`): what the venv holds at a satisfying version is kept, the report lists what pip
    would add. The closure is then walked from the requirements through each distribution's
    Requires-Dist (markers evaluated here: the image is this machine's linux/x86_64 and 3.11), so
    only what the image needs is taken from the venv, never its dev tools."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    reqs = [*train_pins(), *(line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines())]
    reqs = [r for r in reqs if r]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
              "--only-binary=:all:", "-f", str(WHEELS), "--report", str(report), *reqs])
        added = {canonicalize_name(item["metadata"]["name"]): item["metadata"]
                 for item in json.loads(report.read_text())["install"]}
    found: dict[str, Dist] = {}
    todo, seen = [(Requirement(r), "") for r in reqs], set()
    while todo:
        req, extra = todo.pop()
        name = canonicalize_name(req.name)
        if (req.marker and not req.marker.evaluate({"extra": extra})) or (str(req), extra) in seen:
            continue
        seen.add((str(req), extra))
        if name in added:
            version, requires, wheel = added[name]["version"], added[name].get("requires_dist") or [], True
        else:
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                raise ImageError(f"{req} is neither in {VENV_SITE} nor in pip's resolution") from None
            version, requires, wheel = dist.version, dist.requires or [], False
        if not req.specifier.contains(version, prereleases=True):
            raise ImageError(f"{req}: pip resolved {name} {version}")
        found[name] = Dist(name, version, wheel)
        todo += [(Requirement(r), e) for r in requires for e in ("", *req.extras)]
    return sorted(found.values(), key=lambda d: d.name)


def _link(src: Path, dst: Path) -> None:
    """A hard link to the venv's file when it is root's and not group/other-writable (what the
    image wants: code the job cannot rewrite), else a root-owned copy without those bits."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    st = src.lstat()
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif st.st_uid == 0 and st.st_gid == 0 and not st.st_mode & 0o022 and st.st_dev == dst.parent.stat().st_dev:
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)
        os.chown(dst, 0, 0)
        dst.chmod(st.st_mode & 0o755)


def _packages_tree(dest: Path, dists: list[Dist]) -> None:
    """The packages layer's tree: the venv's distributions linked file by file from their RECORD
    (its console scripts left out: their #! names the venv), the others installed from wheels."""
    site = dest / SITE_PACKAGES
    site.mkdir(parents=True)
    wheels = [f"{d.name}=={d.version}" for d in dists if d.wheel]
    if wheels:
        WHEELS.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
              "--only-binary=:all:", "-f", str(WHEELS), "-d", str(WHEELS), *wheels])
        _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
              "--no-deps", "--only-binary=:all:", "-f", str(WHEELS), "--target", str(site), *wheels])
        shutil.rmtree(site / "bin", ignore_errors=True)
    for dist in (d for d in dists if not d.wheel):
        installed = metadata.distribution(dist.name)
        for file in installed.files or []:
            src = Path(installed.locate_file(file))
            rel = os.path.normpath(src.relative_to(VENV_SITE)) if src.is_relative_to(VENV_SITE) else ".."
            if rel.startswith(".."):
                continue
            if not src.exists() and not src.is_symlink():
                continue  # RECORD lists it, pip never wrote it (e.g. a .pyc of a py2-only file)
            _link(src, site / rel)
    _stdlib_newer(dest)
    for path in [dest, *dest.rglob("*")]:  # the folders this made: root's, 0755
        if path.is_dir() and not path.is_symlink():
            os.chown(path, 0, 0)
            path.chmod(0o755)


def _stdlib_newer(dest: Path) -> None:
    """STDLIB_NEWER linked from this interpreter's stdlib over Debian's, with their bytecode (valid:
    the link keeps the source's mtime and size, which the .pyc records)."""
    import importlib.util
    import tarfile

    if not hasattr(tarfile, "data_filter"):
        raise ImageError(f"{sys.executable} is Python {sys.version.split()[0]}: its tarfile has no extraction "
                         "filters (PEP 706, 3.11.4 or later), which the image's --workdir init container needs; "
                         "build with Python 3.11.4 or later")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in STDLIB_NEWER:
        _link(stdlib / name, dest / STDLIB / name)
        if (pyc := Path(importlib.util.cache_from_source(str(stdlib / name)))).is_file():
            _link(pyc, dest / STDLIB / "__pycache__" / pyc.name)


def _code(dest: Path) -> None:
    """The Dockerfile's COPYs, root-owned and not writable by the job (the image's comment)."""
    spec = read_dockerfile()
    for source, target in spec.copies:
        src = IMAGE_DIR / source
        out = dest / target.lstrip("/")
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    if spec.packages:
        _packages(spec, dest)
    for path in [dest, *dest.rglob("*")]:
        os.chown(path, 0, 0, follow_symlinks=False)
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def _packages(spec: Dockerfile, dest: Path) -> None:
    """The Dockerfile's COPYs into /tmp/ staged outside the image, then its `pip install --no-deps
    /tmp/...` into the code layer's site-packages (the build backend from this venv: no index here)."""
    with tempfile.TemporaryDirectory() as scratch:
        for source, target in spec.staged:
            src, out = IMAGE_DIR / source, Path(scratch) / target.lstrip("/")
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(src, out)
        for package in spec.packages:
            _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                  "--no-deps", "--no-build-isolation", "--no-compile", "--target", str(dest / SITE_PACKAGES),
                  str(Path(scratch) / package.lstrip("/"))])


def write_layer(tree: Path, out: Path, created_by: str) -> dict:
    """TREE's contents at / as one layer blob in OUT (a folder): GNU tar, names sorted and numeric
    owners (the same tree gives the same digest), mtimes kept (the bytecode checks its source's),
    zstd. Returns its descriptor, diff_id (the tar's digest, the image config's rootfs) and history."""
    out.mkdir(parents=True, exist_ok=True)
    blob = out / "layer.tar.zst"
    names = sorted(p.name for p in tree.iterdir())
    tar = subprocess.Popen(["tar", "--create", "--sort=name", "--numeric-owner", "--xattrs", "-C", str(tree),
                            "-f", "-", "--", *names], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(blob, "wb") as sink:
        zstd = subprocess.Popen([*ZSTD, "-c"], stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.PIPE)
        diff_id = hashlib.sha256()
        while chunk := tar.stdout.read(1 << 20):
            diff_id.update(chunk)
            zstd.stdin.write(chunk)
        zstd.stdin.close()
        if tar.wait() != 0 or zstd.wait() != 0:
            raise ImageError(f"tar/zstd of {tree}: {tar.stderr.read().decode()[-2000:]} {zstd.stderr.read().decode()}")
    digest = hashlib.sha256()
    with open(blob, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    layer = {"descriptor": {"mediaType": LAYER_MEDIA_TYPE, "digest": f"sha256:{digest.hexdigest()}",
                            "size": blob.stat().st_size},
             "diff_id": f"sha256:{diff_id.hexdigest()}", "created_by": created_by}
    (out / "layer.json").write_text(json.dumps(layer, indent=1))
    return layer


def _cached_layer(name: str, key: str, make, log) -> Path:
    """CACHE/<name>-<key>/: tree/ (made by MAKE(tree)), layer.tar.zst, layer.json, done."""
    folder = CACHE / f"{name}-{key}"
    if (folder / "done").is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.monotonic()
    created_by = make(folder / "tree")
    made = time.monotonic()
    write_layer(folder / "tree", folder, created_by)
    (folder / "done").write_text("")
    log(f"[image]   {name} layer: tree {made - started:.0f} s, tar+zstd {time.monotonic() - made:.0f} s, "
        f"{(folder / 'layer.tar.zst').stat().st_size / 2**20:.0f} MiB")
    return folder


def _add_blob(layout: Path, data: bytes, media_type: str) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def write_layout(layout: Path, layers: list[Path], spec: Dockerfile) -> None:
    """The OCI image layout: each layer's blob hard-linked from its cache folder (content-addressed,
    never rewritten), the image config from the Dockerfile's instructions, the manifest, and an
    index naming the image for umoci (TAG) and for containerd's import (image_ref())."""
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    described = [json.loads((folder / "layer.json").read_text()) for folder in layers]
    for folder, layer in zip(layers, described, strict=True):
        os.link(folder / "layer.tar.zst", layout / "blobs" / "sha256" / layer["descriptor"]["digest"][7:])
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **spec.env}
    config = {
        "architecture": "amd64", "os": "linux",
        "author": "tests/containers/image.py",
        "config": {"User": spec.user, "Env": [f"{k}={v}" for k, v in env.items()],
                   "Entrypoint": spec.entrypoint, "Cmd": spec.cmd, "WorkingDir": spec.workdir},
        "rootfs": {"type": "layers", "diff_ids": [layer["diff_id"] for layer in described]},
        "history": [{"created_by": layer["created_by"]} for layer in described],
    }
    config_desc = _add_blob(layout, json.dumps(config, sort_keys=True).encode(),
                            "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer["descriptor"] for layer in described]}
    manifest_desc = _add_blob(layout, json.dumps(manifest, sort_keys=True).encode(),
                              "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": TAG,
                                    "io.containerd.image.name": image_ref()}
    (layout / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [manifest_desc]}, sort_keys=True))


def _link_tree(source: Path, dest: Path) -> None:
    """SOURCE's contents merged into DEST as hard links (cp -al): the image's files are never
    written after the build (containers get the root read-only), so images and layers share them."""
    dest.mkdir(parents=True, exist_ok=True)
    _run(["cp", "-al", "--", f"{source}/.", str(dest)])


def build(log=print) -> Image:
    """Build the image unless the cache holds it; print one timed line."""
    if missing := missing_tools():
        raise ImageError(f"{', '.join(missing)} not installed: apt-get install mmdebstrap umoci runc tar zstd")
    if os.geteuid() != 0:
        raise ImageError("building the image needs root (mmdebstrap's chroot, root-owned files in the layers)")
    started = time.monotonic()
    key = image_key()
    image = Image(CACHE / key)
    if (image.root / "done").is_file():
        log(f"[image] torchfleet-trainer:{TAG}: cached {image.root} ({time.monotonic() - started:.1f} s)")
        return image
    spec = read_dockerfile()
    made = []

    def debian(tree: Path) -> str:
        made.append("debian")
        _debian_rootfs(tree)
        shutil.move(tree.parent / "debian-packages.txt", tree.parent / "packages.txt")
        return f"mmdebstrap --variant=minbase {SUITE} {' '.join(DEBIAN_PACKAGES)}"

    def packages(tree: Path) -> str:
        made.append("packages")
        dists = resolve()
        _packages_tree(tree, dists)
        (tree.parent / "packages.txt").write_text(
            "".join(f"{d.name}=={d.version}{' (wheel)' if d.wheel else ''}\n" for d in dists))
        return "pip install " + " ".join(f"{d.name}=={d.version}" for d in dists)

    layers = [_cached_layer("debian", debian_key(), debian, log),
              _cached_layer("packages", packages_key(), packages, log)]
    work = CACHE / f"tmp-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        code = work / "code"
        _code(code / "tree")
        write_layer(code / "tree", code, "COPY " + " ".join(f"{s}/ {t}" for s, t in spec.copies)
                    + " && pip install --no-deps " + " ".join(spec.packages))
        layers.append(code)
        write_layout(work / "oci", layers, spec)
        rootfs = work / "bundle" / "rootfs"
        for layer in layers:
            _link_tree(layer / "tree", rootfs)
        _run(["umoci", "raw", "runtime-config", "--image", f"{work / 'oci'}:{TAG}", "--rootfs", str(rootfs),
              str(work / "bundle" / "config.json")])
        (work / "code" / "layer.tar.zst").unlink()  # its copy is the layout's blob
        for name in ("debian", "packages"):
            shutil.copy(CACHE / f"{name}-{debian_key() if name == 'debian' else packages_key()}" / "packages.txt",
                        work / f"{name}-packages.txt")
        (work / "done").write_text("")
        shutil.rmtree(image.root, ignore_errors=True)
        work.rename(image.root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    prune(keep={image.root.name, *(layer.name for layer in layers[:2]), "wheels"})
    what = " + ".join(made) + " + code layer" if made else "code layer on the cached debian and packages layers"
    log(f"[image] torchfleet-trainer:{TAG}: {what} -> {image.root} "
        f"({time.monotonic() - started:.0f} s, {size_mib(image.rootfs):.0f} MiB unpacked, "
        f"{sum(layer['size'] for layer in image.layers()) / 2**20:.0f} MiB of layers)")
    return image


def prune(keep: set[str], idle_s: float = 1800) -> None:
    """Remove the cache's other folders untouched for IDLE_S (superseded images and layers, a killed
    build's tmp-*): files hard-linked from the venv cost nothing, layers and blobs do. Not younger
    ones: another build or test session of this machine may be using them."""
    for entry in CACHE.iterdir():
        if entry.name not in keep and entry.is_dir() and time.time() - entry.stat().st_mtime > idle_s:
            shutil.rmtree(entry, ignore_errors=True)


def archive(image: Image, out) -> None:
    """The image layout as one tar (an OCI image archive: oci-layout, index.json, blobs/), the
    file `ctr -n k8s.io images import` reads; OUT a path or a binary stream."""
    argv = ["tar", "--create", "--sort=name", "--numeric-owner", "--owner=0", "--group=0", "--mode=a+r",
            "-C", str(image.layout), "-f", "-", "oci-layout", "index.json", "blobs"]
    with (open(out, "wb") if isinstance(out, (str, Path)) else _unclosed(out)) as sink:
        proc = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise ImageError(f"{shlex.join(argv)}: {proc.stderr.decode()[-2000:]}")


class _unclosed:
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        self.stream.flush()


def size_mib(path: Path) -> float:
    return int(_run(["du", "-sb", str(path)]).stdout.split()[0]) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--archive", metavar="FILE", help="also write the OCI image archive to FILE (- : stdout)")
    args = parser.parse_args()
    log = print if args.archive != "-" else (lambda line: print(line, file=sys.stderr))
    try:
        image = build(log=log)
        if args.archive:
            archive(image, sys.stdout.buffer if args.archive == "-" else args.archive)
    except ImageError as err:
        print(f"[image] {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
