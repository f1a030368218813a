"""The `graphstore` command's entry point.

Loading the command line takes about half a second (NumPy, the store, the models): a
Ctrl-C in that time ended it with a traceback through whatever was being imported.  This
module imports nothing of graphstore's before it can catch that interrupt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import suppress

INTERRUPTED = 130
"""The status of a command stopped by Ctrl-C (128 + SIGINT), as `graphstore.cli` returns."""
TERMINATED = 143
"""The status of a command stopped by SIGTERM (128 + SIGTERM)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Load the command line and run it (`graphstore.cli.main`).  A stopped command ends at
    once (`exit_stopped`)."""
    try:
        from graphstore.cli import main as run
    except KeyboardInterrupt:
        print("graphstore: interrupted", file=sys.stderr)
        return INTERRUPTED
    return exit_stopped(run(argv))


def exit_stopped(status: int) -> int:
    """`status`, or for a command stopped by Ctrl-C or SIGTERM the end of the process now.

    An embedding model runs on a worker thread that Python joins at exit, and no signal
    stops a batch it is computing: after "graphstore: interrupted" an ingest went on for up
    to 45 s (e5, a batch of 64), and a second Ctrl-C in that wait printed a traceback from
    the join.  By then every write is committed or rolled back and the store closed, so
    nothing the thread could still finish is wanted."""
    if status not in (INTERRUPTED, TERMINATED):
        return status
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe has nothing left to say
            stream.flush()
    os._exit(status)
