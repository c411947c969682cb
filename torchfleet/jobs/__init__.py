"""The researcher's command line: jobs on a cluster (submit, sweep, list, status, logs, delete, tensorboard,
checkpoints, cp).

Contract: a job is built as plain data first and applied last (docs/facts.md, "Conventions"). The flags
become a JobRequest, checked against the stack, and then the builders' dicts; every problem is a
UsageError (exit 2) before anything connects, so ``--dry-run`` prints exactly what ``submit`` sends. Only
``kubeconfig`` and ``cluster`` talk to the API server, and each failure there is a JobError with its exit
code (errors.py). The package exports nothing itself: callers import the module they need.

One purpose per module, lower layers first: a module imports only modules listed before it.

- what a job is: ``errors`` (the exit-code classes), ``target`` (the stack or the defaults), ``sizing``,
  ``image_ref``, ``flag_checks``, ``mounts``, ``egress``, ``workdir``, ``spec`` (JobRequest: the flags checked
  against the target), ``datasets``, ``limits``, ``job_file``, ``workdir_pack``;
- the builders, pure functions from a JobRequest to dicts: ``pod_template`` (the pod every kind runs, the
  job's labels and annotations), ``indexed_job`` (the ``job`` operator), ``inplace_job`` (``--recovery
  inplace`` and its Lighthouse), ``manifests`` (ElasticJob, PyTorchJob, ``build``, the network policies, and
  the readers of a job object of any kind); ``pytorchjob_schema`` and ``schema`` check them;
- the cluster: ``exec_auth``, ``kubeconfig`` (connect), ``cluster`` (JobClient);
- the store's readers: ``store_script``, ``store_pod``, ``reader_pod``, ``store_access``;
- reading a job: ``summary``, ``progress``, ``log_lines``, ``usage``, ``table``;
- the commands: ``session`` (the cluster options every command shares), ``workdir_submit``, ``commands``
  (submit, sweep), ``inspect_commands`` (list, status, delete), ``logs_command`` (logs), ``tensorboard``,
  ``results`` (checkpoints, cp).
"""
