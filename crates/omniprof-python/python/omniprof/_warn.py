"""Warnings that point at the user's code, not at omniprof's."""

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str) -> None:
    """Issues ``message`` as a ``RuntimeWarning`` attributed to the innermost caller outside
    this package: the ``with`` line whose exit stopped a profiler, the ``start()`` call, not
    whichever of omniprof's frames noticed the problem (their number varies by path)."""
    # Level 1 is this function; its caller's frame is level 2.
    level = 2
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)
