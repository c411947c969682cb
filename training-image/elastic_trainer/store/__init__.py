"""The checkpoint store on the shared file system: atomic, verified, fenced checkpoints.

What it guarantees, to any number of writers and readers on one directory (local disk or NFS):

- a checkpoint is committed by one rename, so a reader never sees a partial one (checkpoint_write.py);
- every file's size and sha256 are recorded as it is written and checked before a resume uses it;
  a damaged, linked, hostile or half-deleted checkpoint is skipped, the one before it tried
  (checkpoint_verify.py, checkpoint_meta.py), and never counts towards ``keep``;
- a writer of an older rendezvous round (an older *generation*) cannot commit over a newer one's
  checkpoints (fence.py: ``StaleGenerationError``);
- a failed write (the store full, read-only) is ``CheckpointWriteError``, leaving no debris behind;
- nothing good is pruned to make room: only what is older than the newest ``keep`` verified ones.

What callers use: ``CheckpointStore`` (save, load_latest, committed, generations) and its errors;
``HostSnapshot`` (staging.py: the host copy a checkpoint blocks training for) and ``AsyncWriter``
(one write in the background at a time) for writing while training goes on; ``sharded`` (every
rank writes part of one checkpoint, torch.distributed.checkpoint) is imported by name, as
``elastic_trainer.store.sharded``: it takes seconds to import, and only a sharded job pays that.

This package imports nothing of the rest of the library but its log (events.py): it does not know
how workers are launched, how many there are, or what the training loop does with a checkpoint
(tests/checks/test_import_cycles.py holds it to that).
"""

from elastic_trainer.store.async_writer import AsyncWriter, WriteOutcome
from elastic_trainer.store.checkpoint import Checkpoint, CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from elastic_trainer.store.fence import Generations, StaleGenerationError
from elastic_trainer.store.staging import HostSnapshot

__all__ = [
    "AsyncWriter",
    "Checkpoint",
    "CheckpointStore",
    "CheckpointWriteError",
    "CorruptCheckpointError",
    "Generations",
    "HostSnapshot",
    "StaleGenerationError",
    "WriteOutcome",
]
