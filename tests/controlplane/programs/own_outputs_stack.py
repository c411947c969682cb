"""A stack that reads its own last outputs as components/clouds/azure/live.py does (recorded_names, the engine's
builtin pulumi:pulumi:readStackOutputs), for tests/controlplane/test_pulumi_own_outputs.py. It exports the two
names the Azure stack exports, a secret beside them (the Azure stack's kubeconfig output is one), and what it
read; it says what it read in the run's log too (a preview saves no outputs)."""

import pulumi

from components.clouds.azure import live

names = live.recorded_names()
pulumi.log.info(f"recorded names: {names}")
pulumi.export("resourceGroup", f"rg-{pulumi.get_stack()}")
pulumi.export("clusterName", f"aks-{pulumi.Config('own').require('generation')}")
pulumi.export("kubeconfig", pulumi.Output.secret("a secret output"))
pulumi.export("seen", list(names) if names else None)
