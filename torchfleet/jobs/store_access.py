"""Reading a job's folder through store_script.py, wherever it runs, and unpacking what it sends.

A ``Runner`` runs ``store_script.py COMMAND JOB_DIR ...`` and hands back its stdout as chunks of bytes:
``local_runner`` as a child process on this machine (a local run's folder, or the store mounted here),
``pod_runner`` in the cluster's reader pod (reader_pod.py). Everything after that is one code path:
the JSON a listing prints, and the tar stream a download unpacks as hostile input (untar.py: regular
files and folders under the name asked for, written by the CLI itself, never through a link, bounded),
into a temporary folder beside the destination that is renamed into place only once the whole stream
was accepted, with a progress line on stderr.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torchfleet.jobs import store_script, terminal_text, untar
from torchfleet.jobs.errors import ClusterError, UsageError

SCRIPT = Path(store_script.__file__).read_bytes()
# The script goes in on stdin, not in the command line: an exec's command is sent in the request's URL,
# and 9 KB of source there risks a proxy's or load balancer's URL limit. Exactly N bytes are read, so the
# stream need not be closed (only the v5 exec protocol can close stdin).
BOOT = "import sys; n = int(sys.argv.pop(1)); exec(compile(sys.stdin.buffer.read(n), 'store_script.py', 'exec'))"


def command(python: str, argv: list[str]) -> list[str]:
    # -I: isolated, so neither a usercustomize.py in a writable HOME nor PYTHON* variables run before the
    # script (https://docs.python.org/3/using/cmdline.html#cmdoption-I); -B: no .pyc (-I ignores the variable)
    return [python, "-I", "-B", "-c", BOOT, str(len(SCRIPT)), *argv]
# store_script.main's exit codes
NOT_FOUND, REFUSED = 3, 4
Runner = Callable[[list[str], list[bytes]], Iterator[bytes]]  # (argv, stderr sink) -> stdout chunks


def local_runner(argv: list[str], stderr: list[bytes]) -> Iterator[bytes]:
    """store_script.py in a child Python on this machine; returns its exit code as StopIteration.value."""
    with tempfile.TemporaryFile() as errors, subprocess.Popen(
        command(sys.executable, argv), stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.PIPE,
    ) as proc:
        try:
            proc.stdin.write(SCRIPT)
            proc.stdin.close()
            while chunk := proc.stdout.read1(store_script.CHUNK):
                yield chunk
        finally:
            if proc.poll() is None:  # the reader stopped early (an error, Ctrl-C)
                proc.kill()
            code = proc.wait()
            errors.seek(0)
            stderr.append(errors.read())
    return code


def pod_runner(jobs, pod: str) -> Runner:
    from torchfleet.jobs.reader_pod import PYTHON, exec_chunks

    return lambda argv, stderr: exec_chunks(jobs, pod, command(PYTHON[0], argv), stderr, stdin=SCRIPT)


def _drain(chunks: Iterator[bytes], sink: Callable[[bytes], None]) -> int | None:
    while True:
        try:
            sink(next(chunks))
        except StopIteration as stop:
            return stop.value


# What the reader says names the store's files, which a job names: an escape sequence in a name must not
# reach the user's terminal (terminal_text.py).
printable = terminal_text.printable


def _failed(what: str, code: int | None, stderr: list[bytes], path: str) -> Exception:
    text = b"".join(stderr).decode(errors="replace").strip()
    try:
        message = printable(str(json.loads(text.splitlines()[-1])["error"]))
    except (ValueError, KeyError, IndexError, TypeError):
        message = printable(text[-500:]) or "no message"
    if code == NOT_FOUND:
        return UsageError(f"{path}: not in the job's folder ({message})")
    if code == REFUSED:
        return UsageError(f"{path}: {message}")
    return ClusterError(f"{what} failed (exit {code}): {message}")


def run_json(runner: Runner, argv: list[str], path: str) -> dict[str, Any]:
    out, stderr = bytearray(), []
    code = _drain(runner(argv, stderr), out.extend)
    if code != 0:
        raise _failed(f"reading {path}", code, stderr, path)
    return json.loads(out)


def list_checkpoints(runner: Runner, job_dir: str, verify: bool) -> dict[str, Any]:
    return run_json(runner, ["list", job_dir, *(["--verify"] if verify else [])], f"{job_dir}/checkpoints")


class Progress:
    """``  37%  1.2 GiB of 3.3 GiB  84 MiB/s`` on stderr, redrawn at most 5 times a second on a terminal;
    elsewhere (CI logs, a pipe) one line at the end."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.started = self.drawn = time.monotonic()
        self.tty = self.stream.isatty()

    def add(self, count: int) -> None:
        self.done += count
        if self.tty and time.monotonic() - self.drawn >= 0.2:
            self.drawn = time.monotonic()
            self.stream.write("\r" + self.line())
            self.stream.flush()

    def line(self) -> str:
        # the tar stream carries headers too: the payload is what is shown, capped at the total
        done = min(self.done, self.total)
        percent = 100 * done // self.total if self.total else 100
        rate = done / max(time.monotonic() - self.started, 1e-6)
        return f"{percent:4d}%  {human_bytes(done)} of {human_bytes(self.total)}  {human_bytes(rate)}/s  "

    def finish(self) -> None:
        self.done = max(self.done, self.total)
        self.stream.write(("\r" if self.tty else "") + self.line() + "\n")
        self.stream.flush()


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"  # unreachable: the loop returns at TiB


class _ChunkStream(io.RawIOBase):
    """The runner's chunks as a readable stream for tarfile, counting bytes; ``code`` once it ended."""

    def __init__(self, chunks: Iterator[bytes], progress: Progress) -> None:
        self.chunks, self.progress, self.pending, self.code, self.ended = chunks, progress, b"", None, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending and not self.ended:
            try:
                self.pending = next(self.chunks)
            except StopIteration as stop:
                self.code, self.ended = stop.value, True
        count = min(len(buffer), len(self.pending))
        buffer[:count], self.pending = self.pending[:count], self.pending[count:]
        self.progress.add(count)
        return count

    def finish(self) -> int | None:
        """Read to the end (tar's trailing padding) and return the script's exit code."""
        while self.readinto(bytearray(store_script.CHUNK)):
            pass
        return self.code


def destination(local: Path, name: str) -> Path:
    """Where ``name`` lands: inside LOCAL when it is a folder (as cp and scp do), else LOCAL itself."""
    local = local.expanduser()
    target = local / name if local.is_dir() else local
    if os.path.lexists(target):
        raise UsageError(f"LOCAL: {target} exists; remove it or give another path (cp never overwrites)")
    parent = target.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"LOCAL: the folder {parent} does not exist; create it first or give another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"LOCAL: cannot write in {parent} (permission denied); give a folder you can write to")
    return target


def download(runner: Runner, job_dir: str, path: str, local: Path, progress_stream=None,
             limits: untar.Limits | None = None) -> tuple[Path, dict]:
    """PATH of the job's folder to LOCAL; (where it landed, its size as store_script reported it).

    The stream is hostile input (untar.py): a refused member ends the download, naming the member and why,
    and the staging folder is removed, so LOCAL never holds part of it."""
    size = run_json(runner, ["size", job_dir, path], path or ".")
    name = Path(path).name or Path(job_dir).name
    target = destination(local, name)
    parent = target.absolute().parent
    reported = size.get("bytes") if isinstance(size, dict) else None
    if not isinstance(reported, int) or isinstance(reported, bool) or reported < 0:
        raise ClusterError(f"the size of {path or '.'} came back as {reported!r}, not a number of bytes")
    free = shutil.disk_usage(parent).free
    if reported > free:
        raise UsageError(f"LOCAL: {path or '.'} is {human_bytes(reported)} and {parent} has {human_bytes(free)} "
                         "free; free some space or give a path on another disk")
    limits = limits or untar.Limits.for_download(reported, free)
    progress = Progress(reported, progress_stream)
    stderr: list[bytes] = []
    stream = _ChunkStream(runner(["tar", job_dir, path or "."], stderr), progress)
    bounded = untar.Bounded(stream, store_script.CHUNK)
    staging = Path(tempfile.mkdtemp(prefix=".torchfleet-cp-", dir=parent))
    try:
        try:
            with tarfile.open(fileobj=io.BufferedReader(bounded, store_script.CHUNK), mode="r|") as tar:
                untar.unpack(tar, bounded, str(staging), name, limits)
        except untar.Refused as refused:
            at = f" at {refused.member!r}" if refused.member is not None else ""
            raise ClusterError(f"the download of {path or '.'} was refused{at}: {refused.why}; only regular files "
                               f"and folders under {name} are accepted, and nothing was written ({target} was "
                               "not created, the partial download removed)") from None
        except tarfile.TarError as error:
            code = stream.finish()
            raise (_failed("the download", code, stderr, path) if code else
                   ClusterError(f"the download of {path or '.'} broke off ({error})")) from None
        code = stream.finish()
        if code != 0:
            raise _failed("the download", code, stderr, path)
        if not os.path.lexists(staging / name):
            raise ClusterError(f"the download of {path or '.'} sent nothing named {name}")
        os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        stream.chunks.close()
    progress.finish()
    skipped = b"".join(stderr).decode(errors="replace").strip()
    if skipped:
        print(printable(skipped), file=sys.stderr)
    return target, size
