"""Torchfleet's elastic training library, run inside the training image.

Modules, one purpose each:

- ``launcher``   the image's entrypoint: torchrun with Torchfleet's defaults, SIGTERM -> exit 143
- ``rdzvconf``   the launcher's rendezvous settings by the job's maximum node count, and their checks
- ``trainer``    the training loop: resume, reshard, periodic and on-signal checkpoints
- ``train_config`` the trainer's flags (``TrainConfig``) and their defaults from the pod's environment
- ``schedule``   the LR schedule of a resumed run, and what a changed ``--total-steps`` does to it
- ``worker_exits`` what a worker says when started without a launcher, or when a peer is lost
- ``checkpointing`` the loop's checkpoints: host copy, background write, what a failed one means
- ``nonfinite``  a step with a NaN or infinite loss skips its update; too many in a row end the worker
- ``rng``        every rank's RNG state: saved in a checkpoint, restored or reseeded on resume
- ``checkpoint`` atomic, verified, fenced checkpoints on the shared store
- ``staging``    the host copy of the state a checkpoint blocks training for (pinned on CUDA, reused)
- ``async_writer`` one checkpoint write in the background at a time
- ``sharded``    the sharded format: every rank writes its part (torch.distributed.checkpoint)
- ``fence``      generations: a writer from an older rendezvous round cannot commit over a newer one
- ``signals``    SIGTERM (spot notice) -> "stop after this step"
- ``data``       the elastic sampler: one data order, resharded at any world size
- ``events``     rank-0 logs, machine-readable progress events, TensorBoard scalars
- ``outputs``    the final model in a plain format (TORCHFLEET_OUTPUT_DIR), evaluate() and custom scalars
- ``deadline``   a job's time limit (TORCHFLEET_STOP_AT): a stop with a checkpoint, exit 0
- ``localrun``   etcd + torchrun "nodes" as local processes (tests, benchmark, ``torchfleet demo``)
- ``inplace``    in-place recovery (``TORCHFLEET_RECOVERY=inplace``): torchft replica groups, a quorum per
                 step, a replacement heals from a peer (issue 14)
- ``replica_node`` an in-place node: one worker, started again only when it fails
- ``inplacerun`` a torchft Lighthouse and replica-group nodes as local processes (tests, ``bench/goodput.py``)
- ``rdzvnode``   torch's etcd-v2 rendezvous handler alone, in small forked processes (issue 15)
- ``rdzvfleet``  many such nodes and jobs on one machine, timed (``bench/rendezvous.py``, tests)

This package must stay importable without torch (the launcher's argument handling
and ``localrun`` are used by tools that never train).
"""

from elastic_trainer import _moved

_moved.install()  # the flat library's module names still import, for one release (_moved.py)

__all__ = ["ENV_WARM_MODULES", "EXIT_CHECKPOINT_FAILED", "EXIT_FENCED", "EXIT_MEMBERSHIP_CHANGE", "EXIT_NONFINITE",
           "EXIT_SIGTERM"]

# launcher -> forkserver: the modules warm.py imports after torch (each guarded, see warm.py). Here,
# not in launcher.py: warm.py must not import the launcher. A worker forked from the forkserver
# re-runs the launcher's module as __mp_main__ (multiprocessing's spawn.prepare for a `python -m`
# parent), and runpy warned "'elastic_trainer.launcher' found in sys.modules" at every node start
# when warm.py had imported it into the forkserver first (issue 22).
ENV_WARM_MODULES = "TORCHFLEET_WARM_MODULES"

# A worker that stopped for a spot notice exits like a process killed by SIGTERM
# (128 + 15): both controllers retry 143 and treat exit code 1 as fatal (docs/facts.md, "Controllers and exit codes").
EXIT_SIGTERM = 143
# A worker whose peer left at a coordinated stop: the agent restarts it, which
# re-enters the rendezvous with the remaining nodes (EX_TEMPFAIL from sysexits.h).
EXIT_MEMBERSHIP_CHANGE = 75
# A worker of a group that is no longer the newest (fence.py): it must not write; its agent's
# restart joins the current rendezvous round as a newer generation.
EXIT_FENCED = 3
# Rank 0 could not write the checkpoint of a stop or of the last step (e.g. the store is full):
# the steps since the last committed checkpoint are lost, and the restarted workers resume from
# it (EX_IOERR from sysexits.h). A failed periodic checkpoint is reported and training goes on.
EXIT_CHECKPOINT_FAILED = 74
# The loss was NaN or infinite for more than --max-nonfinite-steps steps in a row (nonfinite.py):
# nothing is saved, and the restarted workers resume from the newest (finite) checkpoint
# (EX_DATAERR from sysexits.h).
EXIT_NONFINITE = 65
