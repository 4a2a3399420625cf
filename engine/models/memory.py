"""Giving freed memory back to the system: loading a model allocates several times its size on the way (reading,
converting, quantizing), and glibc's allocator keeps what was freed for later use, so a process that loaded the
bundled pair held about 5 GB more than its models until it exited."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


def release_freed_memory() -> None:
    """Collect unreachable objects, then ask glibc to return its free pages (a no-op where libc is not glibc)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None (musl, macOS); looked up once."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
