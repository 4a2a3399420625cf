"""Tests where the user wrote none (CodeT), on HumanEval: the model writes asserts for each problem's function
(app/model_checks.py, from the prompt with every docstring example taken out), the candidates of a sample file run
on them (confined, checks/), and dual agreement (rerank/agreement.py) ranks them next after the user's checks.

Scored side by side on the same candidates: the model's greedy answer, the ranking without checks, the ranking with
the model's tests; with --examples, the prompt's own examples first (the app's ranking) and the model's tests after.

    python -m benchmarks.rephrase_examples --samples x --write-stripped stripped.jsonl
    python -m benchmarks.eval_codet --problems stripped.jsonl --tests-out tests.jsonl.gz \\
        --samples humaneval_stripped_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz

With --form continuation the model is not asked in words: it goes on past the greedy candidate of --samples into
an assert line a row (app/model_checks.continuation_request), as `python app.py --model-tests continuation` does.
The committed continuation tests were written with --write-rows 8; the app's 4 rows are scored with --rows 4:

    python -m benchmarks.eval_codet --form continuation --rows 4 --no-generate --problems stripped.jsonl \\
        --tests-out benchmarks/data/humaneval_stripped_continued_tests_qwen2.5-coder-1.5b.jsonl.gz \\
        --samples benchmarks/data/humaneval_stripped_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz

With --form tails the tests are the assert lines the candidates of --samples wrote past their own code in their own
batch (samples from `eval_humaneval --tails`, as the app's continuation form writes them now); nothing is generated:

    python -m benchmarks.eval_codet --form tails --problems stripped.jsonl --samples TAILS
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import numpy as np

from app.model_checks import (
    CONTINUED,
    ModelCheckSettings,
    continued_checks,
    tail_checks,
    tested_function,
    tests_asked,
    tests_written,
)
from benchmarks.eval_humaneval import (
    SHIPPED_ENGINE,
    GenerationSettings,
    append_sample,
    code_version,
    example_passes,
    execute,
    load_our_engine,
    load_problems,
    read_samples,
    static_reports,
    with_greedy_row,
)
from benchmarks.humaneval_plus import plus_tests
from benchmarks.sandbox import SandboxSettings
from checks import Check, checks_for_prompt
from checks.runner import PASSED
from engine import Candidate, GenerationRequest, GenerationResult, GenerationStats
from engine.quant.cpu import cpu_description
from rerank import Evidence, dual_agreement, rank

# the tests asked for in words (CodeT), written on past the greedy candidate, or each candidate's own tail (the samples
# generated with `eval_humaneval --tails`: the app's continuation form)
FORMS = ("chat", "continuation", "tails")


def generate_tests(
    problems: list[dict], gen: GenerationSettings, out: str, settings: ModelCheckSettings, greedy: dict | None = None
) -> None:
    """The model's asserts for every problem's function, appended to `out` (problems there are skipped). With
    `greedy` (task id -> the greedy candidate's text) the model goes on past that candidate into asserts
    (app/model_checks.continuation_request) instead of being asked for them in words."""
    done, engine = set(read_samples(out)), None
    for problem in problems:
        if problem["task_id"] in done:
            continue
        engine = engine or load_our_engine(gen)
        request = GenerationRequest(problem["prompt"], budget_s=gen.budget_s, max_new_tokens=gen.max_new_tokens)
        program = problem["prompt"] + greedy[problem["task_id"]] if greedy is not None else None
        asked = tests_asked(request, program, settings)
        start = time.monotonic()
        result = engine.generate(asked)
        found = tests_written(asked, result, tested_function(request), program, settings)
        append_sample(
            out,
            {
                "task_id": problem["task_id"],
                "checks": [c.as_dict() for c in found],
                "answers": [c.text for c in result.candidates],
                "wall_s": round(time.monotonic() - start, 3),
                "prompt_tokens": result.stats.prompt_tokens,
                "generated_tokens": result.stats.generated_tokens,
                "code_version": code_version(),
            },
        )
        print(f"{problem['task_id']}: {len(found)} asserts in {time.monotonic() - start:.1f} s", file=sys.stderr)


def first_rows(tests: dict, stripped: dict, records: dict, rows: int) -> dict:
    """The continuation tests as the first `rows` answers of each problem state them (continued_checks again)."""
    again = {}
    for task_id, record in tests.items():
        problem, answers = stripped[task_id], record["answers"][:rows]
        program = problem["prompt"] + records[task_id]["candidates"][0]["text"]
        rows_read = GenerationResult([Candidate(a) for a in answers], GenerationStats())
        found = continued_checks(rows_read, program, problem["entry_point"])
        again[task_id] = {**record, "checks": [c.as_dict() for c in found]}
    return again


def tails_read(records: dict, stripped: dict) -> dict:
    """The tests each problem's candidates wrote in their tails (app/model_checks.tail_checks)."""
    tests = {}
    for task_id, record in records.items():
        rows = [Candidate(c["text"], tail=c.get("tail")) for c in record["candidates"]]
        found = tail_checks(GenerationResult(rows, GenerationStats()), stripped[task_id]["entry_point"])
        tests[task_id] = {"checks": [c.as_dict() for c in found], "wall_s": 0.0}
    return tests


def picks(problems, records, tests, runner, with_examples: bool, reports) -> tuple[dict, dict, dict]:
    """Per problem: the first pick without checks, with the model's tests, and the test-running seconds."""
    plain, codet, seconds = {}, {}, {}
    for problem in problems:
        task_id, record = problem["task_id"], records[problem["task_id"]]
        texts = [c["text"] for c in record["candidates"]]
        programs = [problem["prompt"] + t for t in texts]
        examples = checks_for_prompt(problem["prompt"]) if with_examples else []
        passes = example_passes(runner, problem["prompt"], texts, examples) if examples else None
        model = [Check.from_dict(c) for c in tests[task_id]["checks"]]
        start = time.monotonic()
        outcomes = runner.run(programs, model) if model else []
        seconds[task_id] = time.monotonic() - start
        passed = [tuple(o.status == PASSED for o in c.outcomes) for c in outcomes] if model else None
        agreement = dual_agreement(passed) if passed else None
        problem_reports = reports.get(task_id) if reports else None
        checks = Evidence("checks_passed", passes)
        plain[task_id] = rank(texts, None, problem_reports, evidence=[checks])[0].indices[0]
        codet[task_id] = rank(texts, None, problem_reports, evidence=[checks, Evidence("agreement", agreement)])[
            0
        ].indices[0]
    return plain, codet, seconds


def score(problems, records, outcomes, chosen: dict) -> list[float]:
    return [float(outcomes[p["task_id"]]["candidates"][chosen[p["task_id"]]].passed) for p in problems]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", required=True, help="JSONL of the prompts the tests are written from")
    parser.add_argument("--tests-out", help="the model's tests (appended; resumable); not with --form tails")
    parser.add_argument("--samples", help="candidates to rank (their own prompts: --problems, or --examples)")
    parser.add_argument("--examples", action="store_true", help="the samples are of the original prompts")
    parser.add_argument("--plus", help="HumanEvalPlus-OriginFmt.jsonl.gz: score on HumanEval+ too")
    parser.add_argument("--exec-cache")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--no-generate", action="store_true", help="score the problems that have tests, write none")
    parser.add_argument("--write-rows", type=int, help="continuation: rows asked for (default: the app's)")
    parser.add_argument(
        "--rows",
        type=int,
        help="continuation: read the checks again from each problem's first ROWS answers only (fewer rows)",
    )
    parser.add_argument(
        "--form",
        choices=FORMS,
        default="chat",
        help="chat: the tests asked for in words (CodeT, the app's --model-tests); continuation: the model goes on "
        "past the greedy candidate of --samples into assert lines; tails: the assert line each candidate of --samples "
        "wrote past its own code (eval_humaneval --tails), no --tests-out",
    )
    args = parser.parse_args(argv)
    gen = SHIPPED_ENGINE
    stripped = load_problems(args.problems)
    if args.form != "tails" and not args.tests_out:
        parser.error(f"--form {args.form} needs --tests-out")
    if not args.no_generate and args.form != "tails":
        if args.form == "chat":
            generate_tests(stripped, gen, args.tests_out, ModelCheckSettings())
        else:
            greedy = {t: with_greedy_row(r)["candidates"][0]["text"] for t, r in read_samples(args.samples).items()}
            settings = replace(CONTINUED, rows=args.write_rows or CONTINUED.rows)
            generate_tests([p for p in stripped if p["task_id"] in greedy], gen, args.tests_out, settings, greedy)
    if args.generate_only or not args.samples:
        return {}
    from checks import CheckRunner

    runner = CheckRunner.create()
    if not runner.available:
        raise SystemExit(runner.reason)
    problems = load_problems() if args.examples else stripped
    records = {t: with_greedy_row(r) for t, r in read_samples(args.samples).items()}
    stripped_by_id = {p["task_id"]: p for p in stripped}
    tests = read_samples(args.tests_out) if args.form != "tails" else tails_read(records, stripped_by_id)
    problems = [p for p in problems if p["task_id"] in records and p["task_id"] in tests]
    if args.rows:
        tests = first_rows(tests, stripped_by_id, records, args.rows)
    reports = static_reports(problems, records)
    plain, codet, seconds = picks(problems, records, tests, runner, args.examples, reports)
    summary = {"benchmark": "eval_codet", "n_problems": len(problems), "examples": args.examples}
    scorers = {"HumanEval": None} | ({"HumanEval+": plus_tests(args.plus)} if args.plus else {})
    print(f"{'':<34} " + " ".join(f"{name:>11}" for name in scorers))
    lines = {}
    for plus in scorers.values():
        scored = [{**p, "test": plus[p["task_id"]]} if plus else p for p in problems]
        sandbox = SandboxSettings(timeout_s=20.0 if plus else 5.0)
        outcomes = execute(scored, records, sandbox, args.exec_cache)
        greedy = [float(outcomes[p["task_id"]]["greedy"].passed) for p in problems if outcomes[p["task_id"]]["greedy"]]
        lines.setdefault("the model's greedy answer", []).append(float(np.mean(greedy)) if greedy else None)
        label = "examples first, then the ranking" if args.examples else "the ranking without checks"
        lines.setdefault(label, []).append(float(np.mean(score(problems, records, outcomes, plain))))
        lines.setdefault("with the model's tests (CodeT)", []).append(
            float(np.mean(score(problems, records, outcomes, codet)))
        )
        rows = [{"passed": [r.passed for r in outcomes[p["task_id"]]["candidates"]]} for p in problems]
        lines.setdefault("Pass@All", []).append(float(np.mean([any(r["passed"]) for r in rows])))
    for label, values in lines.items():
        print(f"{label:<34} " + " ".join(f"{100 * v:10.1f}%" if v is not None else f"{'n/a':>11}" for v in values))
        summary[label] = values
    times = np.array(list(seconds.values()))
    test_s = np.array([tests[p["task_id"]]["wall_s"] for p in problems])
    summary.update(
        {
            "scorers": list(scorers),
            "asserts_per_problem": float(np.mean([len(tests[p["task_id"]]["checks"]) for p in problems])),
            "writing_tests_s_p50": float(np.percentile(test_s, 50)),
            "running_tests_s_p50": float(np.percentile(times, 50)),
            "cpu": cpu_description(),
        }
    )
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
