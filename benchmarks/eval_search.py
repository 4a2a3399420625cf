"""Search until the examples pass, on HumanEval: the app's rule (app/search.py) applied to a committed sample file.

Each problem's first round is its k candidates in --samples (the shipped configuration's). Where none passes every
example of the prompt (checks/, run confined) and the problem's budget has time left, further rounds of k rows are
drawn with our engine (the sample file's settings: model, draft, weights, temperature, max_new_tokens, budget; a new
seed per round, no greedy row), checked, until one passes, the budget ends or the rounds run out. The rounds are
appended to --out (resumable). Then every round's candidates are ranked together, as the app does, and scored on
HumanEval (and HumanEval+ with --plus) beside the first round alone; the time to the ranked result per problem
(generation of every round, and the checks) is reported at the median and p90.

    python -m benchmarks.eval_search --samples benchmarks/data/humaneval_shipped_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz \\
        --out benchmarks/data/humaneval_search_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz --plus HumanEvalPlus-OriginFmt.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import fields, replace

import numpy as np

from app.search import SearchSettings, round_request
from benchmarks.eval_humaneval import (
    EvalSettings,
    GenerationSettings,
    _candidate_record,
    _request,
    append_sample,
    code_version,
    evaluate,
    example_passes,
    load_our_engine,
    load_problems,
    read_samples,
    with_greedy_row,
)
from benchmarks.humaneval_plus import plus_tests
from benchmarks.sandbox import SandboxSettings
from engine.quant.cpu import cpu_description
from engine.types import FINISH_BUDGET
from rerank import RankSettings


def settings_of(record: dict) -> GenerationSettings:
    """The generation settings a sample record was made with."""
    known = {f.name for f in fields(GenerationSettings)}
    return GenerationSettings(**{name: value for name, value in record["settings"].items() if name in known})


def check_passes(runner, prompt: str, texts: list[str]) -> tuple[list[int], int, float]:
    """Checks each text passed of the prompt's examples, how many there are, and the seconds it took."""
    from checks import checks_for_prompt

    found = checks_for_prompt(prompt)
    start = time.monotonic()
    passed = example_passes(runner, prompt, texts, found)
    return passed, len(found), time.monotonic() - start


def first_round(problem: dict, index: int, record: dict, runner) -> tuple:
    """Where a problem's search starts from its sample record: the generation settings, the request, the checks each
    candidate passed and how many there are, the seconds spent (generation and checks) and the generation's."""
    gen = settings_of(record)
    passed, n_checks, check_s = check_passes(runner, problem["prompt"], [c["text"] for c in record["candidates"]])
    wall_s = record["stats"]["wall_s"]
    return gen, _request(problem, gen, index), passed, n_checks, wall_s + check_s, wall_s


def search_problem(problem: dict, index: int, record: dict, engine, runner, rule: SearchSettings) -> dict:
    """The further rounds of one problem (none where the rule says so), as the record appended to --out."""
    gen, request, passed, n_checks, spent, last = first_round(problem, index, record, runner)
    first_round_s, rounds = spent, []
    while True:
        left = gen.budget_s - spent
        reason = rule.why_stop(1 + len(rounds), left, last, passed if n_checks else None, n_checks, request)
        if reason is not None:
            break
        if engine[0] is None:
            engine[0] = load_our_engine(gen)
        result = engine[0].generate(round_request(request, 1 + len(rounds), left))
        candidates = [replace(c, finish_reason=c.finish_reason or FINISH_BUDGET) for c in result.candidates]
        more, _, more_s = check_passes(runner, problem["prompt"], [c.text for c in candidates])
        passed += more
        last = result.stats.wall_s
        spent += last + more_s
        rounds.append(
            {
                "candidates": [_candidate_record(c, engine[0].tokenizer) for c in candidates],
                "stats": result.stats.as_dict(),
                "check_s": round(more_s, 3),
            }
        )
    return {
        "task_id": problem["task_id"],
        "first_round_s": round(first_round_s, 3),
        "rounds": rounds,
        "total_s": round(spent, 3),
        "reason": reason,
        "settings": record["settings"],
        "code_version": code_version(),
    }


def merged(record: dict, searched: dict | None) -> dict:
    """The sample record with every further round's candidates after its own."""
    if not searched or not searched["rounds"]:
        return record
    more = [c for r in searched["rounds"] for c in r["candidates"]]
    return {**record, "candidates": record["candidates"] + more}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", required=True, help="the first round: a committed sample file")
    parser.add_argument("--out", required=True, help="the further rounds (appended; problems there are skipped)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--end", type=int, default=None)
    parser.add_argument("--max-rounds", type=int, default=SearchSettings().max_rounds)
    parser.add_argument("--plus", help="HumanEvalPlus-OriginFmt.jsonl.gz: score on HumanEval+ too")
    parser.add_argument("--exec-cache", help="JSONL cache of execution results (eval_humaneval's)")
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)
    from checks import CheckRunner

    runner = CheckRunner.create()
    if not runner.available:
        raise SystemExit(runner.reason)
    rule = SearchSettings(max_rounds=args.max_rounds)
    problems = load_problems(None, args.start, args.end)
    samples = {t: with_greedy_row(r) for t, r in read_samples(args.samples).items()}
    problems = [p for p in problems if p["task_id"] in samples]
    done, engine = read_samples(args.out), [None]
    for index, problem in enumerate(problems, start=args.start):
        if problem["task_id"] in done:
            continue
        searched = search_problem(problem, index, samples[problem["task_id"]], engine, runner, rule)
        append_sample(args.out, searched)
        done[problem["task_id"]] = searched
        if searched["rounds"]:
            print(
                f"{problem['task_id']}: {len(searched['rounds'])} more rounds, {searched['total_s']:.1f} s "
                f"({searched['reason']})",
                file=sys.stderr,
            )
    if args.generate_only:
        return {}
    return report(problems, samples, done, args)


def report(problems: list[dict], samples: dict, done: dict, args) -> dict:
    """HumanEval (and HumanEval+) Pass@First of the first round alone and of every round ranked together."""
    sandbox = SandboxSettings()
    settings = EvalSettings(static=True, checks=True)
    ranker = [RankSettings()]
    plus = plus_tests(args.plus) if args.plus else None
    print("== the first round alone ==")
    alone = evaluate(problems, samples, sandbox, settings, ranker, args.exec_cache, None, plus)
    print("== every round ranked together ==")
    together = {t: merged(samples[t], done.get(t)) for t in samples}
    searched = evaluate(problems, together, sandbox, settings, ranker, args.exec_cache, None, plus)
    first_s = np.array([samples[p["task_id"]]["stats"]["wall_s"] for p in problems])
    total_s = np.array([done[p["task_id"]]["total_s"] for p in problems])
    label = RankSettings().label()
    rows = {
        "first round": (alone, first_s),
        "search": (searched, total_s),
    }
    print(f"{'':<14} {'HumanEval':>10} {'HumanEval+':>11} {'s p50':>7} {'s p90':>7}")
    summary = {}
    for name, (result, seconds) in rows.items():
        base = result["rankers"][label]["mean"]
        plus_mean = result["humaneval_plus"]["rankers"][label]["mean"] if plus else None
        p50, p90 = (float(np.percentile(seconds, q)) for q in (50, 90))
        plus_text = f"{100 * plus_mean:10.1f}%" if plus_mean is not None else f"{'n/a':>11}"
        print(f"{name:<14} {100 * base:9.1f}% {plus_text} {p50:7.2f} {p90:7.2f}")
        summary[name] = {"humaneval": base, "humaneval_plus": plus_mean, "s_p50": p50, "s_p90": p90}
    searched_ids = [t for t, s in done.items() if s["rounds"]]
    summary.update(
        {
            "benchmark": "eval_search",
            "n_problems": len(problems),
            "searched_problems": len(searched_ids),
            "rounds_drawn": sum(len(done[t]["rounds"]) for t in searched_ids),
            "reasons": {r: sum(s["reason"] == r for s in done.values()) for r in {s["reason"] for s in done.values()}},
            "cpu": cpu_description(),
        }
    )
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
