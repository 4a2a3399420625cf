"""What `auto` weighs at a model's first start: the estimated decode step of each (dtype, weight format) of the
bundled models on this machine, timed as engine/quant/calibrate.py times them (one decoder layer's linear layers in
the model's shapes, random weights, interleaved), for 1 and 8 token rows, and the format `auto` picks.

    python -m benchmarks.bench_formats
    python -m benchmarks.bench_formats --models qwen2.5-coder-1.5b --check 3   # and the 3 fastest, end to end
    ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python -m benchmarks.bench_formats      # the same machine run as an AVX2-only CPU

`--check N` loads the model in the N fastest of auto's candidates and times real decoding with its real weights
(regular decoding, a function's prompt, 64 new tokens, k=1 greedy and k=8 sampled, formats interleaved): ms a step
is wall time over the longest row's tokens, so the estimate can be held against it.
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from transformers import AutoConfig

from engine import EngineSettings, GenerationRequest, load_engine
from engine.models.loading import BUNDLED_PREFIX, resolve_spec
from engine.quant.calibrate import ROUNDS, Shapes, candidates_for, pick, time_formats
from engine.quant.cpu import cpu_description

MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
PROMPT = 'def running_mean(values: list[float]) -> list[float]:\n    """The mean of each prefix of values."""\n'
EXTRA = (("float32", "int4"), ("float32", "int4-w8a8"), ("bfloat16", "int8"))  # timed to show them, never auto's pick


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="bundled model names, comma-separated")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per format (the median counts)")
    parser.add_argument("--check", type=int, default=0, help="time the N fastest candidates end to end")
    parser.add_argument("--check-formats", default="", help="or these dtype/weights, comma-separated")
    args = parser.parse_args(argv)
    pairs = candidates_for(True, "auto", "auto") + list(EXTRA)
    figures = {}
    for name in args.models.split(","):
        shapes = Shapes.of(AutoConfig.from_pretrained(resolve_spec(BUNDLED_PREFIX + name)))
        step_ms = time_formats(shapes, pairs, args.rounds)
        offered = [pair for pair in candidates_for(True, "auto", "auto") if f"{pair[0]}/{pair[1]}" in step_ms]
        chosen = pick(offered, step_ms)
        figures[name] = {"step_ms": step_ms, "auto": f"{chosen[0]}/{chosen[1]}"}
        print(f"\n{name}: estimated ms a decode step (auto picks {figures[name]['auto']})")
        print(f"{'dtype/weights':<22}{'1 row':>10}{'8 rows':>10}{'sum':>10}")
        for fmt, rows in sorted(step_ms.items(), key=lambda item: sum(item[1].values())):
            print(f"{fmt:<22}{rows['1']:>10.1f}{rows['8']:>10.1f}{sum(rows.values()):>10.1f}")
        fastest = sorted(offered, key=lambda pair: sum(step_ms[f"{pair[0]}/{pair[1]}"].values()))
        checked = [tuple(f.split("/")) for f in args.check_formats.split(",") if f] or fastest[: args.check]
        if checked:
            figures[name]["measured_ms"] = end_to_end(name, checked, args.rounds)
    summary = {
        "benchmark": "bench_formats",
        "torch_threads": torch.get_num_threads(),
        "models": figures,
        "cpu": cpu_description(),  # the CPU beside every figure (its caps when the run forced another class)
    }
    print(json.dumps(summary))
    return summary


def end_to_end(name: str, pairs: list[tuple[str, str]], rounds: int) -> dict[str, dict[str, float]]:
    """ms a decode step of real generation in each (dtype, weights): {"dtype/weights": {"1": ms, "8": ms}}."""
    engines = {
        f"{dtype}/{weights}": load_engine(
            BUNDLED_PREFIX + name, dtype=dtype, weights=weights, settings=EngineSettings(drafter="none")
        )
        for dtype, weights in pairs
    }
    samples = {fmt: {"1": [], "8": []} for fmt in engines}
    for round_ in range(rounds + 1):  # the first round warms up
        for k in (1, 8):
            for fmt, engine in engines.items():
                request = GenerationRequest(
                    PROMPT,
                    k=k,
                    max_new_tokens=64,
                    budget_s=600,
                    temperature=0.0 if k == 1 else 0.8,
                    seed=round_,
                    stop_at_body_end=False,
                )
                result = engine.generate(request)
                steps = max(len(c.token_ids) for c in result.candidates)
                if round_:
                    samples[fmt][str(k)].append((result.stats.wall_s - result.stats.prefill_s) / steps * 1e3)
    measured = {fmt: {k: round(statistics.median(v), 1) for k, v in rows.items()} for fmt, rows in samples.items()}
    print(f"\n{name}: measured ms a decode step, real weights, regular decoding")
    for fmt, rows in measured.items():
        print(f"{fmt:<22}{rows['1']:>10.1f}{rows['8']:>10.1f}{sum(rows.values()):>10.1f}")
    return measured


if __name__ == "__main__":
    main()
