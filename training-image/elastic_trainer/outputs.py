"""What a job leaves besides its checkpoints: the final model, evaluation results and custom scalars.

The final model goes to ``<output dir>/model/`` (``--output-dir``, default ``$TORCHFLEET_OUTPUT_DIR``,
which the torchfleet CLI sets on every pod), written by rank 0 after the last step, in a format that
loads without Torchfleet, with torch alone:

    model.pt     torch.save of the model's plain state_dict: parameter and buffer names -> CPU tensors,
                 nothing else pickled, so ``torch.load(path, weights_only=True)`` reads it
    model.json   the card: format, step, world size, the tensors' names, shapes and dtypes, parameter
                 count, model.pt's size and sha256, torch's version, when it was written

Both appear at once: they are written in a temporary folder that is renamed to ``model`` (a
re-export of the same run replaces the folder the same way). safetensors would be the other plain
format, but it is no dependency of the image (training-image/requirements.txt); a state_dict of
tensors read with ``weights_only=True`` runs no code from the file.

A task may also define, both optional (training-image/README.md, "Outputs"):

- ``evaluate(model, device, step) -> {tag: number}``: run on every rank (so it may shard its data and
  all-reduce) with the model in eval mode and no gradients, every ``--eval-every`` steps and after the
  last; rank 0 writes the numbers to TensorBoard (a tag without a ``/`` goes under ``eval/``) and emits
  an ``eval`` progress event;
- ``scalars(model, optimizer, step) -> {tag: number}``: custom training scalars, asked on rank 0 at
  each progress step and written beside ``train/loss``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from elastic_trainer.events import Scalars, emit, log

MODEL_DIR, MODEL_FILE, CARD_FILE = "model", "model.pt", "model.json"
FORMAT = "torchfleet-model/1"  # the card's format: a plain state_dict in model.pt, described by model.json


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def exported_step(output_dir: Path) -> int | None:
    """The step of the model already exported there, if any (a restart after the export skips it)."""
    try:
        return json.loads((output_dir / MODEL_DIR / CARD_FILE).read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        return None


def export_final_model(model: nn.Module, output_dir: Path, step: int, world_size: int) -> Path:
    """Write ``output_dir/model/{model.pt, model.json}`` (see the module docstring); returns the folder."""
    output_dir.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in model.state_dict().items()}
    staging = Path(tempfile.mkdtemp(prefix=".model-", dir=output_dir))
    try:
        weights = staging / MODEL_FILE
        torch.save(state, weights)
        card = {
            "format": FORMAT,
            "file": MODEL_FILE,
            "bytes": weights.stat().st_size,
            "sha256": _sha256(weights),
            "step": step,
            "world_size": world_size,
            "parameters": sum(p.numel() for p in model.parameters()),
            "tensors": {name: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                        for name, t in state.items()},
            "torch": torch.__version__,
            "created": time.time(),
            "load": "model.load_state_dict(torch.load('model.pt', weights_only=True))",
        }
        (staging / CARD_FILE).write_text(json.dumps(card, indent=1))
        for path in (weights, staging / CARD_FILE):
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
        # mkdtemp makes it 0700: the store's group (the training uid's, mode 2775) must read it
        os.chmod(staging, 0o2775)  # noqa: S103
        final = output_dir / MODEL_DIR
        old = None
        if final.exists():  # a directory cannot be renamed over a non-empty one: move it aside first
            old = Path(tempfile.mkdtemp(prefix=".model-old-", dir=output_dir))
            os.replace(final, old / MODEL_DIR)
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def finish(model: nn.Module, output_dir: Path | None, step: int, world_size: int) -> None:
    """Rank 0, after the last step: export the final model unless this step's is there already.

    A failure is logged and emitted, never raised: the final checkpoint holds the same weights.
    """
    if output_dir is None or exported_step(output_dir) == step:
        return
    try:
        final = export_final_model(model, output_dir, step, world_size)
    except Exception as exc:  # a full or read-only store: the checkpoint has the model anyway
        log.error("exporting the final model to %s failed: %s: %s", output_dir, type(exc).__name__, exc)
        emit("model_failed", dir=str(output_dir), error=f"{type(exc).__name__}: {exc}"[:300])
        return
    log.info("final model of step %d in %s", step, final)
    emit("model", step=step, dir=str(final))


def _numbers(found: object, what: str) -> dict[str, float]:
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise TypeError(f"{what} must return a mapping of tag -> number, got {type(found).__name__}")
    out = {}
    for tag, value in found.items():
        number = float(value.item() if isinstance(value, torch.Tensor) else value)
        if math.isfinite(number):
            out[str(tag)] = number
    return out


def evaluate(task: object, model: nn.Module, device: torch.device, step: int, scalars: Scalars, rank: int) -> None:
    """Every rank runs the task's ``evaluate``; rank 0 records what it returned."""
    hook = getattr(task, "evaluate", None)
    if hook is None:
        return
    model.eval()
    try:
        with torch.no_grad():
            results = _numbers(hook(model, device, step), "evaluate")
    finally:
        model.train()
    if rank != 0:
        return
    for tag, value in results.items():
        scalars.add(tag if "/" in tag else f"eval/{tag}", value, step)
    emit("eval", step=step, values={k: round(v, 6) for k, v in results.items()})


def custom_scalars(task: object, model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                   scalars: Scalars) -> None:
    """Rank 0, at a progress step: the task's own scalars."""
    hook = getattr(task, "scalars", None)
    if hook is not None:
        for tag, value in _numbers(hook(model, optimizer, step), "scalars").items():
            scalars.add(tag, value, step)
