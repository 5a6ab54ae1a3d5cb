"""Event loop helpers with PyDotCompute's names (pydotcompute.ring_kernels):
uvloop's policy and the eager task factory, when available."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Optional

_eager = False


def is_uvloop_available() -> bool:
    if sys.platform == "win32":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def is_uvloop_installed() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    return isinstance(asyncio.get_event_loop_policy(), uvloop.EventLoopPolicy)


def install_uvloop() -> bool:
    """uvloop's event loop policy for the loops made from now on (True
    when it is in place). RINGKERNEL_NO_UVLOOP=1 turns it off."""
    if os.environ.get("RINGKERNEL_NO_UVLOOP") or not is_uvloop_available():
        return False
    import uvloop
    if not is_uvloop_installed():
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def install_eager_task_factory(loop: Optional[asyncio.AbstractEventLoop] = None) -> bool:
    """The eager task factory on loop (the running one by default): Python
    3.12+; False elsewhere or without a loop."""
    global _eager
    factory = getattr(asyncio, "eager_task_factory", None)
    if factory is None:
        return False
    try:
        loop = loop or asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.set_task_factory(factory)
    _eager = True
    return True


def is_eager_tasks_installed() -> bool:
    return _eager


def get_loop_info() -> dict[str, Any]:
    try:
        loop_class = type(asyncio.get_running_loop()).__name__
    except RuntimeError:
        loop_class = "no_running_loop"
    v = sys.version_info
    return {"loop_class": loop_class, "uvloop_available": is_uvloop_available(),
            "uvloop_installed": is_uvloop_installed(),
            "eager_tasks_available": hasattr(asyncio, "eager_task_factory"),
            "eager_tasks_installed": _eager, "platform": sys.platform,
            "python_version": f"{v.major}.{v.minor}.{v.micro}"}


def create_optimized_loop() -> asyncio.AbstractEventLoop:
    """A new event loop (uvloop's when installed), eager tasks on 3.12+."""
    install_uvloop()
    loop = asyncio.new_event_loop()
    install_eager_task_factory(loop)
    return loop


def optimize_current_loop() -> dict[str, bool]:
    return {"uvloop": is_uvloop_installed(), "eager_tasks": install_eager_task_factory()}
