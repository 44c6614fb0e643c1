"""Template-free schedule spaces generated from the static analysis and a target's capabilities."""

from .config import Config
from .generate import generate
from .space import Space, SpaceError

__all__ = ["Config", "Space", "SpaceError", "generate"]
