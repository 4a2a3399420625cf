"""What the lean layers buy (engine/models/lean.py, issue 46): the bundled 1.5B loaded twice in one weight format, with
transformers' own decoder layers and with the lean ones (their same-input projections stacked), timed in one process
with the two alternating round by round, so that the machine's noise falls on both alike.

    python -m benchmarks.bench_lean [--weights int4-w8a8] [--rounds 8]

- same numbers: the two models' logits for a prompt and for a step of 1 and of 8 token rows, compared bit for bit.
- ms a step: regular decoding (no drafts), bench_roofline's prompt, 64 new tokens, k=1 greedy and k=8 sampled: wall
  time after the prompt over the longest row's tokens; the median of the rounds, and each round's pair.
- profile: bench_roofline's, ms a step by kind of operator at 1 and 8 rows, for each.
Prints tables and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from benchmarks.bench_roofline import MODEL, profile_step, step_ms
from engine import EngineSettings
from engine.generate import forward
from engine.kv_cache import RaggedKVCache
from engine.models.build import build_engine, load_any
from engine.models.loading import BUNDLED_PREFIX
from engine.quant.cpu import cpu_description
from engine.quant.weights import apply_weight_format

LAYERS = ("transformers", "lean")


def same_logits(engines: dict) -> bool:
    """Whether both models give the same logits, bit for bit, for a 19-token prompt and then one token, in a batch
    of one row and of eight."""
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (8, 20))
    for rows in (1, 8):
        outputs = []
        for engine in engines.values():
            model = engine.model
            cache = RaggedKVCache(model.config.num_hidden_layers, rows, torch.device("cpu"), 32)
            prompt = forward(model, cache, ids[:rows, :19])
            cache.lengths += 19
            outputs.append((prompt, forward(model, cache, ids[:rows, 19:])))
        (a_prompt, a_step), (b_prompt, b_step) = outputs
        if not (torch.equal(a_prompt, b_prompt) and torch.equal(a_step, b_step)):
            return False
    return True


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--weights", default="int4-w8a8", help="a weight format (lean layers come with one)")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds (each: both, in alternating order)")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args(argv)
    engines = {}
    for layers in LAYERS:
        model, tokenizer = load_any(BUNDLED_PREFIX + MODEL, progress=False, dtype=args.dtype)
        model = apply_weight_format(model, args.weights, lean=layers == "lean")
        engines[layers] = build_engine((model, tokenizer), None, MODEL, settings=EngineSettings(drafter="none"))
    same = same_logits(engines)
    times = {layers: {"1": [], "8": []} for layers in LAYERS}
    for round_ in range(args.rounds + 1):  # the first round warms up
        order = LAYERS if round_ % 2 else LAYERS[::-1]
        for layers in order:
            for k in ("1", "8"):
                ms = step_ms(engines[layers], int(k), round_)
                if round_:
                    times[layers][k].append(round(ms, 1))
    medians = {layers: {k: round(statistics.median(v), 1) for k, v in t.items()} for layers, t in times.items()}
    profiles = {}
    if not args.no_profile:
        profiles = {layers: {k: profile_step(engines[layers], int(k)) for k in ("1", "8")} for layers in LAYERS}
    _print(args, same, medians, times, profiles)
    summary = {
        "benchmark": "bench_lean",
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(),
        "format": f"{args.dtype}/{args.weights}",
        "same_logits": same,
        "ms_a_step": medians,
        "rounds": times,
        "profile": profiles,
    }
    print(json.dumps(summary))
    return summary


def _print(args, same: bool, medians: dict, times: dict, profiles: dict) -> None:
    print(f"CPU: {cpu_description()}; {torch.get_num_threads()} threads; {args.dtype}/{args.weights}")
    print(f"same logits (prompt, 1 and 8 rows): {same}")
    print(f"{'layers':<14} {'ms 1 row':>9} {'ms 8 rows':>10}")
    for layers, ms in medians.items():
        print(f"{layers:<14} {ms['1']:>9} {ms['8']:>10}")
    for k in ("1", "8"):
        faster = sum(b < a for a, b in zip(times["transformers"][k], times["lean"][k]))
        ratio = medians["transformers"][k] / medians["lean"][k]
        print(f"{k} row(s): lean {ratio:.3f}x as fast, faster in {faster} of {len(times['lean'][k])} rounds")
    for layers, by_rows in profiles.items():
        for k, kinds in by_rows.items():
            print(f"profile {layers}, {k} row(s), ms a step: " + ", ".join(f"{n} {v}" for n, v in kinds.items()))


if __name__ == "__main__":
    main()
