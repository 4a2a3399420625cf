"""Runs checks against candidates: one confined program per distinct candidate, outcomes as data.

In Python the program each candidate runs in (HARNESS) loads the candidate's code as a module, then evaluates every
check in order with its own time limit, and writes one line per check (a dict's repr: the interpreter starts faster
without json) to the report descriptor. In the other languages whose toolchain is here (toolchains.py: JavaScript
under node, C++ with g++, Rust with rustc, Java with javac and java) the program is built from harness/ and writes
the same lines. A check that never reported (the program was killed at its wall time, or ended) is a timeout or an
error of that candidate alone.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass

import languages
from checks import toolchains
from checks.check import Check
from checks.sandbox import Sandbox, SandboxLimits, SandboxUnavailable

PASSED, FAILED, ERROR, TIMEOUT = "passed", "failed", "error", "timeout"
CHECK_LIMIT_S = 0.5  # one check's wall time inside the program
CHECKS_LIMITS = SandboxLimits(wall_s=3.0, cpu_s=4, memory_mb=512, output_kb=64, processes=16)

HARNESS = r"""
import _signal, io, math, os, sys
_report = os.fdopen(int(os.environ["REPORT_FD"]), "w", buffering=1)
_CHECKS = %(checks)r
_SOURCE = %(source)r
_LIMIT_S = %(limit_s)r
class _CheckTimeout(BaseException):
    pass
def _alarm(signum, frame):
    raise _CheckTimeout()
_signal.signal(_signal.SIGALRM, _alarm)
def _send(fields):
    _report.write(repr(fields) + "\n")
def _cut(text):
    return text if len(text) <= 300 else text[:297] + "..."
def _close(got, want):
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return got == want or math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(got, (list, tuple)) and type(got) is type(want):
        return len(got) == len(want) and all(_close(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_close(got[k], want[k]) for k in got)
    return bool(got == want)
def _judge(check, got, printed, namespace):
    if check["compare"] == "truthy":
        return bool(got), _cut(repr(got))
    text = (printed + (repr(got) if got is not None else "")).strip()
    if check["compare"] == "value" and not (check["doctest"] and printed.strip()):
        return _close(got, eval(check["expected"], namespace)), _cut(repr(got))
    return text.split() == check["expected"].split(), _cut(text)   # what doctest compares: the text shown
def _error(err):
    return _cut(type(err).__name__ + ": " + str(err))
_namespace = {"__name__": "candidate"}
_stdout = sys.stdout
try:
    sys.stdout = io.StringIO()
    exec(compile(_SOURCE, "candidate.py", "exec"), _namespace)
except BaseException as _err:
    _send({"loaded": False, "error": _error(_err)})
    sys.exit(0)
finally:
    sys.stdout = _stdout
_send({"loaded": True})
def _one(check):
    printed = io.StringIO()
    try:
        _signal.setitimer(_signal.ITIMER_REAL, _LIMIT_S)
        sys.stdout = printed
        for statement in check["setup"]:
            exec(statement, _namespace)
        got = eval(check["expression"], _namespace)
        passed, what = _judge(check, got, printed.getvalue(), _namespace)
        return "passed" if passed else "failed", what
    except _CheckTimeout:
        raise
    except BaseException as err:
        return "error", _error(err)
    finally:
        sys.stdout = _stdout
for _index, _check in enumerate(_CHECKS):
    try:
        try:
            _status, _what = _one(_check)
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    except _CheckTimeout:   # fired in the check, or in its handler before the timer was cleared
        _status, _what = "timeout", "no answer within %%g s" %% _LIMIT_S
    _send({"i": _index, "status": _status, "got": _what})
"""


@dataclass(frozen=True)
class CheckOutcome:
    """One check on one candidate."""

    status: str  # PASSED, FAILED (`got` is what came back), ERROR (`got` names the exception), TIMEOUT
    got: str = ""

    def as_dict(self) -> dict:
        return {"status": self.status, "got": self.got}


@dataclass(frozen=True)
class CandidateChecks:
    """Every check's outcome on one candidate, in the order of the checks."""

    outcomes: tuple[CheckOutcome, ...]
    load_error: str | None = None  # the candidate's code raised before any check ran

    @property
    def passed(self) -> int:
        return sum(o.status == PASSED for o in self.outcomes)

    def as_dict(self) -> dict:
        return {"passed": self.passed, "load_error": self.load_error, "outcomes": [o.as_dict() for o in self.outcomes]}


def harness(program: str, checks: list[Check], limit_s: float = CHECK_LIMIT_S) -> str:
    """The confined program that loads `program` and reports each check's outcome."""
    payload = [
        {
            "expression": c.expression,
            "expected": c.expected,
            "compare": c.compare,
            "setup": list(c.setup),
            "doctest": c.origin == "doctest",
        }
        for c in checks
    ]
    return HARNESS % {"checks": payload, "source": program, "limit_s": float(limit_s)}


def read_report(report: str, n_checks: int, timed_out: bool, returncode: int | None) -> CandidateChecks:
    """Outcomes from a harness's report lines; checks it never reached are timeouts (killed) or errors."""
    outcomes: dict[int, CheckOutcome] = {}
    load_error = None
    for line in report.splitlines():
        try:
            fields = ast.literal_eval(line)  # the harness writes repr()s of dicts of str, int and bool
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            break  # the file size limit cut a line, or the candidate wrote to the report itself
        if not isinstance(fields, dict):
            break
        if fields.get("loaded") is False:
            load_error = str(fields.get("error", ""))
        elif isinstance(fields.get("i"), int) and 0 <= fields["i"] < n_checks:
            outcomes[fields["i"]] = CheckOutcome(str(fields.get("status")), str(fields.get("got", "")))
    if load_error is not None:
        missing = CheckOutcome(ERROR, f"the code did not load: {load_error}")
    elif timed_out:
        missing = CheckOutcome(TIMEOUT, "the program was stopped at its time limit")
    else:
        missing = CheckOutcome(ERROR, f"the program ended (exit status {returncode}) before this check")
    return CandidateChecks(tuple(outcomes.get(i, missing) for i in range(n_checks)), load_error)


class CheckRunner:
    """Runs checks in a working sandbox, or says why it cannot (`available`, `reason`; per language `reason_for`)."""

    def __init__(self, sandbox: Sandbox | None, reason: str | None = None):
        self.sandbox = sandbox
        self.reason = reason if sandbox is None else None
        self._toolchains: dict[str, toolchains.Toolchain | str] = {}  # by language: found and probed, or why not
        self._finding = threading.Lock()

    @classmethod
    def create(cls, limits: SandboxLimits = CHECKS_LIMITS) -> CheckRunner:
        """A runner on a sandbox seen to work here; where none can be set up, a runner that runs nothing."""
        try:
            return cls(Sandbox.create(limits))
        except SandboxUnavailable as err:
            return cls(None, f"checks are not run: the sandbox is not available here ({err})")

    @property
    def available(self) -> bool:
        return self.sandbox is not None

    def reason_for(self, language: languages.Language | str | None = None) -> str | None:
        """Why checks in `language` (None: Python) are not run here, or None when they are. The first question
        about a language looks for its tools and runs one small check with them (up to a few seconds)."""
        if self.sandbox is None:
            return self.reason
        lang = languages.resolve(language)
        if lang is languages.PYTHON:
            return None
        found = self._toolchain(lang)
        return found if isinstance(found, str) else None

    def run(
        self, programs: list[str], checks: list[Check], language: languages.Language | str | None = None
    ) -> list[CandidateChecks]:
        """Each program's outcomes on `checks` (identical programs run once), the programs and the checks written in
        `language` (None: Python). Raises SandboxUnavailable when the runner has no sandbox, or no toolchain for
        the language (`reason_for` says why): nothing is ever run unconfined."""
        if self.sandbox is None:
            raise SandboxUnavailable(self.reason or "no sandbox")
        lang = languages.resolve(language)
        foreign = sorted({c.language for c in checks if c.language != lang.name})
        if foreign:
            raise ValueError(f"checks written in {', '.join(foreign)} cannot run on programs in {lang.name}")
        if not checks:
            return [CandidateChecks(()) for _ in programs]
        distinct = list(dict.fromkeys(programs))
        if lang is languages.PYTHON:
            confined = self.sandbox.run_many([harness(p, checks) for p in distinct])
        else:
            toolchain = self._toolchain(lang)
            if isinstance(toolchain, str):
                raise SandboxUnavailable(toolchain)
            sources = [toolchain.driver(p, checks, CHECK_LIMIT_S) for p in distinct]
            confined = self.sandbox.run_many(sources, toolchain.limits, toolchain.binds)
        by_program = {
            p: read_report(c.report, len(checks), c.timed_out, c.returncode) for p, c in zip(distinct, confined)
        }
        return [by_program[p] for p in programs]

    def _toolchain(self, lang: languages.Language) -> toolchains.Toolchain | str:
        """The language's toolchain, found and seen to pass a probe check once; else why checks there do not run."""
        with self._finding:
            if lang.name not in self._toolchains:
                self._toolchains[lang.name] = self._probed(lang)
            return self._toolchains[lang.name]

    def _probed(self, lang: languages.Language) -> toolchains.Toolchain | str:
        try:
            toolchain = toolchains.find(lang, self.sandbox)
        except toolchains.ToolMissing as err:
            return f"checks in {lang.display} are not run: {err}"
        probe = Check(1, "one()", "1", language=lang.name)
        source = toolchain.driver(toolchains.PROBES[lang.name], [probe], CHECK_LIMIT_S)
        (confined,) = self.sandbox.run_many([source], toolchain.limits, toolchain.binds)
        (outcome,) = read_report(confined.report, 1, confined.timed_out, confined.returncode).outcomes
        if outcome.status != PASSED:
            said = outcome.got if confined.report else confined.output.strip()[-300:]
            return f"checks in {lang.display} are not run: its tools did not run in the sandbox ({said})"
        return toolchain
