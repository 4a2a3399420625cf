"""What `torch.compile` of the decode step would buy on this CPU (issue 46, item 2): the bundled 1.5B's one-token
decode step, at 1 and 8 rows, eager against compiled by inductor, over transformers' StaticCache (a fixed-capacity
cache written by position: the shape a compiled step needs, since our ragged cache reads its rows' lengths back to
Python in every layer). Beside it our engine's own whole step (regular decoding) in the same format, so the three
figures compare like with like.

    python -m benchmarks.bench_compile --formats bfloat16/native,bfloat16/int4,bfloat16/int8,bfloat16/int4-w8a8
    ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python -m benchmarks.bench_compile --formats float32/native,float32/int8,float32/w8a8

- eager / compiled: ms a step of the model's forward on one new token per row, the cache at positions 64..64+n,
  the median of `--steps` steps after a warm-up; compiled: `torch.compile(forward, fullgraph=True)` with the
  positions as tensors (one graph for every step), its first call's seconds reported as the compile time.
- ours: the engine's regular decoding of a 64-token greedy (1 row) / sampled (8 rows) generation, wall time after
  the prompt over the longest row's tokens (bench_roofline's `measured`).
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch._inductor.config
from transformers import StaticCache

from benchmarks.bench_roofline import MODEL, measured_ms
from engine import EngineSettings, load_engine
from engine.models.loading import BUNDLED_PREFIX
from engine.quant.cpu import cpu_description

PAST = 64  # cached positions before the timed steps


def step_ms(model, rows: int, steps: int, compiled: bool) -> tuple[float, float]:
    """(median ms a decode step, seconds of the first call) for `rows` rows over a StaticCache."""
    cache = StaticCache(config=model.config, max_cache_len=PAST + steps + 8)
    forward = torch.compile(model.forward, fullgraph=True) if compiled else model.forward
    tokens = torch.randint(0, model.config.vocab_size, (rows, PAST))
    with torch.inference_mode():
        model(input_ids=tokens, past_key_values=cache, use_cache=True, cache_position=torch.arange(PAST))
        times, first = [], 0.0
        for step in range(steps + 2):
            position = torch.tensor([PAST + step])
            started = time.perf_counter()
            out = forward(
                input_ids=tokens[:, -1:],
                past_key_values=cache,
                use_cache=True,
                cache_position=position,
                position_ids=position.expand(rows, 1),
            )
            out.logits.argmax(-1)
            elapsed = time.perf_counter() - started
            first = first or elapsed
            if step >= 2:  # the first calls compile (and warm)
                times.append(elapsed * 1e3)
    return statistics.median(times), first


def measure_format(dtype: str, weights: str, steps: int, batches: list[int]) -> dict:
    """{rows: {ours_ms, eager_ms, compiled_ms, compile_s}} for the bundled 1.5B in one format."""
    engine = load_engine(BUNDLED_PREFIX + MODEL, settings=EngineSettings(drafter="none"), dtype=dtype, weights=weights)
    rows = {}
    for k in batches:
        eager, _ = step_ms(engine.model, k, steps, compiled=False)
        try:
            compiled, compile_s = step_ms(engine.model, k, steps, compiled=True)
        except Exception as err:  # noqa: BLE001 -- a format inductor cannot take is a result, reported
            print(f"{dtype}/{weights}, {k} rows: compile failed: {type(err).__name__}: {str(err)[:300]}")
            compiled, compile_s = float("nan"), float("nan")
        eager_again, _ = step_ms(engine.model, k, steps, compiled=False)  # interleaved: eager before and after
        rows[str(k)] = {
            "eager_ms": round(min(eager, eager_again), 1),
            "compiled_ms": round(compiled, 1),
            "compile_s": round(compile_s, 1),
        }
        torch._dynamo.reset()
    ours = measured_ms(engine, rounds=2)
    for k, row in rows.items():
        row["ours_ms"] = ours.get(k)
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", default="bfloat16/native,bfloat16/int4,bfloat16/int8,bfloat16/int4-w8a8")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--cpp-wrapper", action="store_true", help="inductor's C++ wrapper (no Python between kernels)")
    parser.add_argument("--rows", default="1,8", help="rows a step, comma-separated")
    args = parser.parse_args(argv)
    torch._inductor.config.cpp_wrapper = args.cpp_wrapper
    cpu = cpu_description()
    print(f"CPU: {cpu}; {torch.get_num_threads()} threads")
    results = {}
    for spec in args.formats.split(","):
        dtype, weights = spec.split("/")
        results[spec] = measure_format(dtype, weights, args.steps, [int(k) for k in args.rows.split(",")])
    print("| format | rows | ours, whole step | HF eager forward | compiled forward | first compile |")
    print("| --- | --- | --- | --- | --- | --- |")
    for spec, rows in results.items():
        for k, row in rows.items():
            print(
                f"| {spec} | {k} | {row['ours_ms']} ms | {row['eager_ms']} ms | {row['compiled_ms']} ms "
                f"| {row['compile_s']} s |"
            )
    result = {"cpu": cpu, "cpp_wrapper": args.cpp_wrapper, "formats": results}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
