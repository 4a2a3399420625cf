"""The linear-layer kernels behind --weights, as decoding uses them: ms per call by token rows, with the weights
streamed from memory (more distinct layers than the CPU's caches hold, as in a forward pass of a real model).

    python -m benchmarks.bench_kernels --rows 1,2,4,8,16

Formats: the dense weight in --dtype (torch.nn.functional.linear), int8 (engine.quant.weights.Int8Linear's kernel),
int4 (Int4Linear's) and w8a8 (DynamicInt8Linear's: 8-bit activations too), each on the same random weights,
interleaved call by call. The rows at which a small format stops beating the dense weight set INT8_MAX_ROWS,
INT4_MAX_ROWS and W8A8_MAX_ROWS in engine/quant/kernels.py.
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

from engine.quant.cpu import cpu_description
from engine.quant.weights import DynamicInt8Linear, FourBitGrid, Int4Linear, Int8Linear

FORMATS = ("dense", "int8", "int4", "w8a8")
SMALL = FORMATS[1:]


def layers(count: int, out_features: int, in_features: int, dtype: torch.dtype) -> dict[str, list[nn.Module]]:
    """`count` random layers per format; int4 layers get weights on a 4-bit grid (as a Q4 GGUF's), so the formats
    compute the same products (w8a8 up to its rounding of the activations)."""
    made = {name: [] for name in FORMATS}
    for _ in range(count):
        linear = nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            grid = FourBitGrid.fit(linear.weight, tolerance=None)
            values = grid.low.repeat_interleave(grid.group, 1) + grid.codes * grid.step.repeat_interleave(grid.group, 1)
            linear.weight.copy_(values)
        linear = linear.to(dtype)
        made["dense"].append(linear)
        made["int8"].append(Int8Linear(linear, max_rows=None))
        made["int4"].append(Int4Linear(linear, FourBitGrid.fit(linear.weight), max_rows=None))
        made["w8a8"].append(DynamicInt8Linear(linear, max_rows=None))
    return made


def time_calls(modules: list[nn.Module], x: torch.Tensor) -> float:
    """ms per call, one call to each module in turn."""
    started = time.perf_counter()
    with torch.inference_mode():
        for module in modules:
            module(x)
    return (time.perf_counter() - started) / len(modules) * 1e3


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1,2,4,8,16", help="token rows per call, comma-separated")
    parser.add_argument("--shape", default="8960x1536", help="out x in of each layer (default: the 1.5B's MLP)")
    parser.add_argument("--layers", type=int, default=24, help="distinct layers per format (more than the caches)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    args = parser.parse_args(argv)
    out_features, in_features = (int(v) for v in args.shape.split("x"))
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    made = layers(args.layers, out_features, in_features, dtype)
    results = {}
    print(
        f"{'rows':>5}"
        + "".join(f"{name + ' ms':>12}" for name in FORMATS)
        + "".join(f"{name + ' x':>9}" for name in SMALL)
    )
    for rows in [int(r) for r in args.rows.split(",")]:
        x = torch.randn(rows, in_features, dtype=dtype)
        samples = {name: [] for name in FORMATS}
        for _ in range(args.repeats + 1):  # the first round warms up
            for name in FORMATS:  # interleaved: the machine's noise hits all formats alike
                samples[name].append(time_calls(made[name], x))
        median = {name: sorted(times[1:])[len(times[1:]) // 2] for name, times in samples.items()}
        results[rows] = {name: round(ms, 4) for name, ms in median.items()}
        print(
            f"{rows:>5}"
            + "".join(f"{median[name]:>12.3f}" for name in FORMATS)
            + "".join(f"{median['dense'] / median[name]:>9.2f}" for name in SMALL)
        )
    summary = {
        "benchmark": "bench_kernels",
        "shape": args.shape,
        "layers": args.layers,
        "dtype": args.dtype,
        "torch_threads": torch.get_num_threads(),
        "ms_per_call": results,
    }
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
