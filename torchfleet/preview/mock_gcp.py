"""Computed outputs and invoke answers of the gcp provider under mocks."""

from __future__ import annotations

RESOURCES: dict = {}
CALLS: dict = {}
