"""CPU features the engine's choices depend on, read from /proc/cpuinfo (Linux; elsewhere: none)."""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The words of /proc/cpuinfo, its `flags` among them (read once); empty where it cannot be read."""
    try:
        return frozenset(Path("/proc/cpuinfo").read_text(errors="replace").split())
    except OSError:
        return frozenset()


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), which halves the bytes a decode step reads."""
    return not cpu_flags().isdisjoint({"avx512_bf16", "amx_bf16"})


@functools.cache
def cpu_has_vnni() -> bool:
    """Whether fbgemm sums int8 products in 32 bits here (AVX-512 VNNI: fbgemm looks for no other VNNI): then it
    may use all 8 bits of the activations; otherwise pairs of products are summed in 16 bits, and 7-bit
    activations keep that sum from saturating."""
    return "avx512_vnni" in cpu_flags()


# What a speed figure depends on, as /proc/cpuinfo names it -> as people write it.
ISA_FLAGS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "VNNI", "avx512_bf16": "BF16", "amx_tile": "AMX"}


@functools.cache
def cpu_description() -> dict:
    """This machine's CPU as every speed figure names it: its model, the instruction sets the engine's kernels use
    (AVX2, AVX-512, VNNI, BF16, AMX) and its cores."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    flags = cpu_flags()
    return {"model": model, "isa": [name for flag, name in ISA_FLAGS.items() if flag in flags], "cores": os.cpu_count()}
