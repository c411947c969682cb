import pytest

from tests.harness import synth_config, synth_stack

# Three zones and two GPU types: 6 GPU pools, one of them on-demand.
THREE_ZONES = {
    "aws:region": "us-east-1",
    "torchfleet:cloud": "aws",
    "torchfleet:zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
    "torchfleet:gpuPools": [
        {"gpu": "t4", "maxNodes": 4},
        {"gpu": "a10g", "maxNodes": 2, "minNodes": 1, "machineTypes": ["g5.12xlarge"], "spot": False},
    ],
    "torchfleet:storage": {"protect": False},
    "torchfleet:network": {"natGateways": "perZone", "publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:autoscaler": {"scaleDownUnneededTime": "3m", "scaleDownDelayAfterAdd": "4m"},
}


@pytest.fixture(scope="session")
def aws_example():
    return synth_stack("aws-usw2")


@pytest.fixture(scope="session")
def aws_three_zones():
    return synth_config("aws-three", THREE_ZONES)
