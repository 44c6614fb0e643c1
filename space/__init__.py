"""Schedule spaces generated from the static analysis (issue: template-free schedule spaces)."""
