"""The training image's CPU variant, built without a registry (issue 31, first slice).

    python -m tests.containers.image        # build or find it; one timed line

training-image/Dockerfile starts FROM a CUDA base that only a registry serves. This builds the
same image on a Debian root file system made here instead: mmdebstrap (Debian's packages) with
python3.11, then the Dockerfile's own instructions read from the file, not restated: its ENV,
the groupadd/useradd commands of its RUN, its WORKDIR, its COPYs (examples/, root-owned; the
elastic_trainer package's sources it stages in /tmp/ and pip-installs into site-packages), its USER,
ENTRYPOINT and CMD, so the two cannot drift apart silently
(tests/containers/test_image_config.py compares them with the built image's config). The Python
packages are the Dockerfile's requirements.txt plus the torch and numpy pyproject's `train` extra
pins, installed from wheels pip fetched (PyPI) and kept in a wheelhouse.

The result is a real OCI image (umoci: three layers, Debian / packages / code, and an image config
with Entrypoint, User, Env, WorkingDir) and its runtime bundle (`umoci unpack`: the rootfs and a
config.json whose process is the image's entrypoint as its user), which tests/containers runs
with runc. Everything lives outside the clone, under ~/.cache/torchfleet/image/<hash of the
inputs> (TORCHFLEET_IMAGE_CACHE moves it), so a second run only checks a stamp.

Pins: Debian `bookworm` (12) from deb.debian.org, the mirror this machine's apt uses; its Release
date and every installed package's version are written next to the image (debian.txt), and
TORCHFLEET_DEBIAN_MIRROR=http://snapshot.debian.org/archive/debian/<YYYYMMDDTHHMMSSZ>/ pins a
snapshot where that host is reachable. The Debian Python is 3.11.2 (the Dockerfile's base has
its own 3.11); the image's `python` is python-is-python3.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = REPO / "training-image"
DOCKERFILE = IMAGE_DIR / "Dockerfile"
REQUIREMENTS = IMAGE_DIR / "requirements.txt"
PYPROJECT = REPO / "pyproject.toml"
CACHE = Path(os.environ.get("TORCHFLEET_IMAGE_CACHE", Path.home() / ".cache" / "torchfleet" / "image"))
WHEELS = CACHE / "wheels"
TAG = "cpu"

SUITE = "bookworm"
MIRROR = os.environ.get("TORCHFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# python-is-python3: the ENTRYPOINT runs `python`; passwd: the Dockerfile's groupadd/useradd.
DEBIAN_PACKAGES = ("python3.11", "python-is-python3", "passwd")
# Debian's python3.11 puts /usr/local/lib/python3.11/dist-packages on sys.path (pip's place there).
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"
# The packages of pyproject's `train` extra the Dockerfile's base already carries, at those pins.
TRAIN_PINS = ("torch", "numpy")
# What the image must hold to run: a test names what is missing rather than a cryptic runc error.
TOOLS = ("mmdebstrap", "umoci", "runc")


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


def base_key() -> str:
    """Debian + the packages: what the slow first two layers depend on."""
    return _digest([SUITE.encode(), MIRROR.encode(), " ".join(DEBIAN_PACKAGES).encode(),
                    REQUIREMENTS.read_bytes(), " ".join(train_pins()).encode(),
                    json.dumps(read_dockerfile().user_commands).encode()])


def image_key() -> str:
    """Everything the image is made of, this file included."""
    files = _code_files()
    return _digest([base_key().encode(), DOCKERFILE.read_bytes(), Path(__file__).read_bytes(),
                    *(str(p.relative_to(IMAGE_DIR)).encode() + b"\0" + p.read_bytes() for p in files)])


@dataclass(frozen=True)
class Image:
    root: Path  # ~/.cache/torchfleet/image/<key>

    @property
    def layout(self) -> Path:
        return self.root / "oci"

    @property
    def bundle(self) -> Path:
        """umoci unpack's output: rootfs/ and config.json."""
        return self.root / "bundle"

    @property
    def rootfs(self) -> Path:
        return self.bundle / "rootfs"

    def config(self) -> dict:
        """The image config's `config` (Entrypoint, User, Env, ...): index -> manifest -> config blob."""
        def blob(descriptor: dict) -> dict:
            algorithm, digest = descriptor["digest"].split(":")
            return json.loads((self.layout / "blobs" / algorithm / digest).read_text())

        index = json.loads((self.layout / "index.json").read_text())
        manifest = blob(next(m for m in index["manifests"]
                             if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == TAG))
        return blob(manifest["config"])["config"]

    def layers(self) -> list[dict]:
        index = json.loads((self.layout / "index.json").read_text())
        algorithm, digest = index["manifests"][0]["digest"].split(":")
        return json.loads((self.layout / "blobs" / algorithm / digest).read_text())["layers"]

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


def _wheels() -> list[str]:
    """pip wheel into the wheelhouse (a no-op once it holds them all); returns the requirements."""
    reqs = [*train_pins(), "-r", str(REQUIREMENTS)]
    WHEELS.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(WHEELS),
          "-f", str(WHEELS), *reqs])
    return reqs


def _site_packages(dest: Path, reqs: list[str]) -> None:
    _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
          "--only-binary=:all:", "--no-compile", "-f", str(WHEELS), "--target", str(dest / SITE_PACKAGES), *reqs])


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


def _layer(layout: Path, tree: Path, history: str) -> None:
    """One layer holding TREE's contents at / (umoci insert of a directory onto the root)."""
    _run(["umoci", "insert", "--image", f"{layout}:{TAG}", "--history.created_by", history, str(tree), "/"])


def _base(base: Path) -> None:
    """Layers 1 and 2 (Debian, the Python packages) as an OCI image and its unpacked root file
    system, shared by every image whose Debian and package inputs are the same: a code change
    adds only the third layer (gzip of the 4.7 GB package tree is most of a cold build)."""
    _debian_rootfs(base / "debian")
    reqs = _wheels()
    _site_packages(base / "packages", reqs)
    layout = base / "oci"
    _run(["umoci", "init", "--layout", str(layout)])
    _run(["umoci", "new", "--image", f"{layout}:{TAG}"])
    _layer(layout, base / "debian", f"mmdebstrap --variant=minbase {SUITE} {' '.join(DEBIAN_PACKAGES)}")
    _run(["umoci", "insert", "--image", f"{layout}:{TAG}", "--history.created_by",
          "pip install (wheelhouse) torch numpy -r requirements.txt",
          str(base / "packages" / SITE_PACKAGES), "/" + SITE_PACKAGES])
    _run(["umoci", "unpack", "--image", f"{layout}:{TAG}", str(base / "bundle")])


def _link_tree(source: Path, dest: Path) -> None:
    """A copy whose files are hard links (cp -al): the image's files are never written after the
    build (containers get the root read-only), so the images of two code versions share them."""
    _run(["cp", "-al", str(source), str(dest)])


def build(log=print) -> Image:
    """Build the image unless the cache holds it; print one timed line."""
    if missing := missing_tools():
        raise ImageError(f"{', '.join(missing)} not installed: apt-get install mmdebstrap umoci runc")
    if os.geteuid() != 0:
        raise ImageError("building the image needs root (mmdebstrap's chroot, root-owned files in the layers)")
    started = time.monotonic()
    key = image_key()
    image = Image(CACHE / key)
    if (image.root / "done").is_file():
        log(f"[image] torchfleet-trainer:{TAG}: cached {image.root} ({time.monotonic() - started:.1f} s)")
        return image
    work = CACHE / f"tmp-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        spec = read_dockerfile()
        base = CACHE / f"debian-{base_key()}"
        made = "code layer on the cached base"
        if not (base / "done").is_file():
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            _base(base)
            (base / "done").write_text("")
            made = f"mmdebstrap {SUITE} + pip + umoci"
        code = work / "code"
        code.mkdir()
        _code(code)
        # The base's layout: blobs linked (content-addressed, never rewritten), index copied (umoci
        # rewrites it for the new tag).
        layout = work / "oci"
        layout.mkdir()
        _link_tree(base / "oci" / "blobs", layout / "blobs")
        for name in ("index.json", "oci-layout"):
            shutil.copy(base / "oci" / name, layout / name)
        _layer(layout, code, "COPY " + " ".join(f"{s}/ {t}" for s, t in spec.copies))
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **spec.env}
        _run(["umoci", "config", "--image", f"{layout}:{TAG}", "--config.user", spec.user,
              "--config.workingdir", spec.workdir,
              *(f"--config.env={k}={v}" for k, v in env.items()),
              *(f"--config.entrypoint={a}" for a in spec.entrypoint), *(f"--config.cmd={a}" for a in spec.cmd),
              "--author=tests/containers/image.py"])
        _run(["umoci", "gc", "--layout", str(layout)])
        # The bundle: the base's unpacked root plus the code layer's files (the same tree that
        # went into the layer), and umoci's runtime config from this image's config.
        (work / "bundle").mkdir()
        _link_tree(base / "bundle" / "rootfs", work / "bundle" / "rootfs")
        _run(["cp", "-a", f"{code}/.", str(work / "bundle" / "rootfs")])
        _run(["umoci", "raw", "runtime-config", "--image", f"{layout}:{TAG}", "--rootfs",
              str(work / "bundle" / "rootfs"), str(work / "bundle" / "config.json")])
        shutil.rmtree(code)
        shutil.copy(base / "debian-packages.txt", work / "debian-packages.txt")
        (work / "inputs.json").write_text(json.dumps({
            "suite": SUITE, "mirror": MIRROR, "debian_packages": DEBIAN_PACKAGES,
            "python_packages": _run([sys.executable, "-m", "pip", "list", "--format=freeze", "--path",
                                     str(base / "packages" / SITE_PACKAGES)]).stdout.split(),
        }, indent=1))
        (work / "done").write_text("")
        shutil.rmtree(image.root, ignore_errors=True)
        work.rename(image.root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"[image] torchfleet-trainer:{TAG}: {made} -> {image.root} "
        f"({time.monotonic() - started:.0f} s, {size_mib(image.rootfs):.0f} MiB unpacked)")
    return image


def size_mib(path: Path) -> float:
    return int(_run(["du", "-sb", str(path)]).stdout.split()[0]) / 2**20


def main() -> int:
    try:
        build()
    except ImageError as err:
        print(f"[image] {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
