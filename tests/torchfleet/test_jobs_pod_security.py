"""Every pod template `torchfleet submit` writes passes the `restricted` Pod Security level the
training namespace enforces (tests/k8s/pod_security.py), for both operators over the flag table.

Regression: the pods never set runAsNonRoot, so the namespace refused every worker pod.
"""

from dataclasses import replace

import pytest

from components import spec as platform
from tests.k8s.pod_security import pod_templates, restricted_problems
from tests.torchfleet.test_jobs_manifests import CASES, CPU_CASES
from torchfleet.jobs import manifests
from torchfleet.jobs.spec import build_request

# The flag table of test_jobs_manifests, plus uids given with --run-as-user.
UIDS = [(f"{case[0]}-default-uid", case, platform.TRAINING_UID) for case in CASES] + [
    ("run-as-user-1", CASES[0], 1),
    ("run-as-user-65532", CASES[4], 65532),
] + [(f"{case[0]}-default-uid", case, platform.TRAINING_UID) for case in CPU_CASES]


def _job(case, operator, uid):
    _, make_target, flags = case
    t = replace(make_target(), operator=operator)
    flags = dict(flags)
    req = build_request(
        t, name=flags.pop("name", "resnet"), image="registry.example.com/team/train:1.4.2",
        command=flags.pop("command", ["python", "train.py"]), run_as_user=uid, **flags,
    )
    return manifests.build(req, t)


@pytest.mark.parametrize("operator", platform.OPERATORS)
@pytest.mark.parametrize(("case", "uid"), [u[1:] for u in UIDS], ids=[u[0] for u in UIDS])
def test_every_pod_template_is_restricted(case, uid, operator):
    templates = pod_templates(_job(case, operator, uid))
    assert templates
    for where, pod in templates:
        assert restricted_problems(pod) == [], where
        security = pod["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (
            uid, platform.TRAINING_UID, platform.TRAINING_UID)
