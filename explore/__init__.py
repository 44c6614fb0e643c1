"""Search over a schedule space: start picker, Q-network, P-method, random (sec. 5.1 of the paper).

The modules, one concept each: evaluator (points -> Evaluations), history (H, E*, the start
picker), qnet (the Q-network and its training), methods (q, p, random as propose/observe),
search (the shared loop: warm-up, stopping rules), records (JSON-lines tuning logs),
record_schema (what a valid line holds), claims (runs sharing a record file), resume (records read
back: resumed history, best record that fits), optimize (the public entry point). Import the
modules themselves; this package imports nothing heavy.
"""
