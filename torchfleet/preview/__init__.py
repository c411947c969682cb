"""Run the Pulumi program offline under mocks and record what it would create.

Used by `torchfleet synth`, `torchfleet check` and the tests: no Pulumi CLI, no credentials,
no network. See runner.synth().

Contract: ``runner.synth_file(path)`` (or ``synth(stack, config)``) runs the program once for one stack, its
file read by ``stack_file``, and returns a SynthResult: every resource it registered, with its type, parent,
inputs and resource options (``monitor``); a wrong config raises spec.ConfigError before any resource.
``mocks`` and ``mock_<cloud>`` answer as the providers do, so nothing registers silently empty; ``plans``
reads the destroy and replace plans from those options. The package exports nothing itself.
"""
