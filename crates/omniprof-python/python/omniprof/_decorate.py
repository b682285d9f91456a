"""The decorator form of ``record_function``: each call of the function runs in a range."""

import functools
from typing import Any, Callable, Optional, TypeVar

from . import _native

F = TypeVar("F", bound=Callable[..., Any])


def decorate(name: str, args: Optional[str], func: F) -> F:
    """Wraps ``func`` so that every call is recorded as the user range ``name``.

    A new range object per call keeps the decorated function safe to call from several
    threads at once.
    """

    @functools.wraps(func)
    def wrapper(*a: Any, **k: Any) -> Any:
        with _native.record_function(name, args):
            return func(*a, **k)

    return wrapper  # type: ignore[return-value]
