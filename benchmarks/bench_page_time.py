"""Where a ranked answer's seconds go (issue 46, item 4): the page's path (the request the page builds, the shipped
pipeline: static analysis, the examples run in the sandbox, the search, the model's reader of examples, the answers'
own checks) on held-out HumanEval prompts, at k=1 greedy and at k, in one process with the bundled pair in the
format `auto` keeps on this CPU, each request's prompt read cold (the prefix caches emptied before it).

    python -m benchmarks.bench_page_time --first 120 --prompts 4 --k 8

Per run: the request's whole time, when its first answer is shown (the first finished row: the page's "best so far"
from then on), and of the whole time the generation (prompt reading apart), the static analysis, the checks
(the prompt's examples, the answers' own checks) and the ranking; the search's rounds; the rows' tokens (the longest
row, the mean row) and the longest row's share of all generated tokens. k=1 and k alternate prompt by prompt.
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from app.model_checks import FORMS as MODEL_TEST_FORMS
from app.model_checks import model_tests
from app.model_examples import ExampleReaderSettings
from app.requests import build_checks, build_request
from app.service import Pipeline
from benchmarks.eval_humaneval import load_problems
from checks import CheckRunner
from engine import load_engine
from engine.models.loading import DEFAULT_DRAFT, DEFAULT_TARGET
from engine.quant.cpu import cpu_description
from static_eval import AnalyzerSettings, StaticAnalyzer

PAGE = {"budget_s": 120, "temperature": 0.8, "max_new_tokens": 384, "top_p": 0.95}  # the page's defaults, budget
# raised so that no run is cut by the deadline (the figures are where time goes, not what fits in it)


class Recorded:
    """A candidate source that keeps what each of its generate() calls returned (the first round's rows, the
    search's, the reader's and the model's tests' answers), in order."""

    def __init__(self, engine):
        self.engine, self.results = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, request, on_update=None, should_stop=None):
        result = self.engine.generate(request, on_update, should_stop)
        self.results.append((request, result))
        return result


def one_run(pipeline: Pipeline, engine, prompt: str, k: int) -> dict:
    """The breakdown of one page request of `k` rows, its prompt read cold (the prefix caches emptied first; within
    the request they hold what they would in the app: the search's rounds and the model's tests read less)."""
    for cache in (engine.prefix_cache, engine.draft_prefix_cache):
        if cache is not None:
            cache.clear()
    engine = Recorded(engine)
    request = build_request(
        prompt,
        k=k,
        budget_s=PAGE["budget_s"],
        temperature=PAGE["temperature"] if k > 1 else 0.0,
        max_new_tokens=PAGE["max_new_tokens"],
        top_p=PAGE["top_p"],
        seed=k,
    )
    started, first_shown = time.perf_counter(), []

    def heard(partial) -> None:  # the page's leader ("best so far") exists from the first finished row on
        if not first_shown and any(c.finish_reason is not None for c in partial.candidates):
            first_shown.append(time.perf_counter() - started)

    result = pipeline.run(engine, request, on_update=heard, checks=build_checks(language=request.language))
    total = time.perf_counter() - started
    spent = result.timings
    first = engine.results[0][1]  # the first round's rows
    lengths = [len(c.token_ids) for c in first.candidates]
    others = engine.results[1:]  # the search's rounds and the model's reader, in the generation's seconds
    return {
        "total_s": round(total, 2),
        "first_shown_s": round(first_shown[0] if first_shown else total, 2),
        "prompt_s": round(first.stats.prefill_s, 2),
        "decode_s": round(first.stats.wall_s - first.stats.prefill_s, 2),
        "more_generation_s": round(sum(r.stats.wall_s for _, r in others), 2),
        "analysis_s": round(spent.analysis_s, 2),
        "checks_s": round(spent.checks_s, 2),
        "ranking_s": round(spent.ranking_s, 2),
        "other_s": round(
            total
            - sum(r.stats.wall_s for _, r in engine.results)
            - spent.analysis_s
            - spent.checks_s
            - spent.ranking_s,
            2,
        ),
        "rounds": result.search.rounds,
        "longest_row": max(lengths),
        "mean_row": round(statistics.mean(lengths), 1),
        "longest_share": round(max(lengths) / max(sum(lengths), 1), 2),
        "steps": first.stats.forward_passes,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", type=int, default=120, help="the first HumanEval problem (held out: 120 on)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument(
        "--problems", help="JSONL of HumanEval-shaped prompts (e.g. rephrase_examples --write-stripped)"
    )
    parser.add_argument(
        "--model-tests",
        choices=MODEL_TEST_FORMS,
        help="a third run per prompt: k rows with the model's tests in this form (app/model_checks.py)",
    )
    parser.add_argument(
        "--unsettled", action="store_true", help="a third run per prompt: k rows without the settled rule"
    )
    args = parser.parse_args(argv)
    if args.k < 2:
        parser.error(f"--k {args.k}: give 2 or more (k=1 greedy is always measured beside it)")
    cpu = cpu_description()
    engine = load_engine(DEFAULT_TARGET, DEFAULT_DRAFT, weights="auto")
    analyzer = StaticAnalyzer(AnalyzerSettings())
    pipeline = Pipeline(analyzer=analyzer, checker=CheckRunner.create(), example_reader=ExampleReaderSettings())
    problems = load_problems(args.problems, start=args.first, end=args.first + args.prompts + 1)
    arms = {"1": (pipeline, 1), str(args.k): (pipeline, args.k)}
    if args.unsettled:
        arms[f"{args.k} unsettled"] = (replace(pipeline, settle=False), args.k)
    if args.model_tests:
        arms[f"{args.k} {args.model_tests}"] = (replace(pipeline, model_tests=model_tests(args.model_tests)), args.k)
    for each, k in arms.values():  # untimed: a running app has paid its first calls
        one_run(each, engine, problems[-1]["prompt"], k)
    runs = {arm: [] for arm in arms}
    try:
        for problem in problems[:-1]:
            for arm, (each, k) in arms.items():
                runs[arm].append(one_run(each, engine, problem["prompt"], k))
    finally:
        analyzer.close()
    medians = {
        k: {key: round(statistics.median(r[key] for r in rows), 2) for key in rows[0]} for k, rows in runs.items()
    }
    print(f"CPU: {cpu}; format: {getattr(engine.model, 'weight_format', 'native')}/{engine.model.dtype}")
    keys = list(medians["1"])
    print("| k | " + " | ".join(keys) + " |")
    print("| --- " * (len(keys) + 1) + "|")
    for k, row in medians.items():
        print(f"| {k} | " + " | ".join(str(row[key]) for key in keys) + " |")
    ratios = {arm: round(medians[arm]["total_s"] / medians["1"]["total_s"], 2) for arm in list(arms)[1:]}
    for arm, ratio in ratios.items():
        print(f"k={arm} / k=1 (medians of the whole request): {ratio}x")
    shown = round(medians[str(args.k)]["first_shown_s"] / medians["1"]["total_s"], 2)
    print(f"k={args.k}'s first answer shown (the page's best so far) / k=1's whole request: {shown}x")
    result = {"benchmark": "bench_page_time", "cpu": cpu, "runs": runs, "medians": medians,
              "ratio": ratios[str(args.k)], "ratios": ratios, "first_shown_ratio": shown}  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
