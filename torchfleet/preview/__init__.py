"""Run the Pulumi program offline under mocks and record what it would create.

Used by `torchfleet synth`, `torchfleet check` and the tests: no Pulumi CLI, no credentials,
no network. See runner.synth().
"""
