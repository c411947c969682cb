"""The sharded checkpoint format: every rank writes part of the bytes (torch.distributed.checkpoint).

For a state too big for one writer (issue 11): model and optimizer go through
``torch.distributed.checkpoint`` (DCP), whose default save planner deduplicates tensors that every
data-parallel rank holds and spreads them over the ranks, so N ranks each write about 1/N of the
bytes. The small rest (every rank's RNG state, sampler, scheduler, step) is ``extra.pt``, written
by rank 0. The commit protocol is the store's, unchanged::

    rank 0 creates .tmp-g<gen>-s<step>-<hex>/ and broadcasts its name
    every rank writes its __<rank>_0.distcp (rank 0 also .metadata and extra.pt), fsynced
    all ranks gather every file's size and sha256 on rank 0 (the barrier)
    rank 0 writes meta.json listing every file, checks the fence, renames: the commit

Integrity: each file's sha256 and size are computed from the bytes as DCP writes them (its
storage writer's streams are wrapped), never by reading them back, and listed in ``meta.json`` like
``state.pt``'s, so the store verifies a sharded checkpoint as it does any other (once, on rank 0,
at a resume: a missing, truncated or altered shard is skipped like a corrupt ``state.pt``). Every
rank then loads it without verifying again, at any world size: DCP reads each tensor from
whichever rank's file holds it.

Collectives run on a process group of their own (gloo, made once by every rank): the write runs in
a background thread while the training thread all-reduces on the default group, and two threads
must never interleave collectives on one group. DCP's object collectives need numpy.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import itertools
import pathlib
import pickle
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import filesystem as _dcp_filesystem
from torch.distributed.checkpoint import metadata as _dcp_metadata
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystem
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta, TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.store.checkpoint_write import CheckpointWriteError, FileDigest, write_file

if TYPE_CHECKING:  # annotations only: checkpoint.py imports this module to read a sharded checkpoint
    from elastic_trainer.store.checkpoint import Checkpoint, CheckpointStore

# What a DCP .metadata may refer to beside torch's dtypes and the classes of DCP's metadata module
# (found by recording find_class on a save of a model with AdamW, torch 2.13)
_ALLOWED_GLOBALS = {
    ("torch", "Size"): torch.Size,
    ("torch.serialization", "_get_layout"): torch.serialization._get_layout,  # a layout by name, as weights_only
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): _dcp_filesystem._StorageInfo,
    ("pathlib", "PosixPath"): pathlib.PosixPath,  # the checkpoint id DCP records
    ("collections", "OrderedDict"): collections.OrderedDict,
}
LAYOUT = "sharded"  # meta.json's "checkpoint_format" for this layout; state.pt's is "single"
EXTRA_FILE = "extra.pt"
DCP_METADATA = ".metadata"


def require_numpy() -> None:
    """DCP's object collectives (torch.distributed's *_object calls) convert through numpy."""
    if importlib.util.find_spec("numpy") is None:
        raise RuntimeError("--checkpoint-format=sharded needs numpy (torch.distributed.checkpoint's collectives "
                           "use it): install it, or use --checkpoint-format=single")


def tensors_of(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Model and optimizer state keyed by parameter name (DCP's form, the same at any world size)."""
    return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)}


# -- writing --------------------------------------------------------------------------------------
class _DigestingStream:
    """A file DCP writes through: every byte is hashed and counted on its way to the disk."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        view = memoryview(data)
        self._handle.write(view)
        self._digest.update(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self._handle.tell()

    def fileno(self) -> int:
        return self._handle.fileno()

    def flush(self) -> None:
        self._handle.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self._handle.close()

    def digest(self) -> FileDigest:
        return FileDigest(self.size, self._digest.hexdigest())


class _DigestingFileSystem(FileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.digests: dict[str, FileDigest] = {}

    @contextmanager
    def create_stream(self, path, mode: str):
        if "w" not in mode:
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        path = Path(path)
        with path.open(mode) as handle:
            stream = _DigestingStream(handle)
            yield stream
        # DCP writes its metadata as ".metadata.tmp" and renames it: record the final name
        name = path.name[: -len(".tmp")] if path.name == DCP_METADATA + ".tmp" else path.name
        self.digests[name] = stream.digest()


def _writer(path: Path) -> tuple[dcp.FileSystemWriter, dict[str, FileDigest]]:
    # per_thread_copy_ahead=0: the staged tensors are already on the CPU, and DCP's copy-ahead
    # loader would otherwise synchronize the training thread's CUDA stream from the writer thread
    writer = dcp.FileSystemWriter(path, single_file_per_rank=True, sync_files=True, thread_count=1,
                                  per_thread_copy_ahead=0)
    if not isinstance(getattr(writer, "fs", None), FileSystem):
        raise RuntimeError("this torch's FileSystemWriter has no `fs` to hash its files through")
    fs = _DigestingFileSystem()
    writer.fs = fs
    return writer, fs.digests


def _unwrap(exc: CheckpointException, rank: int) -> Exception:
    """DCP's CheckpointException (a BaseException) as the error of the rank that failed first."""
    failures = exc.failures
    failed_rank = rank if rank in failures else min(failures, default=rank)
    cause = failures[failed_rank][0] if failures else exc
    if isinstance(cause, OSError):
        return OSError(cause.errno, f"rank {failed_rank}: {cause.strerror or cause}")
    return RuntimeError(f"rank {failed_rank}: {cause!r}")


def save(
    store: CheckpointStore, tensors: dict, extra: dict, *, step: int, generation: int, group: dist.ProcessGroup,
    info: dict | None = None, before_commit: Callable[[Path], None] | None = None,
) -> Checkpoint | None:
    """Every rank of ``group`` calls this with its (staged, CPU) ``tensors``; rank 0 commits.

    Returns the committed checkpoint on rank 0, None elsewhere. Every collective is reached by
    every rank whatever fails, so a failure never leaves a peer waiting: a write error on any rank
    raises on every rank; rank 0 removes the temporary directory and raises what the store's
    ``save`` would (StaleGenerationError when fenced, CheckpointWriteError when the store failed).
    """
    rank = dist.get_rank(group)
    tmp, error = None, None
    if rank == 0:
        try:
            tmp = store.temporary(generation, step)
        except Exception as exc:
            error = exc
    box = [str(tmp) if tmp is not None else None]
    dist.broadcast_object_list(box, src=0, group=group)
    if box[0] is None:
        raise error if error is not None else CheckpointWriteError(
            f"rank 0 could not create the temporary directory of step {step}")
    tmp = Path(box[0])

    files: dict[str, FileDigest] = {}
    try:
        writer, digests = _writer(tmp)
        try:
            dcp.save(tensors, storage_writer=writer, process_group=group)
        except CheckpointException as exc:
            raise _unwrap(exc, rank) from None
        files.update(digests)
        if rank == 0:
            files[EXTRA_FILE] = write_file(tmp / EXTRA_FILE, lambda handle: torch.save(extra, handle))
    except Exception as exc:
        error = exc
    gathered: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, (files, repr(error) if error else None), group=group)
    failed = next((f"rank {r}: {why}" for r, (_, why) in enumerate(gathered) if why), None)
    if rank != 0:
        if isinstance(error, OSError):  # the store failed here: what rank 0 reports as CheckpointWriteError
            raise CheckpointWriteError(f"writing this rank's part of {tmp.name} failed: {error}") from error
        if error is not None:
            raise error
        return None
    if failed is not None:  # removes tmp and raises, as the store's own save would
        store._guarded(tmp, generation, _raise(error or CheckpointWriteError(f"a peer's write failed ({failed})")))
    for part, _ in gathered:
        files.update(part)
    return store.commit(tmp, step=step, generation=generation, files=files,
                        info={**(info or {}), "checkpoint_format": LAYOUT}, before_commit=before_commit)


def _raise(error: BaseException) -> Callable[[], None]:
    def action() -> None:
        raise error

    return action


# -- reading --------------------------------------------------------------------------------------
class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's ``.metadata`` and nothing else: only the classes such a file holds may be built.

    DCP reads it with a plain ``pickle.load`` (torch 2.13, torch/distributed/checkpoint/filesystem.py,
    ``FileSystemReader.read_metadata``), so whoever could write the shared store could run code in
    every worker that resumed (issue 23): its sha256 in meta.json guards against damage, not against
    a writer who rewrites both. The allowed globals are those a DCP save of model and optimizer
    writes (the Python docs' "Restricting Globals": https://docs.python.org/3/library/pickle.html).
    """

    def find_class(self, module: str, name: str):
        if module == _dcp_metadata.__name__ and isinstance(getattr(_dcp_metadata, name, None), type):
            return getattr(_dcp_metadata, name)
        if (module, name) in _ALLOWED_GLOBALS:
            return _ALLOWED_GLOBALS[module, name]
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"{DCP_METADATA} refers to {module}.{name}, which no checkpoint metadata holds")


class _MetadataReader(dcp.FileSystemReader):
    """DCP's file system reader, its ``.metadata`` unpickled through ``_MetadataUnpickler``."""

    def read_metadata(self, *args, **kwargs) -> Metadata:
        # the body of torch 2.13's FileSystemReader.read_metadata, with the unpickler swapped
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as stream:
            metadata = _MetadataUnpickler(stream).load()
        if not isinstance(metadata, Metadata):
            raise pickle.UnpicklingError(f"{DCP_METADATA} holds a {type(metadata).__name__}, not DCP's Metadata")
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def is_sharded(meta: dict) -> bool:
    return meta.get("checkpoint_format") == LAYOUT


def read(checkpoint: Checkpoint) -> dict:
    """The whole state of a sharded checkpoint, on the CPU, shaped like ``state.pt``'s.

    Model and optimizer come from the DCP files, keyed by parameter name (restore the optimizer
    with ``restore_optimizer``); everything else from ``extra.pt``. No verification here: rank 0
    verified the checkpoint once (``CheckpointStore.verify``). No collective either: each rank
    reads on its own, so any world size reads any checkpoint. The tensors to read into are
    made from DCP's own metadata (shape, dtype and place in the tree of every entry), so reading
    needs no model: the store can check and fall back past a checkpoint before anything is built.
    """
    name = checkpoint.path.name
    try:
        metadata = _MetadataReader(checkpoint.path).read_metadata()
        state: dict = {}
        for key, item in metadata.state_dict_metadata.items():
            value = torch.empty(item.size, dtype=item.properties.dtype) if isinstance(item, TensorStorageMetadata) \
                else None  # a pickled value: DCP puts it in place
            _set_element(state, (metadata.planner_data or {}).get(key, (key,)), value)
        with warnings.catch_warnings():  # no_dist is deliberate: DCP warns about it at every load
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, storage_reader=_MetadataReader(checkpoint.path), no_dist=True)
        # weights_only: a checkpoint on a shared store is data, never code to run
        extra = torch.load(checkpoint.path / EXTRA_FILE, map_location="cpu", weights_only=True)
    except (Exception, CheckpointException) as exc:
        raise CorruptCheckpointError(f"{name}: reading the sharded checkpoint failed ({exc})") from exc
    if not isinstance(extra, dict):
        raise CorruptCheckpointError(f"{name}: {EXTRA_FILE} holds a {type(extra).__name__}, not a dict")
    return {**extra, **state}


def restore_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load an optimizer state keyed by parameter name (what ``read`` returns) into ``optimizer``."""
    set_optimizer_state_dict(model, optimizer, state)


def _set_element(root: dict, path: tuple, value: object) -> None:
    """Put ``value`` at ``path`` (dict keys and list indexes) in a nested state, creating the way there."""
    node: dict | list = root
    for key, next_key in itertools.pairwise(path):
        empty: dict | list = [] if isinstance(next_key, int) else {}
        if isinstance(node, list):
            node.extend([None] * (key + 1 - len(node)))
            if node[key] is None:
                node[key] = empty
            node = node[key]
        else:
            node = node.setdefault(key, empty)
    if isinstance(node, list):
        node.extend([None] * (path[-1] + 1 - len(node)))
    node[path[-1]] = value
