"""What `torchfleet checkpoints` and `torchfleet cp` run next to a job's folder: standard library only.

The same source runs in two places (results.py): on this machine against a local run's folder
(``--shared-dir``), and, unchanged, inside the read-only reader pod on a cluster, sent as
``python -c <this file> ...`` through the API server's exec (as `kubectl cp` runs tar there). So the
listing and the tar stream a test checks on a local folder are exactly what a cluster runs.

    list JOB_DIR [--verify]   the committed checkpoints as JSON on stdout
    size JOB_DIR PATH         {"bytes": N, "files": N, "kind": "file"|"dir"} of PATH in the job folder
    tar JOB_DIR PATH          PATH as an uncompressed tar stream on stdout (regular files and folders only)

Nothing here trusts the store: a name like a checkpoint whose meta.json is missing, unreadable or of the
wrong shape is listed as not verified with the reason, never an error that hides the others; links,
FIFOs and devices are neither followed nor sent. The checkpoint layout is the training image's
(training-image/elastic_trainer/store/checkpoint_write.py and fence.py): ``checkpoints/ckpt-g<gen>-s<step>/``
holding the files ``meta.json`` lists with their size and sha256.
"""

import hashlib
import json
import os
import re
import stat
import sys
import tarfile

COMMITTED = re.compile(r"^ckpt-g(\d+)-s(\d+)$")  # elastic_trainer.store.fence.COMMITTED_NAME
META_MAX_BYTES = 4 << 20  # elastic_trainer.store.checkpoint_meta.META_MAX_BYTES
CHUNK = 1 << 20


def _inside(root, rel):
    """``rel`` under ``root``, refused if it leaves it (.., an absolute path) or passes through a link."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise ValueError(f"{rel!r} is not a path inside the job's folder")
    path = root
    for part in parts:
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise ValueError(f"{rel!r} passes through a symbolic link ({part}); links are not followed")
    return path


def _sha256(path):
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _meta(directory):
    path = os.path.join(directory, "meta.json")
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("meta.json is not a regular file")
    if info.st_size > META_MAX_BYTES:
        raise ValueError(f"meta.json is larger than {META_MAX_BYTES} bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # swapped for a link or FIFO since: refused
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("meta.json is not a regular file")
        meta = json.loads(handle.read(META_MAX_BYTES + 1))
    if not isinstance(meta, dict):
        raise ValueError("meta.json is not an object")
    files = meta.get("files")
    if files is None and "sha256" in meta:  # the store's format 1: state.pt at the top level
        files = {"state.pt": {"size": meta.get("size"), "sha256": meta.get("sha256")}}
    if not isinstance(files, dict) or not files:
        raise ValueError("meta.json lists no files")
    for name, digest in files.items():
        if not isinstance(name, str) or "/" in name or name in ("", ".", "..", "meta.json"):
            raise ValueError(f"meta.json lists {name!r:.80}, not a file of the checkpoint")
        if not isinstance(digest, dict) or not isinstance(digest.get("size"), int) or not isinstance(
                digest.get("sha256"), str):
            raise ValueError(f"meta.json's entry for {name!r} has no size and sha256")
    return meta, info.st_mtime, files


def _check(directory, files, verify):
    """None if every listed file is there with its size (and, verifying, its sha256); else why not."""
    for name, digest in sorted(files.items()):
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
        except OSError as error:
            return f"{name}: {error.strerror}"
        if not stat.S_ISREG(info.st_mode):
            return f"{name} is not a regular file"
        if info.st_size != digest["size"]:
            return f"{name} has {info.st_size} bytes, meta.json says {digest['size']}"
        if verify and _sha256(path) != digest["sha256"]:
            return f"{name}: sha256 differs from meta.json's"
    return None


def list_checkpoints(job_dir, verify=False):
    """Every directory named like a committed checkpoint, newest first by (generation, step)."""
    folder = os.path.join(job_dir, "checkpoints")
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return {"dir": folder, "checkpoints": [], "missing": True}
    found = []
    for name in names:
        match = COMMITTED.match(name)
        if not match:
            continue
        path = os.path.join(folder, name)
        row = {"name": name, "generation": int(match.group(1)), "step": int(match.group(2)),
               "bytes": 0, "created": None, "verified": False, "checked": "sha256" if verify else "size"}
        if os.path.islink(path) or not os.path.isdir(path):
            found.append({**row, "problem": "not a directory (links are refused)"})
            continue
        try:
            row["bytes"] = sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(path)
                               if e.is_file(follow_symlinks=False))
            meta, mtime, files = _meta(path)
            created = meta.get("created")
            row["created"] = created if isinstance(created, int | float) else mtime
            for key in ("world_size", "reason", "checkpoint_format"):
                if isinstance(meta.get(key), str | int):
                    row[key] = meta[key]
            problem = _check(path, files, verify)
        except (OSError, ValueError) as error:
            problem = getattr(error, "strerror", None) or str(error)
        row["verified"] = problem is None
        if problem is not None:
            row["problem"] = problem[:300]
        found.append(row)
    found.sort(key=lambda r: (r["generation"], r["step"]), reverse=True)
    return {"dir": folder, "checkpoints": found, "missing": False}


def _walk(top):
    """Regular files and folders under ``top`` (itself included), without following links."""
    info = os.lstat(top)
    if stat.S_ISREG(info.st_mode):
        yield top, info
        return
    if not stat.S_ISDIR(info.st_mode):
        return
    yield top, info
    for dirpath, dirnames, filenames in os.walk(top):
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            try:
                entry = os.lstat(path)
            except FileNotFoundError:  # pruned meanwhile (a running job keeps the last K checkpoints)
                continue
            if stat.S_ISREG(entry.st_mode) or stat.S_ISDIR(entry.st_mode):
                yield path, entry
        dirnames.sort()


def size(job_dir, rel):
    top = _inside(job_dir, rel)
    info = os.lstat(top)  # FileNotFoundError: said by the caller
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise ValueError(f"{rel!r} is neither a file nor a folder")
    total = files = 0
    for _, entry in _walk(top):
        if stat.S_ISREG(entry.st_mode):
            total, files = total + entry.st_size, files + 1
    return {"bytes": total, "files": files, "kind": "file" if stat.S_ISREG(info.st_mode) else "dir"}


def write_tar(job_dir, rel, out):
    """PATH as a tar stream on ``out``, named by its last component; files that vanish are skipped."""
    top = _inside(job_dir, rel)
    arcroot = os.path.basename(top.rstrip("/")) or os.path.basename(job_dir.rstrip("/"))
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path, _ in _walk(top):
            name = os.path.join(arcroot, os.path.relpath(path, top)) if path != top else arcroot
            try:
                tar.add(path, arcname=os.path.normpath(name), recursive=False)
            except FileNotFoundError:
                print(f"skipped {name}: removed while sent", file=sys.stderr)


def main(argv):
    command, job_dir, rest = argv[0], argv[1], argv[2:]
    try:
        if command == "list":
            print(json.dumps(list_checkpoints(job_dir, verify="--verify" in rest)))
        elif command == "size":
            print(json.dumps(size(job_dir, rest[0])))
        elif command == "tar":
            write_tar(job_dir, rest[0], sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            raise ValueError(f"unknown command {command!r}")
    except FileNotFoundError as error:
        print(json.dumps({"error": f"not found: {error.filename}"}), file=sys.stderr)
        return 3
    except (OSError, ValueError) as error:
        print(json.dumps({"error": str(error)}), file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
