"""The Pulumi program: one stack config -> one elastic training platform."""

import pulumi

from components import config
from components.platform import TrainingPlatform
from components.spec import ConfigError

try:
    spec = config.load()
except ConfigError as error:
    # Every problem at once, each naming its key, and no resource registered.
    raise pulumi.RunError(str(error)) from None
platform = TrainingPlatform("torchfleet", spec)
for name, value in platform.outputs.items():
    pulumi.export(name, value)
