"""A Config: one point of a space as named knob values, hashable and JSON-friendly."""

from __future__ import annotations

import json
from dataclasses import dataclass


def _freeze(value):
    return tuple(_freeze(v) for v in value) if isinstance(value, (list, tuple)) else value


def _thaw(value):
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Config:
    """Knob values in the space's knob order: ((name, value), ...)."""

    values: tuple

    def __getitem__(self, name):
        for key, value in self.values:
            if key == name:
                return value
        raise KeyError(f"config has no knob '{name}'")

    def get(self, name, default=None):
        return next((value for key, value in self.values if key == name), default)

    def to_dict(self):
        return {key: _thaw(value) for key, value in self.values}

    @classmethod
    def from_dict(cls, data):
        return cls(tuple((key, _freeze(value)) for key, value in data.items()))

    def to_json(self):
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))
