"""Small statistics the cost models are judged by (numpy only)."""

from __future__ import annotations

import numpy as np


def kendall_tau(a, b):
    """Kendall's tau-b of two equally long sequences: 1 when they order every pair alike, -1 when
    oppositely; ties count as neither (nan when either sequence is constant or has under 2 values)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"kendall_tau needs two equally long sequences, got shapes {a.shape} and {b.shape}")
    upper = np.triu_indices(len(a), k=1)
    da = np.sign(a[:, None] - a[None, :])[upper]
    db = np.sign(b[:, None] - b[None, :])[upper]
    denominator = np.sqrt(np.count_nonzero(da) * np.count_nonzero(db))
    return float(np.sum(da * db) / denominator) if denominator else float("nan")
