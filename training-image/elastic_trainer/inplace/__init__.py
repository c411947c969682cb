"""In-place recovery (``TORCHFLEET_RECOVERY=inplace``): survivors keep training, a new group heals from a peer.

The ``restart`` mode (trainer.py) restarts every worker of every node when membership changes.
Here each node's worker is one torchft *replica group* (issue 14; training-image/README.md,
"Recovery modes"):

- a per-job Lighthouse (``torchft_lighthouse``, address in ``TORCHFT_LIGHTHOUSE``) decides a
  quorum before every step; a group that stops heartbeating drops out of it;
- gradients are averaged over the groups of the step's quorum (torchft's fault-tolerant DDP and
  ``Manager.allreduce``); a step where a collective failed is not committed by anyone
  (``should_commit``) and is simply run again with the new quorum;
- a group that joins behind the others (a replacement) heals: it copies model, optimizer,
  scheduler and step from a live peer over HTTP (torchft's checkpoint transport), never from
  the shared store;
- the shared store still gets the periodic checkpoints (written in the background, the same
  CheckpointStore) for the loss of the whole job, or of the Lighthouse: a worker whose quorum
  cannot be reached exits (EXIT_MEMBERSHIP_CHANGE), its node restarts it, and a job where no
  group holds live state resumes from the last checkpoint once the Lighthouse answers again.

Data: group ``g`` of ``G`` (``TORCHFLEET_REPLICA_GROUP``, ``TORCHFLEET_REPLICA_GROUPS``) takes
the same contiguous slice of every global batch as rank ``g`` of world ``G`` in the restart mode
(../data/sampler.py), at the step the quorum agreed on. A step whose quorum lacks a group trains on
the slices of the groups present: a smaller batch, same learning rate (the gradient is the mean
over the samples present). The missing slice of that step is not revisited.

Spare indexes: the Job has more completion indexes than groups (torchfleet/jobs/indexed_job.py,
``shell``: with completions = MAX the Job controller marked a finished run Failed). Pod ``k >= G``
starts only once an index failed for good, and its trainer cannot tell which: no pod reads the Job's
status, and torchft's quorum tells a group only its replica rank among the participants, not their
ids. So spare ``k`` is replica ``group<k>`` (an id of its own) and takes slice ``k mod G``. When
that slice's own group is alive (a 1:2 job whose index 1 failed: spare 2 takes slice 0, as index 0
does), both train the same samples; their gradients and their loss per sample are equal, so each
step is what it would be without the spare (its GPU spent for nothing), and the failed group's slice
stays missing, as in any quorum that lacks a group. The spare does count towards the minimum
(``TORCHFLEET_MIN_REPLICA_GROUPS``, the Lighthouse's ``min_replicas``), as any group.

Time limit (``TORCHFLEET_STOP_AT``, ../deadline.py): each group votes "past the limit" in the step's
gradient all-reduce, beside the loss sum, so every group of a committed step sees the same sum and
all stop after that step: replica rank 0 commits the stop checkpoint, the others wait for it, and
all exit 0 (the Job ends Succeeded, and resumes from that checkpoint when submitted again).

Final model (``--output-dir``, ../outputs.py): replica rank 0 exports it once the final checkpoint is
committed; the other groups wait for the export as well (bounded as the wait for the checkpoint),
since the Job succeeds at the first group that exits 0 and then stops the rest, the writer included.

The modules: ``group.py`` (one group's worker and its step loop: ``train_inplace``), ``checkpoints.py``
(its resume from and writes to the shared store), ``ending.py`` (the time limit, the final checkpoint
and export, and the other groups' bounded waits for them), ``settings.py`` (the environment it reads),
``addresses.py`` (what a group advertises to the others), ``stall_guard.py`` (a bound on torchft's
calls that have none), ``replica_node.py`` (the node: one worker, started again only when it fails).

What callers use: the launcher hands a node to ``replica_node.main``; the trainer (trainer.py) calls
``elastic_trainer.inplace.group.train_inplace`` when ``recovery_mode()`` says so; the CLI and the local
runs set the variables named here (``ENV_*``). This package itself imports no torch (the launcher's
node imports it); ``group`` does. It uses the loop's helpers and the store, never the launcher (launch/)
nor the local runs (local/): tests/checks/test_import_cycles.py holds it to that.
"""

from elastic_trainer.inplace.settings import (
    ENV_BACKEND,
    ENV_COMPLETION_INDEX,
    ENV_GROUP,
    ENV_GROUPS,
    ENV_LIGHTHOUSE,
    ENV_MIN_GROUPS,
    ENV_RECOVERY,
    EXIT_BAD_SETTINGS,
    RECOVERY_MODES,
    recovery_mode,
)

__all__ = [
    "ENV_BACKEND",
    "ENV_COMPLETION_INDEX",
    "ENV_GROUP",
    "ENV_GROUPS",
    "ENV_LIGHTHOUSE",
    "ENV_MIN_GROUPS",
    "ENV_RECOVERY",
    "EXIT_BAD_SETTINGS",
    "RECOVERY_MODES",
    "recovery_mode",
]
