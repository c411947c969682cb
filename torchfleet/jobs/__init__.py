"""The researcher's command line: submit, sweep, list, status, logs and delete elastic training jobs.

One purpose per module, built as plain data first and applied last (docs/facts.md, "Conventions"):

- ``errors``     the two exit-code classes (2: usage/validation, 1: cluster)
- ``target``     where a job goes: the stack (its file, its Pulumi outputs) or the platform defaults
- ``spec``       JobRequest: the flags, validated against the target, and the sizing from the catalog
- ``manifests``  pure builders of the ElasticJob and PyTorchJob dicts
- ``schema``     validation against the operators' CRD schemas before anything is sent
- ``cluster``    the official kubernetes client, wrapped: connect, create, list, read, logs, delete
- ``table``      list/status rendering
- ``commands``   argparse wiring (``register``) and the ``run`` functions
"""
