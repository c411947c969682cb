"""The task of an example script, loaded for a bench's bare training loop (bench/gpu.py, bench/goodput_overhead.py)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def load_task(spec: dict) -> tuple[Any, Any, Any]:
    """(task, config, device) of ``spec["script"]`` with ``spec["args"]`` for ``spec["steps"]`` steps; no store."""
    import torch

    load = importlib.util.spec_from_file_location("bench_task", spec["script"])
    module = importlib.util.module_from_spec(load)
    sys.modules["bench_task"] = module
    load.loader.exec_module(module)
    task, cfg = module.task_and_config([*spec["args"], "--checkpoint-dir=/nonexistent",
                                        f"--total-steps={spec['steps']}"])
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    return task, cfg, device
