"""What `auto` weighs at a model's first start: the estimated decode step of each (dtype, weight format) of the
bundled models on this machine, timed as engine/quant/calibrate.py times them (one decoder layer's linear layers in
the model's shapes, random weights, interleaved), for 1 and 8 token rows, and the format `auto` picks.

    python -m benchmarks.bench_formats
    ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python -m benchmarks.bench_formats      # the same machine run as an AVX2-only CPU

Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json

import torch
from transformers import AutoConfig

from engine.models.loading import BUNDLED_PREFIX, resolve_spec
from engine.quant.calibrate import BUNDLED_CANDIDATES, ROUNDS, Shapes, time_formats
from engine.quant.cpu import cpu_description

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
EXTRA = (("float32", "int4"), ("float32", "w8a8"), ("bfloat16", "int8"))  # timed to show them, never auto's pick


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="bundled model names, comma-separated")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per format (the median counts)")
    args = parser.parse_args(argv)
    pairs = list(BUNDLED_CANDIDATES) + list(EXTRA)
    figures = {}
    for name in args.models.split(","):
        shapes = Shapes.of(AutoConfig.from_pretrained(resolve_spec(BUNDLED_PREFIX + name)))
        step_ms = time_formats(shapes, pairs, args.rounds)
        pick = min(BUNDLED_CANDIDATES, key=lambda pair: sum(step_ms[f"{pair[0]}/{pair[1]}"].values()))
        figures[name] = {"step_ms": step_ms, "auto": f"{pick[0]}/{pick[1]}"}
        print(f"\n{name}: estimated ms a decode step (auto picks {figures[name]['auto']})")
        print(f"{'dtype/weights':<22}{'1 row':>10}{'8 rows':>10}{'sum':>10}")
        for fmt, rows in sorted(step_ms.items(), key=lambda item: sum(item[1].values())):
            print(f"{fmt:<22}{rows['1']:>10.1f}{rows['8']:>10.1f}{sum(rows.values()):>10.1f}")
    summary = {
        "benchmark": "bench_formats",
        "torch_threads": torch.get_num_threads(),
        "models": figures,
        "cpu": cpu_description(),  # the CPU beside every figure (its caps when the run forced another class)
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
