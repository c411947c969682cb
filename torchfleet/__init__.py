"""The `torchfleet` command line: offline preview, job submission, the local demo."""

__version__ = "0.1.0"
