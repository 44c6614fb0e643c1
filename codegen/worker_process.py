"""The worker's program, `python -m codegen.worker_process FD`: codegen.worker.Worker starts it as a
plain subprocess talking over the inherited socket FD, so the parent's __main__ (a script without a
main guard, a notebook, the REPL) is never imported again, as multiprocessing's spawn would.
"""

import signal
import sys

# First of all: Ctrl-C at the terminal reaches the whole process group, and it is the parent's to handle.
signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(argv):
    """Serve calls on the connection whose file descriptor is argv[0]."""
    from multiprocessing.connection import Connection

    from codegen.worker import serve

    serve(Connection(int(argv[0])))


if __name__ == "__main__":
    main(sys.argv[1:])
