"""Search over a schedule space: start picker, Q-network, P-method, random (issue: exploration)."""
