"""``python -m omniprof script.py [args...]``: runs a Python program that does not import
omniprof with omniprof imported first, so the environment switches
(``OMNIPROF_FLIGHT_RECORDER``, ``OMNIPROF_ONDEMAND``) take effect; the program runs as
``__main__`` with its own ``sys.argv``, and exits as it would. A ``sys.exit`` with an error
ends it with a flight recorder's failure dump, which a program run directly cannot have
(Python has no hook for an exit's status)."""

import runpy
import sys

import omniprof  # noqa: F401  (the import is what starts the switched-on parts)
from omniprof import _flight


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m omniprof SCRIPT [ARGS...]")
    sys.argv = sys.argv[1:]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        _flight.exiting(e)
        raise


main()
