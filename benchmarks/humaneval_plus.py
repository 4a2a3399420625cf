"""HumanEval+ (EvalPlus): the same 164 problems as HumanEval with about 750 more test inputs each, read from
`HumanEvalPlus-OriginFmt.jsonl.gz` of the public evalplus/humanevalplus_release repository (Apache-2.0).

The file is not committed here (fetched data stays out of our history): give its path with `--plus`. Its tests are
in HumanEval's format (a `check(candidate)`), but their helper imports numpy for one tolerance comparison, and the
sandbox's Python has no numpy; `plus_tests` puts a plain-Python helper of the same meaning in its place.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

# np.allclose(out, exp, rtol=1e-07, atol=atol) for the values HumanEval+ compares (numbers, and lists or tuples of
# them, a number against a sequence compared with every item as numpy broadcasts it); anything numpy would refuse
# (None, strings against numbers, lists of other lengths) is not close.
PLAIN_HELPER = """
def _plus_close(out, exp, atol):
    if isinstance(out, (list, tuple)) and isinstance(exp, (list, tuple)):
        return len(out) == len(exp) and all(_plus_close(a, b, atol) for a, b in zip(out, exp))
    if isinstance(out, (list, tuple)):
        return all(_plus_close(a, exp, atol) for a in out)
    if isinstance(exp, (list, tuple)):
        return all(_plus_close(out, b, atol) for b in exp)
    try:
        return abs(out - exp) <= atol + 1e-07 * abs(exp)
    except TypeError:
        return False


def is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, float) for i in x)
    return False


def assertion(out, exp, atol):
    exact_match = out == exp
    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        assert _plus_close(out, exp, atol)
    else:
        assert exact_match
"""

NUMPY_IMPORT = "import numpy as np\n"
CHECK_START = "\ndef check(candidate):"
# HumanEval/32's OriginFmt test evaluates the polynomial at the coefficients (`_poly(*candidate(*inp), inp)`), so
# that even the canonical solution fails; EvalPlus's own harness checks |poly(xs, root)| <= 1e-4, as this does.
POLY_BUG = ("assert _poly(*candidate(*inp), inp) <= 0.0001", "assert abs(_poly(*inp, candidate(*inp))) <= 0.0001")


def without_numpy(test: str) -> str:
    """A HumanEval+ test with numpy's import dropped and PLAIN_HELPER defined after its own helpers (the later
    `is_floats` and `assertion` are the ones `check` calls); a test without numpy is returned as it is."""
    test = test.replace(*POLY_BUG)
    if NUMPY_IMPORT not in test:
        return test
    if CHECK_START not in test or "def assertion" not in test:
        raise ValueError("a HumanEval+ test imports numpy outside the known helper: its format changed")
    head, _, rest = test.replace(NUMPY_IMPORT, "", 1).partition(CHECK_START)
    return head + PLAIN_HELPER + CHECK_START + rest


def plus_tests(path: str | Path) -> dict[str, str]:
    """HumanEval+ tests by task_id (numpy-free), from the OriginFmt JSONL(.gz)."""
    path = Path(path)
    if not path.exists():
        raise SystemExit(
            f"--plus {path}: no such file (HumanEvalPlus-OriginFmt.jsonl.gz from evalplus/humanevalplus_release)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {row["task_id"]: without_numpy(row["test"]) for row in rows}
