"""PyDotCompute's validators (pydotcompute.decorators.validators): checks
of message classes, call arguments and kernel settings, raising
InvalidConfigurationError (a ValueError) or TypeError, naming the value."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
import warnings
from typing import Any, Callable

from .errors import InvalidConfigurationError, error

_BACKPRESSURE = ("block", "reject", "drop_oldest", "drop_new")


def _bad(name: str, value: Any, why: str) -> Exception:
    return error("RK_EINVAL", f"Invalid configuration: {name}={value!r} - {why}",
                 InvalidConfigurationError)


def validate_message(cls: type) -> type:
    """A message class must be a dataclass (TypeError otherwise); one
    without serialize() gets a warning, as in PyDotCompute."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{getattr(cls, '__name__', cls)!r}: a message must be a dataclass "
                        "(use @message)")
    if not hasattr(cls, "serialize"):
        warnings.warn(f"Message class '{cls.__name__}' does not have serialize method. "
                      "Consider using @message decorator.", stacklevel=2)
    return cls


def _matches(value: Any, t: Any) -> bool:
    if t is Any:
        return True
    origin = typing.get_origin(t)
    if origin is None:
        return not isinstance(t, type) or isinstance(value, t)
    args = typing.get_args(t)
    if origin is list:
        return isinstance(value, list) and (not args or all(_matches(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict) and (len(args) != 2 or all(
            _matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items()))
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(_matches(value, a) for a in args)
    return isinstance(value, origin) if isinstance(origin, type) else True


def validate_config(config_cls: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Checks a function's arguments against config_cls's annotations
    (TypeError naming the parameter)."""
    try:
        hints = typing.get_type_hints(config_cls)
    except Exception:
        hints = dict(getattr(config_cls, "__annotations__", {}))

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            for name, value in bound.arguments.items():
                if name in hints and not _matches(value, hints[name]):
                    raise TypeError(f"parameter '{name}': expected {hints[name]}, got "
                                    f"{type(value).__name__}")
            return fn(*args, **kwargs)
        return wrapper
    return wrap


def validate_queue_size(size: int, name: str = "queue_size") -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise _bad(name, size, "must be a positive integer")
    return size


def _dims(size: Any, name: str, limit: int) -> tuple[int, ...]:
    dims = (size,) if isinstance(size, int) else tuple(size)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise _bad(name, size, "must be 1-3 positive integers")
    total = 1
    for d in dims:
        total *= d
    if limit and total > limit:
        raise _bad(name, size, f"at most {limit} in all")
    return dims


def validate_grid_size(size: Any, name: str = "grid_size") -> tuple[int, ...]:
    return _dims(size, name, 0)


def validate_block_size(size: Any, name: str = "block_size", max_threads: int = 1024) -> tuple[int, ...]:
    return _dims(size, name, max_threads)


def validate_priority(priority: int) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 255:
        raise _bad("priority", priority, "must be an integer 0-255")
    return priority


def validate_backpressure_strategy(strategy: str) -> str:
    if strategy not in _BACKPRESSURE:
        raise _bad("backpressure", strategy, f"must be one of {list(_BACKPRESSURE)}")
    return strategy
