"""Computed outputs and invoke answers of the azure provider under mocks."""

from __future__ import annotations

RESOURCES: dict = {}
CALLS: dict = {}
