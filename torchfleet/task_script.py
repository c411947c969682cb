"""The training script's Task checked before anything starts (issue 32): `run --local`, `submit`, `sweep`.

The check itself is the training image's (elastic_trainer/task_check.py, which the launcher runs in
every pod too): it reads the script, never runs it, so it needs no torch. `run --local` also resolves
the script's imports, as its nodes run this Python; `submit --workdir` does not: the job's image, not
this laptop, has its packages. Without --workdir the script is in the image, and only the launcher sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torchfleet.jobs.errors import UsageError


def check(script: Path, *, resolve_imports: bool) -> None:
    """UsageError (exit 2) listing every problem of the script's Task, each as FILE:LINE."""
    from elastic_trainer.task_check import check_script, format_problems

    problems = check_script(script, resolve_imports=resolve_imports)
    if problems:
        raise UsageError(f"SCRIPT: {format_problems(problems)}")


def script_in(command: Sequence[str]) -> str | None:
    """The .py file a job's command runs (``python train.py ...``, ``train.py ...``), or None (``python -m``)."""
    words = list(command)
    if words and Path(words[0]).name.startswith("python") and not words[0].endswith(".py"):
        words = words[1:]
        while words and words[0].startswith("-") and words[0] not in ("-m", "-c"):
            words = words[1:]  # python's own flags: -u, -O
    return words[0] if words and words[0].endswith(".py") else None


# The training image's WORKDIR and the examples it copies there (training-image/Dockerfile)
IMAGE_EXAMPLES = "/workspace/examples/"


def local_copy(command: Sequence[str], workdir: Path | None) -> Path | None:
    """The job's script as a file here: one of --workdir, or an example of the training image (its
    /workspace/examples/, this checkout's training-image/examples/); None when only the image has it."""
    script = script_in(command)
    if script is None:
        return None
    if workdir is not None and not Path(script).is_absolute():
        path = workdir / script
        return path if path.is_file() else None
    if script.startswith(IMAGE_EXAMPLES):
        from torchfleet.local_nodes import IMAGE_DIR

        path = IMAGE_DIR / "examples" / script.removeprefix(IMAGE_EXAMPLES)
        return path if path.is_file() else None
    return None


def check_command(command: Sequence[str], workdir: Path | None) -> None:
    """A submit's script, when it is a file here (local_copy)."""
    path = local_copy(command, workdir)
    if path is not None:
        check(path, resolve_imports=False)
