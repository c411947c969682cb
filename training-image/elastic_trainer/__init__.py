"""Torchfleet's elastic training library, run inside the training image.

The entry points, at the top (their names are public: the image, every manifest and users' scripts use them):

- ``launcher``     the image's entrypoint, ``python -m elastic_trainer.launcher``: torchrun with
                   Torchfleet's defaults, SIGTERM -> exit 143, or an in-place node (inplace/replica_node.py)
- ``trainer``      the training loop, ``train(task, TrainConfig)``: resume, reshard, periodic and
                   on-signal checkpoints; an in-place job's worker goes to inplace/
- ``precision``    autocast and channels_last for the examples' ``--precision``

The loop's helpers, beside it: ``train_config`` (its flags), ``checkpointing`` (the loop's checkpoints:
host copy, background write, what a failed one means), ``hooks`` (the resume's required keys, the
tests' fault and hold hooks: shared by both loops), ``schedule`` (the LR schedule of a resumed run),
``nonfinite`` (a NaN or infinite loss skips its update), ``rng``, ``comm`` (numpy-free object
collectives), ``signals`` (SIGTERM -> "stop after this step"), ``deadline`` (TORCHFLEET_STOP_AT),
``outputs`` (the final model, evaluate(), custom scalars), ``events`` (logs, progress events,
TensorBoard), ``data`` (the elastic sampler).

The parts, one package each, its ``__init__`` stating its contract and the names callers use:

- ``store/``    the checkpoint store on the shared file system: atomic, verified, fenced checkpoints
- ``launch/``   what the launcher is made of: its plan, torchrun's agent, rendezvous settings, warm workers
- ``inplace/``  in-place recovery (``TORCHFLEET_RECOVERY=inplace``): torchft replica groups, a quorum per
                step, a replacement heals from a peer (issue 14)
- ``etcd_gate/`` the platform's gate in front of etcd's v2 API: a training pod reaches only its own
                run's rendezvous, every write expires, sizes and counts are bounded
- ``local/``    etcd, torchrun nodes, a Lighthouse and replica groups as local processes: the tests,
                the benchmarks and ``torchfleet demo``/``run --local``; nothing else imports it

No import cycles, and each part imports only what its docstring allows (tests/checks/test_import_cycles.py).
The module names of the flat library before issue 24 still import, with a DeprecationWarning, for
one release (_moved.py). This package must stay importable without torch (the launcher's argument
handling, launch/ and local/ are used by tools that never train).
"""

from elastic_trainer import _moved

_moved.install()  # the flat library's module names still import, for one release (_moved.py)

__all__ = ["ENV_WARM_MODULES", "EXIT_CHECKPOINT_FAILED", "EXIT_FENCED", "EXIT_MEMBERSHIP_CHANGE", "EXIT_NONFINITE",
           "EXIT_SIGTERM"]

# launcher -> forkserver: the modules launch/warm.py imports after torch (each guarded, see warm.py). Here,
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
