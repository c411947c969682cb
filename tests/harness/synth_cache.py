"""A memo of the mock synthesis (torchfleet/preview/runner.py synth) for the day-2 tests.

Each day-2 test plans a change: it synthesizes the old config and the new one (day2.plan_configs, or the
tests' own plan helpers), and most of a file's tests share the old one, so half their synthesis was the
same program run again: some 5-10 s of CPU each; the three clouds' day-2 files took 18 worker-minutes of a
fresh CI run (issue 31, item 5; bench/ci_timeline.py). Used by those and by the `torchfleet plan` tests.

The key is everything the program reads: the stack, its config and secret keys, the mocks' live state
(mock_aws.LIVE_CLUSTERS, mock_azure.LIVE_AGENT_POOLS and LIVE_MANAGED_CLUSTERS, mocks.STACK_OUTPUTS) and
the environment; not the program's code, so a test that patches it synthesizes afresh (the fixture). Each
call returns its own deep copy: tests change what they get (test_day2_aws sets a node group's running size
on the old result). Two syntheses of one config differ only in the order of a resource's dependsOn URNs.

    pytestmark = pytest.mark.usefixtures("memoized_synth")   # tests/conftest.py's fixture
"""

from __future__ import annotations

import copy
import json
import os

from torchfleet.preview import mock_aws, mock_azure, mocks, runner

_REAL = runner.synth  # taken at import, before the fixture puts this module's synth in its place
_MEMO: dict[str, runner.SynthResult] = {}


def _key(stack: str, config: dict[str, str], secret_keys: list[str] | None) -> str:
    live = [mock_aws.LIVE_CLUSTERS, mock_azure.LIVE_AGENT_POOLS, mock_azure.LIVE_MANAGED_CLUSTERS, mocks.STACK_OUTPUTS]
    environ = sorted((k, v) for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST")  # pytest's, per test
    return json.dumps([stack, config, sorted(secret_keys or []), live, environ], sort_keys=True, default=repr)


def synth(stack: str, config: dict[str, str], secret_keys: list[str] | None = None) -> runner.SynthResult:
    """runner.synth's result for these inputs, synthesized once per process."""
    key = _key(stack, config, secret_keys)
    if key not in _MEMO:
        _MEMO[key] = _REAL(stack, config, secret_keys)  # a ConfigError is raised each time: nothing kept
    return copy.deepcopy(_MEMO[key])

