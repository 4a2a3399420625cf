"""Giving freed memory back to the system: loading a model allocates several times its size on the way (reading,
converting, quantizing), and glibc's allocator keeps what was freed for later use, so a process that loaded the
bundled pair held about 5 GB more than its models until it exited."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

log = logging.getLogger(__name__)


def release_freed_memory() -> None:
    """Collect unreachable objects, then ask glibc to return its free pages (a no-op where libc is not glibc)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # musl, macOS: no malloc_trim, nothing to do
        return
    trim(0)
