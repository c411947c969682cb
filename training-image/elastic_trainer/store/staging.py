"""A reusable host-memory snapshot of a training state: what a checkpoint blocks training for.

An asynchronous checkpoint may only write in the background what the next optimizer step cannot
change, so the state is first copied into host memory; this copy is the only part of a checkpoint
that blocks training (issue 11). Measured on one H100 with a 4.4 GB state (issue 11):
copying into pinned host buffers allocated once and reused takes 0.08 s, into fresh pageable
memory 3.1 s (page faults), into reused pageable memory 0.36 s. So the buffers are allocated at
the first snapshot and reused by every later one while the state's layout (every tensor's place
in the tree, shape and dtype) stays the same; on CPU the copy is still needed, because the next
optimizer step mutates the very tensors a background writer would be reading.

Memory: one anonymous ``mmap`` arena holds every tensor, each tensor a ``torch.frombuffer`` view
of its own slice. The arena is page-aligned and pinned with one ``cudaHostRegister`` when CUDA is
available (torch's caching host allocator, behind ``pin_memory=True``, rounds every block up to a
power of two). Each tensor still has its own storage of exactly its size, so ``torch.save`` and
torch.distributed.checkpoint write one record per tensor, never the whole arena.
"""

from __future__ import annotations

import copy
import math
import mmap
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass

import torch

from elastic_trainer.events import log

_ALIGN = 64  # bytes: every dtype's alignment, and a cache line


@dataclass(frozen=True)
class _Slot:
    shape: tuple[int, ...]
    dtype: torch.dtype
    nbytes: int
    offset: int


class HostSnapshot:
    """Copies a nested state (dicts, lists, tuples, tensors, plain values) into reused host memory.

    ``take(state)`` returns a copy of ``state`` whose tensors live in this snapshot's buffers: it is
    valid until the next ``take``, so a caller writing it in the background must finish that write
    before taking the next snapshot (the async writer allows one write in flight).

    Tensors of at least ``reuse_from_bytes`` live in the arena, which is reallocated only when their
    layout (order, shapes, dtypes) changes; smaller ones (RNG states, step counters: bytes, whose
    number may vary with the world size) are copied into fresh memory each time, which costs
    nothing and keeps the arena's layout stable. ``plan`` and ``allocate`` let a caller make the
    arena before the first checkpoint, off the training thread: pinning a few GB takes a while.
    """

    def __init__(self, pin: bool = False, reuse_from_bytes: int = 64 * 1024) -> None:
        self.pin = pin
        self.reuse_from_bytes = reuse_from_bytes
        self.allocations = 0  # arenas allocated so far: 1 while the layout never changes
        self.pinned = False  # whether the current arena is page-locked
        self._layout: tuple[tuple[tuple[int, ...], torch.dtype], ...] | None = None
        self._buffers: list[torch.Tensor] = []
        self._arena: mmap.mmap | None = None
        self._arena_ptr = 0
        self._stream = None  # the side stream of take(beside=...), made at its first use
        self._copied = None  # the event a reader waits for (ready)
        self._guard = None  # (training stream, event) the next optimizer step waits for (before_update)

    @property
    def nbytes(self) -> int:
        return len(self._arena) if self._arena is not None else 0

    # -- the copy ------------------------------------------------------------------------------
    def plan(self, state: object) -> tuple:
        """The arena layout ``state`` needs (shapes and dtypes only: cheap, and safe to hand to a thread)."""
        return tuple((tuple(t.shape), t.dtype) for t in self._unique(state)[0] if self._reused(t))

    def take(self, state: object, *, beside: Collection[int] = ()) -> object:
        """A copy of ``state`` in host memory; on return training may go on.

        ``beside``: the storages (``untyped_storage().data_ptr()``) of CUDA tensors that only the
        optimizer step changes, i.e. parameters and optimizer state. Their copies into the pinned
        arena run on a stream of their own while the next forward and backward run; the training
        thread must call ``before_update()`` before the next optimizer step (the training stream
        then waits for the copies, on the GPU, not the host), and a reader must call ``ready()``
        before reading the snapshot. Anything else (buffers such as batch-norm statistics, which
        a forward pass changes) is copied before ``take`` returns. Why: on one H100 the copy of a
        4.4 GB state into pinned memory took 0.08 s, more than 2% of 50 steps of 0.072 s (issue 11's
        target at the default cadence), so it must overlap with compute rather than stop it.
        """
        self.before_update()  # the buffers are about to be overwritten: no copy of the last take may still run
        tensors, index_of = self._unique(state)
        reused = [t for t in tensors if self._reused(t)]
        self.allocate(tuple((tuple(t.shape), t.dtype) for t in reused))
        buffers = iter(self._buffers)
        targets, devices, later = [], set(), []
        side_device = torch.device("cuda", torch.cuda.current_device()) if beside and self.pinned else None
        for source in tensors:
            reuse = self._reused(source)
            target = next(buffers) if reuse else torch.empty(source.shape, dtype=source.dtype)
            targets.append(target)
            if reuse and source.device == side_device and source.untyped_storage().data_ptr() in beside:
                later.append((source, target))
                continue
            if source.device.type == "cuda":
                devices.add(source.device)
            # non_blocking: device-to-host copies into page-locked memory queue on the current stream
            target.copy_(source.detach(), non_blocking=source.device.type == "cuda")
        for device in devices:
            torch.cuda.current_stream(device).synchronize()  # the copy is done before training resumes
        if later:
            self._copy_beside(side_device, later)
        return _rebuild(state, iter(index_of), targets)

    def _copy_beside(self, device: torch.device, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        if self._stream is None:
            self._stream = torch.cuda.Stream(device)
        training = torch.cuda.current_stream(device)
        self._stream.wait_stream(training)  # the copies see everything queued so far: this step's update
        with torch.cuda.stream(self._stream):
            for source, target in pairs:
                target.copy_(source.detach(), non_blocking=True)
                source.record_stream(self._stream)  # its memory is not reused before the copy is done
            copied = torch.cuda.Event()
            copied.record(self._stream)
        self._copied, self._guard = copied, (training, copied)

    def before_update(self) -> None:
        """Before an optimizer step: it must not change what a copy of ``take(beside=...)`` still reads."""
        if self._guard is not None:
            stream, copied = self._guard
            stream.wait_event(copied)  # the GPU waits, if the copy is still running; the host does not
            self._guard = None

    def ready(self) -> None:
        """Block until every copy of the last ``take`` is in host memory (the writer, before reading it)."""
        copied, self._copied = self._copied, None
        if copied is not None:
            copied.synchronize()

    def _reused(self, tensor: torch.Tensor) -> bool:
        return tensor.numel() * tensor.element_size() >= self.reuse_from_bytes

    @staticmethod
    def _unique(state: object) -> tuple[list[torch.Tensor], list[int]]:
        tensors: list[torch.Tensor] = []
        index_of: list[int] = []
        _collect(state, tensors, {}, index_of)  # tied weights (one storage, two names) are copied once
        return tensors, index_of

    # -- the buffers ---------------------------------------------------------------------------
    def allocate(self, layout: tuple) -> None:
        """Make the arena for ``layout`` unless it is the current one (then nothing happens)."""
        if layout == self._layout:
            return
        slots, offset = [], 0
        for shape, dtype in layout:
            nbytes = math.prod(shape) * dtype.itemsize
            slots.append(_Slot(shape, dtype, nbytes, offset))
            offset += -(-nbytes // _ALIGN) * _ALIGN
        self.close()
        self._arena = mmap.mmap(-1, max(offset, mmap.PAGESIZE))  # anonymous, page-aligned, zero-filled
        whole = torch.frombuffer(self._arena, dtype=torch.uint8)
        self._arena_ptr = whole.data_ptr()
        view = memoryview(self._arena)
        self._buffers = [
            torch.frombuffer(view[s.offset : s.offset + s.nbytes], dtype=torch.uint8).view(s.dtype).view(s.shape)
            if s.nbytes else torch.empty(s.shape, dtype=s.dtype)
            for s in slots
        ]
        view.release()
        del whole
        self._layout = layout
        self.allocations += 1
        if self.pin:
            self.pinned = _register(self._arena_ptr, len(self._arena))

    def close(self) -> None:
        """Release the buffers (tensors handed out by ``take`` must no longer be in use)."""
        if self._arena is None:
            return
        if self.pinned:
            torch.cuda.cudart().cudaHostUnregister(self._arena_ptr)
            self.pinned = False
        self._buffers = []
        self._layout = None
        try:
            self._arena.close()
        except BufferError:
            # a caller still holds a tensor of the old arena: the memory goes when that tensor does
            log.debug("host snapshot arena still referenced; left to the garbage collector")
        self._arena = None


def _register(ptr: int, size: int) -> bool:
    """Page-lock the arena so device-to-host copies run at full speed; pageable memory still works."""
    try:
        error = int(torch.cuda.cudart().cudaHostRegister(ptr, size, 0))
    except Exception as exc:  # no CUDA runtime in this build
        log.warning("checkpoint staging memory is not pinned (%s): copies to the host will be slower", exc)
        return False
    if error != 0:
        log.warning("checkpoint staging memory is not pinned (cudaHostRegister error %d): "
                    "copies to the host will be slower", error)
        return False
    return True


def _identity(tensor: torch.Tensor) -> tuple:
    return (tensor.device, tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tensor.stride(), tensor.dtype)


def _collect(obj: object, tensors: list[torch.Tensor], aliases: dict[tuple, int], index_of: list[int]) -> None:
    """Tensors in traversal order (the same order ``_rebuild`` consumes ``index_of`` in)."""
    if isinstance(obj, torch.Tensor):
        key = _identity(obj)
        if key not in aliases:
            aliases[key] = len(tensors)
            tensors.append(obj)
        index_of.append(aliases[key])
    elif isinstance(obj, dict):
        for value in obj.values():
            _collect(value, tensors, aliases, index_of)
    elif isinstance(obj, list | tuple):
        for value in obj:
            _collect(value, tensors, aliases, index_of)


def _rebuild(obj: object, indices, buffers: list[torch.Tensor]) -> object:
    if isinstance(obj, torch.Tensor):
        return buffers[next(indices)]
    if isinstance(obj, dict):
        rebuilt = {key: _rebuild(value, indices, buffers) for key, value in obj.items()}
        if isinstance(obj, OrderedDict):
            rebuilt = OrderedDict(rebuilt)
            if hasattr(obj, "_metadata"):  # module versions: load_state_dict reads them
                rebuilt._metadata = copy.deepcopy(obj._metadata)
        return rebuilt
    if isinstance(obj, list):
        return [_rebuild(value, indices, buffers) for value in obj]
    if isinstance(obj, tuple):
        values = [_rebuild(value, indices, buffers) for value in obj]
        return type(obj)(*values) if hasattr(obj, "_fields") else tuple(values)
    return copy.deepcopy(obj)  # plain values: the caller may change its own afterwards
