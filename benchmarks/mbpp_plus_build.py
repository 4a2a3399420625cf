"""MBPP+ tests built from EvalPlus's own data file, for `bench_words --plus` where the OriginFmt release file cannot be
fetched.

EvalPlus keeps MBPP+ in two shapes. The OriginFmt release (`MbppPlus-OriginFmt.jsonl.gz`, what benchmarks/mbpp_plus.py
reads) holds each task's whole test program, its expected values written in. EvalPlus's own shape (`MbppPlus.jsonl`)
holds the reference solution and the inputs only; EvalPlus computes the expected values by running the reference.
This module does the same and writes the OriginFmt shape:

- **Data.** `MbppPlus.jsonl` as committed in github.com/evalplus/evalplus at 767efcc (2023-11-16, MBPP+ v0.1.0, 399
  tasks, Apache-2.0; `git show 767efcc:MbppPlus.jsonl`). v0.2.0, the release EvalPlus scores with, is v0.1.0 less the
  21 tasks with broken tests (REMOVED_IN_V020, evalplus issue 147) and with links taken out of prompts that the test
  does not read: so the kept 378 tasks are v0.2.0's.
- **Inputs.** JSON has no tuples, sets or complex numbers; the tasks whose reference expects them get them back
  (TUPLE_ARGS and the others below, EvalPlus's per-task table), and repeated inputs are dropped.
- **Expected values.** Each reference runs in the sandbox (checks/sandbox.py) on a copy of each input, and reports the
  `repr` of each result; where that `repr` does not read back as the same value, the build stops and names the task.
- **The test.** The OriginFmt's: the tolerance helper (floats within 1e-6, or the task's `atol`, by `np.allclose`,
  which mbpp_plus.without_numpy replaces as it does for the release), then every input and its expected value,
  asserted on the task's function. EvalPlus's special oracles are kept: order-free results for
  SET_RESULT, "not None" for NOT_NONE_RESULT (asserted here; EvalPlus's own helper for those three never asserts), and
  a second accepted reading for `surface_Area` and `digit_distance_nums`.

    python -m benchmarks.mbpp_plus_build MbppPlus.jsonl --out MbppPlus-OriginFmt.jsonl.gz

Prints one line per task that could not be built, and as its last line one JSON object (tasks built, the source's
sha256, the seconds).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.mbpp_plus import NUMPY_IMPORT, judge_plus, without_numpy
from benchmarks.sandbox import SandboxSettings
from checks.sandbox import Sandbox, SandboxLimits

SOURCE_COMMIT = "767efcc"  # github.com/evalplus/evalplus, the last commit with MbppPlus.jsonl in its tree
REMOVED_IN_V020 = frozenset(
    {83, 115, 117, 143, 164, 229, 249, 295, 396, 400, 407, 431, 438, 442, 461, 574, 582, 595, 640, 746, 783}
)
# Argument shapes JSON flattened into lists (EvalPlus's table, by MBPP task_id).
TUPLE_ARGS = frozenset({2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726})
TUPLE_ARGS |= {740, 744, 809}  # every argument a tuple
TUPLES_IN_LIST_ARGS = frozenset({63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780})
FIRST_IS_LIST_OF_TUPLES = frozenset({75, 413, 444, 753})
SECOND_IS_TUPLE = frozenset({106, 750})
FIRST_IS_TUPLE = frozenset({250, 405, 446, 617, 720, 763, 808})
TUPLE_OF_TUPLES_ARGS = frozenset({259, 401, 445})
ALL_TUPLES = frozenset({580, 615, 791})
NOT_NONE_RESULT = frozenset({"check_str", "text_match_three", "text_starta_endb"})
SET_RESULT = frozenset(
    {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum"}
    | {"intersection_array", "find_dissimilar", "Diff"}
)


def _tuples(value):
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def task_args(task_id: int, args: list) -> list:
    """One input's arguments in the types the task's reference expects (JSON gave lists for tuples)."""
    if task_id in TUPLE_ARGS:
        return [tuple(arg) for arg in args]
    if task_id in TUPLES_IN_LIST_ARGS:
        return [[tuple(item) for item in arg] for arg in args]
    if task_id in FIRST_IS_LIST_OF_TUPLES:
        return [[tuple(item) for item in args[0]], *args[1:]]
    if task_id in SECOND_IS_TUPLE:
        return [args[0], tuple(args[1]), *args[2:]]
    if task_id in FIRST_IS_TUPLE:
        return [tuple(args[0]), *args[1:]]
    if task_id in TUPLE_OF_TUPLES_ARGS:
        return [tuple(tuple(item) for item in arg) for arg in args]
    if task_id == 115:
        return [[set(item) if isinstance(item, list) and item else {} for item in args[0]]]
    if task_id == 124:
        return [float(args[0]), complex(args[1])]
    if task_id == 252:
        return [complex(args[0])]
    if task_id == 278:
        return [tuple(tuple(item) if isinstance(item, list) else item for item in args[0])]
    if task_id == 307:
        return [tuple(args[0]), *args[1:]]
    if task_id == 722:
        return [{key: tuple(value) for key, value in args[0].items()}, *args[1:]]
    if task_id in ALL_TUPLES:
        return list(_tuples(args))
    return args


def distinct_inputs(task_id: int, task: dict) -> list[list]:
    """The task's base and extra inputs, typed, each once (the first of equal texts kept, as EvalPlus keeps it)."""
    seen, kept = set(), []
    for args in task["base_input"] + list(task["plus_input"] or []):  # one task has {} for none
        typed = task_args(task_id, args)
        if repr(typed) not in seen:
            seen.add(repr(typed))
            kept.append(typed)
    return kept


PRELUDE = "from math import inf, nan\n"
# The reference's run: every input copied (a reference may change its arguments), each result's repr reported.
REFERENCE_RUN = """
import copy, json, os, sys
sys.set_int_max_str_digits(0)
_said = []
for _args in {inputs}:
    _out = {entry_point}(*copy.deepcopy(_args))
    _said.append({keep})
os.write(int(os.environ["REPORT_FD"]), json.dumps(_said).encode("utf-8"))
"""
HELPER = """
def is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def assertion(out, exp, atol):
    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if out != exp and atol != 0:
        assert np.allclose(out, exp, rtol=1e-07, atol=atol), f"out: {out!r}, exp: {exp!r}"
    else:
        assert out == exp, f"out: {out!r}, exp: {exp!r}"
"""
SET_HELPER = """
def assertion(out, exp, atol):
    assert set(out) == set(exp), f"out: {out!r}, exp: {exp!r}"
"""
NOT_NONE_HELPER = """
def assertion(out, exp, atol):
    assert (out == exp) if isinstance(out, bool) else ((out is not None) == exp), f"out: {out!r}, exp: {exp!r}"
"""
# Mbpp/581: the height read as the pyramid's perpendicular height, the total area rounded.
SURFACE_AREA_HELPER = """
import math


def other_reading(base_edge, height):
    slant = math.sqrt((base_edge / 2) ** 2 + height**2)
    return round(base_edge**2 + 2 * base_edge * slant)


def assertion(out, exp, atol, other):
    assert abs(out - exp) <= atol or abs(out - other) <= atol, f"out: {out!r}, exp: {exp!r} or {other!r}"
"""
# Mbpp/558: the shorter number padded with zeros on the left before digits are compared.
DIGIT_DISTANCE_HELPER = """
def other_reading(num1, num2):
    a, b = str(num1), str(num2)
    width = max(len(a), len(b))
    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(width), b.zfill(width)))


def assertion(out, exp, atol, other):
    assert out == exp or out == other, f"out: {out!r}, exp: {exp!r} or {other!r}"
"""
SECOND_READING = {"surface_Area": SURFACE_AREA_HELPER, "digit_distance_nums": DIGIT_DISTANCE_HELPER}


def reference_program(task: dict, inputs: list[list]) -> str:
    """The program that runs the task's reference on every input and reports each result's repr."""
    name = task["entry_point"]
    keep = "_out is not None" if name in NOT_NONE_RESULT else "_out"
    return (
        PRELUDE
        + task["canonical_solution"]
        + REFERENCE_RUN.format(inputs=repr(inputs), entry_point=name, keep=f"repr({keep})")
    )


def _helper_and_call(task: dict, expected: str) -> tuple[str, str]:
    """The task's assertion helper, and its call on one input `inp` against the expression `expected`."""
    name, atol = task["entry_point"], task["atol"]
    if name in SECOND_READING:
        return SECOND_READING[name], f"assertion({name}(*inp), {expected}, {atol}, other_reading(*inp))"
    helper = SET_HELPER if name in SET_RESULT else NOT_NONE_HELPER if name in NOT_NONE_RESULT else HELPER
    return helper, f"assertion({name}(*inp), {expected}, {atol})"


def test_program(task: dict, inputs: list[list], results: list[str]) -> str:
    """The OriginFmt-shaped test: the helper, the inputs and expected values, one assertion each."""
    helper, call = _helper_and_call(task, "exp")
    return (
        NUMPY_IMPORT
        + PRELUDE
        + helper
        + f"\n\ninputs = {inputs!r}\nresults = [{', '.join(results)}]\n"
        + f"for i, (inp, exp) in enumerate(zip(inputs, results)):\n    {call}\n"
    )


def crosscheck_program(task: dict, inputs: list[list]) -> str:
    """The test for a task whose expected values are too large or not literals (as EvalPlus's OriginFmt has it for
    three tasks): the reference runs beside the candidate, in a namespace of its own, on its own copy of each input."""
    reference = PRELUDE + task["canonical_solution"]
    helper, call = _helper_and_call(task, f"_reference[{task['entry_point']!r}](*copy.deepcopy(inp))")
    return (
        NUMPY_IMPORT
        + PRELUDE
        + "import copy\n"
        + helper
        + f"\n\n_reference = {{}}\nexec({reference!r}, _reference)\ninputs = {inputs!r}\n"
        + f"for i, inp in enumerate(inputs):\n    {call.replace('(*inp)', '(*copy.deepcopy(inp))', 1)}\n"
    )


def reads_back(text: str) -> bool:
    """Whether a result's repr is a Python literal (inf and nan allowed), so the test can hold it."""
    try:
        ast.literal_eval(text.replace("inf", "1.0").replace("nan", "1.0"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def read_source(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def task_number(task: dict) -> int:
    return int(str(task["task_id"]).split("/")[-1])


def expected_tests(kept: list[dict], inputs: dict[int, list[list]], limits: SandboxLimits) -> dict[int, str]:
    """Each task's test: with the reference's results written in where they are literals, else a cross-check."""
    sandbox = Sandbox.create(limits)
    try:
        runs = sandbox.run_many([reference_program(t, inputs[task_number(t)]) for t in kept])
    finally:
        sandbox.close()
    tests = {}
    for task, run in zip(kept, runs):
        number = task_number(task)
        results = json.loads(run.report) if run.returncode == 0 else None
        if results is not None and all(reads_back(r) for r in results):
            tests[number] = test_program(task, inputs[number], results)
        else:
            tests[number] = crosscheck_program(task, inputs[number])
    return tests


def build(tasks: list[dict], limits: SandboxLimits, judge: SandboxSettings) -> tuple[list[dict], dict[int, str]]:
    """OriginFmt rows ({task_id, entry_point, test}) for the v0.2.0 tasks whose reference passes its own test under
    the judge's limits (EvalPlus's ground-truth check), and why any other task was left out."""
    kept = [t for t in tasks if task_number(t) not in REMOVED_IN_V020]
    inputs = {task_number(t): distinct_inputs(task_number(t), t) for t in kept}
    tests = expected_tests(kept, inputs, limits)
    references = {task_number(t): [PRELUDE + t["canonical_solution"]] for t in kept}
    verdicts = judge_plus(references, {n: without_numpy(test) for n, test in tests.items()}, judge)
    rows, failed = [], {}
    for task in kept:
        number = task_number(task)
        if verdicts[number][0]:
            rows.append({"task_id": number, "entry_point": task["entry_point"], "test": tests[number]})
        else:
            failed[number] = "the reference fails its own test under the judge's limits"
    return rows, failed


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help=f"EvalPlus's MbppPlus.jsonl(.gz) (evalplus/evalplus at {SOURCE_COMMIT})")
    parser.add_argument("--out", required=True, help="where to write the OriginFmt-shaped JSONL.gz")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for one task's reference run")
    parser.add_argument("--exec-timeout", type=float, default=10.0, help="the judge's seconds per program")
    args = parser.parse_args(argv)
    source = Path(args.source)
    if not source.exists():
        raise SystemExit(f"{source}: no such file (git show {SOURCE_COMMIT}:MbppPlus.jsonl in evalplus/evalplus)")
    started = time.monotonic()
    limits = SandboxLimits(wall_s=args.timeout, cpu_s=int(args.timeout) + 2, memory_mb=2048, output_kb=65536)
    rows, failed = build(read_source(source), limits, SandboxSettings(timeout_s=args.exec_timeout))
    for number, why in sorted(failed.items()):
        print(f"Mbpp/{number}: {why}")
    with gzip.open(args.out, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    summary = {
        "benchmark": "mbpp_plus_build",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": f"{source} (evalplus/evalplus {SOURCE_COMMIT}), sha256 {hashlib.sha256(source.read_bytes()).hexdigest()}",
        "tasks_built": len(rows),
        "tasks_failed": sorted(failed),
        "seconds": round(time.monotonic() - started, 1),
        "out": args.out,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
