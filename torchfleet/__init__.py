"""The `torchfleet` command line: offline preview of a stack, job submission and inspection, local runs.

Contract: ``torchfleet.cli.main`` is the one entry point (``[project.scripts]``). Each command lives in its
own module that exposes ``register(subparsers)``, adds its subcommand(s) and sets ``func``
(``cli.COMMAND_MODULES`` lists them). Every command exits 0 when done, 2 when the input is wrong (a message
naming the argument and what would be right, nothing created) and 1 on a failure outside the input
(jobs/errors.py). The researcher's commands import neither the cloud SDKs nor torch (the slim install,
tests/torchfleet/test_slim_install.py): what needs an extra imports it when it runs (extras.py says which).
No module imports another that imports it back (tests/checks/test_import_cycles.py).

Where things are:

- ``jobs/``: jobs on a cluster: submit, sweep, list, status, logs, delete, tensorboard, checkpoints, cp (its
  ``__init__`` has the map); ``jobs/errors.py`` holds the exit-code contract every module uses;
- ``preview/``: the Pulumi program run offline under mocks; ``synth``, ``synth_summary``, ``check``, ``gpus``
  and ``cost`` build on it; ``stack_ref``, ``config``, ``user_files`` and ``output_paths`` read and write
  the user's files;
- local runs: ``local_nodes`` (what the demo and ``run --local`` share), ``demo`` and ``demo_inplace``,
  ``run_local`` with ``local_schedule`` and ``local_folder``;
- ``data_upload``, ``completion``, ``extras``, and ``cli``, which imports the command modules when it runs.

Exports: ``__version__`` only; callers import the modules they use.
"""

__version__ = "0.1.0"
