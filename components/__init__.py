"""Torchfleet's Pulumi component library: config -> spec -> cloud cluster -> training layer."""
