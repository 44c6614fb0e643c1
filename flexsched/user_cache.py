"""flexsched's folder in the user's cache directory, where the tuning database, kept roofs and
compiled kernels live unless their own settings say otherwise."""

from __future__ import annotations

import os


def user_cache_dir():
    """flexsched's folder in the user's cache directory (XDG_CACHE_HOME or ~/.cache)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "flexsched")
