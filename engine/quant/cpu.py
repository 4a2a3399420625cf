"""CPU features the engine's choices depend on, read from /proc/cpuinfo (Linux; elsewhere: none), less what the
environment forbids torch's libraries to use: `ATEN_CPU_CAPABILITY=avx2`, `FBGEMM_ENABLE_INSTRUCTIONS=AVX2`,
`ONEDNN_MAX_CPU_ISA=AVX2` and `MKL_ENABLE_INSTRUCTIONS=AVX2` together make an AVX-512 machine run as an AVX2-only
one (how the other class is measured on one machine), and the engine's own policy must then read the CPU as those
libraries do."""

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


# the variables that cap the instruction sets of torch's CPU libraries (ATen's own kernels, fbgemm, oneDNN, MKL)
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "FBGEMM_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
FBGEMM_WITHOUT_VNNI = ("AVX2", "AVX512", "AVX512_256")  # fbgemm's caps below its VNNI kernels
ONEDNN_WITH_BF16 = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512")


def isa_caps() -> dict[str, str]:
    """The caps set in this process's environment, {variable: value}."""
    return {name: os.environ[name] for name in ISA_CAPS if os.environ.get(name)}


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX) and oneDNN may use it."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return not cpu_flags().isdisjoint({"avx512_bf16", "amx_bf16"}) and (not cap or cap in ONEDNN_WITH_BF16 + ("ALL",))


def cpu_has_vnni() -> bool:
    """Whether fbgemm sums int8 products in 32 bits here (AVX-512 VNNI: fbgemm looks for no other VNNI, and
    FBGEMM_ENABLE_INSTRUCTIONS may forbid it): then it may use all 8 bits of the activations; otherwise pairs of
    products are summed in 16 bits, and 7-bit activations keep that sum from saturating."""
    cap = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "").upper()
    return "avx512_vnni" in cpu_flags() and cap not in FBGEMM_WITHOUT_VNNI


def onednn_has_vnni() -> bool:
    """Whether oneDNN's int8 products (torch._int_mm) sum in 32 bits here (AVX-512 VNNI or AMX, and
    ONEDNN_MAX_CPU_ISA allows them): without, they pass through saturating 16-bit sums and are not exact."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    allowed = not cap or cap in ("ALL", "AVX512_CORE_VNNI") + ONEDNN_WITH_BF16
    return not cpu_flags().isdisjoint({"avx512_vnni", "amx_int8"}) and allowed


# What a speed figure depends on, as /proc/cpuinfo names it -> as people write it.
ISA_FLAGS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "VNNI", "avx512_bf16": "BF16", "amx_tile": "AMX"}


def cpu_description() -> dict:
    """This machine's CPU as every speed figure names it: its model, the instruction sets the engine's kernels use
    (AVX2, AVX-512, VNNI, BF16, AMX) and its cores; `caps` when the environment caps torch's libraries (the ISA
    list is then the CPU's, the caps say what ran)."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    flags = cpu_flags()
    isa = [name for flag, name in ISA_FLAGS.items() if flag in flags]
    found, caps = {"model": model, "isa": isa, "cores": os.cpu_count()}, isa_caps()
    return {**found, "caps": caps} if caps else found
