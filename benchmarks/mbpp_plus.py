"""MBPP+ (EvalPlus): 378 of MBPP sanitized's 427 tasks, each with its base inputs and about 100 more, every input's
expected value the reference's, read from `MbppPlus-OriginFmt.jsonl.gz` of the public evalplus/mbppplus_release
repository (v0.2.0, Apache-2.0), or the same tests built by benchmarks/mbpp_plus_build.py from EvalPlus's own data
file (evalplus/evalplus's MbppPlus.jsonl, where the release cannot be fetched). Neither file is committed here
(fetched data stays out of our history): give its path with `--plus`.

A task's MBPP+ test is the file's `test` program (EvalPlus's `assertion` helper, then every input and its expected
value, each asserted on the task's function), run after the candidate's code: the task passes MBPP+ when that program
exits with status 0, as EvalPlus scores it. Its helper imports numpy for a tolerance comparison, and the sandbox's
Python has no numpy: `without_numpy` defines the four names it uses in plain Python (see PLAIN_NUMPY).

Rescoring a bench_words --out file (no server is started):

    python -m benchmarks.mbpp_plus words.jsonl --plus MbppPlus-OriginFmt.jsonl.gz

prints, per method, Pass@First on MBPP's asserts (as bench_words judged it) and on MBPP+, over the tasks MBPP+ has,
and as its last line one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.sandbox import SandboxSettings, run_many
from engine.quant.cpu import cpu_description

SOURCE = (
    "MBPP+ v0.2.0 (EvalPlus, Apache-2.0): MbppPlus-OriginFmt.jsonl.gz of evalplus/mbppplus_release, or the same tests"
    " built by benchmarks/mbpp_plus_build.py from evalplus/evalplus's MbppPlus.jsonl"
)
NUMPY_IMPORT = "import numpy as np\n"
# Two tasks' extra inputs ask for about 1.7 million tuples (combinations_colors) or a large literal (get_coordinates):
# their references need more than the sandbox's default 1 GB.
PLUS_MEMORY_MB = 4096
# np.allclose(out, exp, rtol, atol) for what MBPP+'s helper compares (numbers, and lists or tuples of them; a number
# against a sequence is compared with every item, as numpy broadcasts it); what numpy would refuse is not close.
PLAIN_NUMPY = '''
def _plus_close(out, exp, atol, rtol):
    if isinstance(out, (list, tuple)) and isinstance(exp, (list, tuple)):
        return len(out) == len(exp) and all(_plus_close(a, b, atol, rtol) for a, b in zip(out, exp))
    if isinstance(out, (list, tuple)):
        return all(_plus_close(a, exp, atol, rtol) for a in out)
    if isinstance(exp, (list, tuple)):
        return all(_plus_close(out, b, atol, rtol) for b in exp)
    try:
        return bool(abs(out - exp) <= atol + rtol * abs(exp))
    except TypeError:
        return False


class _PlainNumpy:
    """The names of numpy that MBPP+'s helper reads."""

    class ndarray:
        pass

    float64 = float32 = float

    @staticmethod
    def allclose(out, exp, rtol=1e-05, atol=1e-08):
        return _plus_close(out, exp, atol, rtol)


np = _PlainNumpy()
'''


def without_numpy(test: str) -> str:
    """An MBPP+ test with numpy's import replaced by PLAIN_NUMPY; one without it is returned as it is."""
    if NUMPY_IMPORT not in test:
        return test
    uses = {name for name in ("np.ndarray", "np.float64", "np.float32", "np.allclose") if name in test}
    if test.count("np.") != sum(test.count(name) for name in uses):
        raise ValueError("an MBPP+ test uses numpy beyond the known helper: its format changed")
    return test.replace(NUMPY_IMPORT, PLAIN_NUMPY, 1)


def plus_tests(path: str | Path) -> dict[int, str]:
    """MBPP+ tests (numpy-free) by MBPP task_id, from the OriginFmt JSONL(.gz)."""
    path = Path(path)
    if not path.exists():
        raise SystemExit(
            f"--plus {path}: no such file (MbppPlus-OriginFmt.jsonl.gz from evalplus/mbppplus_release, or what "
            "python -m benchmarks.mbpp_plus_build writes)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {int(row["task_id"]): without_numpy(row["test"]) for row in rows}


def plus_program(code: str, test: str) -> str:
    """The program judged: the candidate's code, then the MBPP+ test (pass = exit status 0)."""
    return code.rstrip("\n") + "\n\n" + test


def plus_settings(sandbox: SandboxSettings) -> SandboxSettings:
    """The judge's limits for MBPP+: as given, with at least PLUS_MEMORY_MB of address space."""
    return replace(sandbox, memory_mb=max(sandbox.memory_mb, PLUS_MEMORY_MB))


def judge_plus(codes: dict[int, list[str]], tests: dict[int, str], sandbox: SandboxSettings) -> dict[int, list[bool]]:
    """Whether each candidate of each task MBPP+ has passes its MBPP+ test (under plus_settings); each distinct
    program runs once."""
    programs = {
        task_id: [plus_program(c, tests[task_id]) for c in cs] for task_id, cs in codes.items() if task_id in tests
    }
    distinct = list(dict.fromkeys(p for progs in programs.values() for p in progs))
    results = dict(zip(distinct, run_many(distinct, plus_settings(sandbox)))) if distinct else {}
    return {task_id: [results[p].passed for p in progs] for task_id, progs in programs.items()}


def read_answers(path: str) -> dict[str, dict[int, dict]]:
    """{method: {task_id: its line}} of a bench_words --out file."""
    found: dict[str, dict[int, dict]] = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for text in handle:
            if text.strip():
                line = json.loads(text)
                found[line["method"]][line["task_id"]] = line
    return found


def candidate_codes(line: dict) -> list[str]:
    """A task's candidates, best first: every choice's code for a ranked method, else the one answer."""
    return [c["code"] for c in line["candidates"]] if line.get("candidates") else [line["code"]]


def rescore(answers: dict[str, dict[int, dict]], tests: dict[int, str], sandbox: SandboxSettings) -> dict[str, dict]:
    """Per method, over the tasks MBPP+ has: Pass@First on MBPP's asserts (bench_words' verdict) and on MBPP+, and
    Pass@All on MBPP+ for a method with several candidates."""
    rows = {}
    for method, lines in answers.items():
        kept = {task_id: line for task_id, line in lines.items() if task_id in tests}
        verdicts = judge_plus({t: candidate_codes(line) for t, line in kept.items()}, tests, sandbox)
        n = len(kept)
        rows[method] = {
            "n_tasks": n,
            "pass@first": _percent(sum(line["passed"] for line in kept.values()), n),
            "pass@first+": _percent(sum(v[0] for v in verdicts.values()), n),
        }
        if any(len(v) > 1 for v in verdicts.values()):
            rows[method]["pass@all+"] = _percent(sum(any(v) for v in verdicts.values()), n)
    return rows


def _percent(count: int, n: int) -> float | None:
    return round(100 * count / n, 1) if n else None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("answers", help="a bench_words --out file")
    parser.add_argument("--plus", required=True, help="MbppPlus-OriginFmt.jsonl.gz (evalplus/mbppplus_release)")
    parser.add_argument("--exec-timeout", type=float, default=10.0, help="seconds per program in the sandbox")
    args = parser.parse_args(argv)
    rows = rescore(read_answers(args.answers), plus_tests(args.plus), SandboxSettings(timeout_s=args.exec_timeout))
    print(f"\n{args.answers}, the tasks MBPP+ has; Pass@First = the first answer passes (MBPP: its asserts; MBPP+: ")
    print("EvalPlus's base and extra inputs against the reference)")
    print(f"{'method':<14}{'n tasks':>8}{'MBPP':>8}{'MBPP+':>8}{'Pass@All+':>11}")
    for method, row in rows.items():
        cells = [row.get(key) for key in ("pass@first", "pass@first+", "pass@all+")]
        print(
            f"{method:<14}{row['n_tasks']:>8}"
            + "".join(f"{'n/a' if c is None else c:>{w}}" for c, w in zip(cells, (8, 8, 11)))
        )
    summary = {
        "benchmark": "mbpp_plus",
        "answers": args.answers,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu_description(),
        "source": SOURCE,
        "results": rows,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
