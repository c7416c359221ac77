"""Errors of the FitGpp core, as subclasses of cellfit's domain errors so that drivers catching
``ConfigError`` / ``InvalidRequest`` handle them without knowing this package."""

from __future__ import annotations

from scheduler.errors import ConfigError


class InvalidPreemptionSettings(ConfigError):
    """A FitGpp setting (s or P) is out of range; the message names the field."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
