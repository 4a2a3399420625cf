"""Repair from what failed against plain resampling, at equal time, on HumanEval (benchmarks/repair.py; app/search.py).

The problems are those the search drew further rounds for (no candidate of the first round passes every example of
the prompt: the rounds file of eval_search). From the same first round (the committed sample file) and under the
same rule (SearchSettings.why_stop: until a candidate passes every example, the budget runs short or the rounds run
out), each method draws its further rounds of k rows:

- resample: new samples of the prompt (a new seed per round, no greedy row), as the app's search does;
- repair: the best-ranked candidate that fails and has not been repaired yet is shown to the model with the
  examples it fails and what came back, and asked for again (the first row greedy, the others sampled);
- alternate: repair, then resample, and so on.

The methods run one after another on each problem (their order turning with the problem), on this machine, in one
run; the rounds are appended to --out (resumable). Every method's rows are ranked with the first round's, as the
app does, and scored on HumanEval (and HumanEval+ with --plus) with the time to the ranked result.

    python -m benchmarks.eval_repair --samples benchmarks/data/humaneval_shipped_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz \\
        --searched benchmarks/data/humaneval_search_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz \\
        --out benchmarks/data/humaneval_repair_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz --plus HumanEvalPlus-OriginFmt.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import numpy as np

from app.search import PASSED, SearchSettings, round_request
from benchmarks.eval_humaneval import (
    EvalSettings,
    _candidate_record,
    append_sample,
    code_version,
    evaluate,
    load_our_engine,
    load_problems,
    read_samples,
    with_greedy_row,
)
from benchmarks.eval_search import check_passes, first_round, merged
from benchmarks.humaneval_plus import plus_tests
from benchmarks.repair import RepairSettings, as_continuations, repair_request, repair_target
from benchmarks.sandbox import SandboxSettings
from checks import checks_for_prompt
from engine import GenerationResult
from engine.quant.cpu import cpu_description
from engine.types import FINISH_BUDGET
from rerank import RankSettings

METHODS = ("resample", "repair", "alternate")
EVERY = {"repair": 1, "alternate": 2}  # RepairSettings.every of the methods that repair


def next_round(method, request, rounds_done, left, texts, passed, n_checks, repaired, runner, problem, name):
    """The request of the next round and, for a repair, the text of the candidate it repairs (None: resampling)."""
    resample = round_request(request, rounds_done, left)
    if method == "resample" or not RepairSettings(every=EVERY[method]).repairs(rounds_done):
        return resample, None
    target = repair_target(texts, passed, n_checks, repaired)
    if target is None:
        return resample, None
    found = checks_for_prompt(problem["prompt"])
    (outcome,) = runner.run([problem["prompt"] + texts[target]], found)
    asked = repair_request(resample, texts[target], name, found, outcome)
    return (resample, None) if asked is None else (asked, texts[target])


def search_with(method: str, problem: dict, index: int, record: dict, engine, runner, rule: SearchSettings) -> dict:
    """One method's further rounds on one problem, from the record's first round."""
    from checks.extract import top_level_functions

    gen, request, passed, n_checks, spent, last = first_round(problem, index, record, runner)
    texts, rounds, repaired = [c["text"] for c in record["candidates"]], [], set()
    name = list(top_level_functions(problem["prompt"]))[-1]
    while True:
        left = gen.budget_s - spent
        reason = rule.why_stop(1 + len(rounds), left, last, passed if n_checks else None, n_checks, request)
        if reason is not None:
            break
        if engine[0] is None:
            engine[0] = load_our_engine(gen)
        start = time.monotonic()
        asked, target = next_round(
            method, request, 1 + len(rounds), left, texts, passed, n_checks, repaired, runner, problem, name
        )
        result = engine[0].generate(asked)
        candidates = [replace(c, finish_reason=c.finish_reason or FINISH_BUDGET) for c in result.candidates]
        if target is not None:
            repaired.add(target)
            candidates = as_continuations(
                GenerationResult(candidates, result.stats), problem["prompt"], name
            ).candidates
        more, _, _ = check_passes(runner, problem["prompt"], [c.text for c in candidates])
        passed += more
        texts += [c.text for c in candidates]
        last = time.monotonic() - start
        spent += last
        rounds.append(
            {
                "kind": "repair" if target is not None else "resample",
                "candidates": [_candidate_record(c, None if target else engine[0].tokenizer) for c in candidates],
                "stats": result.stats.as_dict(),
                "round_s": round(last, 3),
            }
        )
    return {"rounds": rounds, "total_s": round(spent, 3), "reason": reason}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", required=True, help="the first round: a committed sample file")
    parser.add_argument("--searched", required=True, help="eval_search's rounds: the problems it searched are run")
    parser.add_argument("--out", required=True, help="every method's rounds (appended; problems there are skipped)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--plus", help="HumanEvalPlus-OriginFmt.jsonl.gz: score on HumanEval+ too")
    parser.add_argument("--exec-cache", help="JSONL cache of execution results (eval_humaneval's)")
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"--methods: {', '.join(unknown)} unknown; choose from {', '.join(METHODS)}")
    from checks import CheckRunner

    runner = CheckRunner.create()
    if not runner.available:
        raise SystemExit(runner.reason)
    searched = {t for t, r in read_samples(args.searched).items() if r["rounds"]}
    samples = {t: with_greedy_row(r) for t, r in read_samples(args.samples).items()}
    problems = [(i, p) for i, p in enumerate(load_problems()) if p["task_id"] in searched]
    done, engine, rule = read_samples(args.out), [None], SearchSettings()
    for turn, (index, problem) in enumerate(problems):
        if problem["task_id"] in done:
            continue
        order = methods[turn % len(methods) :] + methods[: turn % len(methods)]
        runs = {m: search_with(m, problem, index, samples[problem["task_id"]], engine, runner, rule) for m in order}
        done[problem["task_id"]] = {"task_id": problem["task_id"], "methods": runs, "code_version": code_version()}
        append_sample(args.out, done[problem["task_id"]])
        said = ", ".join(f"{m} {len(r['rounds'])} rounds {r['total_s']:.1f} s" for m, r in runs.items())
        print(f"{problem['task_id']}: {said}", file=sys.stderr)
    if args.generate_only:
        return {}
    return report([p for _, p in problems], samples, done, methods, args)


def report(problems: list[dict], samples: dict, done: dict, methods: list[str], args) -> dict:
    """Pass@First of the first round alone and of each method's rounds ranked with it, and the time to the result."""
    sandbox, settings, ranker = SandboxSettings(), EvalSettings(static=True, checks=True), [RankSettings()]
    plus = plus_tests(args.plus) if args.plus else None
    label = RankSettings().label()
    summary = {"benchmark": "eval_repair", "n_problems": len(problems)}
    table = {"first round": ({t: samples[t] for t in done}, None)}
    for method in methods:
        table[method] = ({t: merged(samples[t], done[t]["methods"][method]) for t in done}, method)
    print(f"{'':<12} {'HumanEval':>10} {'HumanEval+':>11} {'passes all':>11} {'rounds':>7} {'s p50':>7}")
    for name, (records, method) in table.items():
        result = evaluate(problems, records, sandbox, settings, ranker, args.exec_cache, None, plus)
        base = result["rankers"][label]["mean"]
        plus_mean = result["humaneval_plus"]["rankers"][label]["mean"] if plus else None
        runs = [done[p["task_id"]]["methods"][method] for p in problems] if method else None
        found = sum(r["reason"] == PASSED for r in runs) if runs else 0
        rounds = sum(len(r["rounds"]) for r in runs) if runs else 0
        p50 = float(np.percentile([r["total_s"] for r in runs], 50)) if runs else None
        plus_text = f"{100 * plus_mean:10.1f}%" if plus_mean is not None else f"{'n/a':>11}"
        p50_text = f"{p50:7.1f}" if p50 is not None else f"{'':>7}"
        print(f"{name:<12} {100 * base:9.1f}% {plus_text} {found:>11} {rounds:>7} {p50_text}")
        summary[name] = {"humaneval": base, "humaneval_plus": plus_mean, "passes_all": found, "rounds": rounds}
        summary[name]["s_p50"] = p50
    summary["cpu"] = cpu_description()
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
