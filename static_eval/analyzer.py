"""StaticAnalyzer: syntax, empty implementations and context-diffed lint findings for a batch of candidates (each a
continuation of the prompt, or a middle between the prompt and the code after the cursor)."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass

from .coords import CandidateCoordinates
from .diff import baseline, new_messages
from .empty import empty_implementation
from .findings import (
    ANALYSIS_ERROR,
    ANALYSIS_TIMEOUT,
    EMPTY_IMPLEMENTATION,
    ERROR,
    LINT_SKIPPED,
    PROMPT_SYNTAX_ERROR,
    SYNTAX_ERROR,
    TRUNCATED,
    TYPE,
    WARNING,
    CandidateReport,
    Finding,
)
from .lint import ANALYSIS_FAILURES, ERROR_CATEGORIES
from .settings import AnalyzerSettings
from .syntax import PythonSyntax, SyntaxProblem
from .worker import TIMEOUT, LintWorker

_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")  # Python source can hold neither NUL nor lone surrogates


@dataclass
class _PromptFacts:
    """What the context alone (the prompt, and the code after the cursor) is, computed once per context."""

    parses: bool  # a valid prefix: parses as is, or once its open block gets a body
    lint_source: str | None  # what to lint for the baseline (the context, or with `pass` at the cursor)
    baseline: Counter | None = None  # the context's own lint messages by key, once linted


@dataclass
class _Checked:
    """One candidate on its way through the analysis."""

    report: CandidateReport
    code: str
    coords: CandidateCoordinates
    lintable: bool = False


class StaticAnalyzer:
    """Checks candidates without running them; create once and reuse (it keeps a warm pylint worker)."""

    def __init__(self, settings: AnalyzerSettings | None = None):
        self.settings = settings if settings is not None else AnalyzerSettings()
        self.settings.validate()
        self._syntax = PythonSyntax()
        self._prompts: OrderedDict[tuple[str, str], _PromptFacts] = OrderedDict()  # (prompt, suffix) -> facts
        self._lock = threading.Lock()
        self._worker = None
        if self.settings.lint:
            self._worker = LintWorker(
                self.settings.pylint_messages,
                self.settings.worker_start_timeout_s,
                self.settings.worker_max_batches,
                self.settings.temp_dir,
                self.settings.types,
            )
            try:
                self._worker.start()  # warms up in the background
            except OSError:  # could not spawn now: the first lint tries again (and reports)
                self._worker.close()

    def analyze(
        self, prompt: str, completions: list[str], cut: list[bool] | None = None, suffix: str = ""
    ) -> list[CandidateReport]:
        """One report per completion; each completion continues the prompt text directly (and, given the code after
        the cursor, `suffix`, is the middle between them: judged as prompt + middle + suffix, minus what prompt +
        suffix alone already has). cut: per completion, whether its text was cut off where it was (a length limit,
        a deadline, a broken stream) rather than ending by itself; None: none was."""
        prompt, suffix = _as_text(prompt), _as_text(suffix)
        completions = [_as_text(c) for c in completions]
        cut = _check_cut(cut, len(completions))
        with self._lock:
            facts = self._prompt_facts(prompt, suffix)
            checked = [self._check_syntax(prompt, c, suffix, was_cut, facts) for c, was_cut in zip(completions, cut)]
            self._lint(facts, checked)
        return [c.report for c in checked]

    def close(self) -> None:
        """Stop the lint worker; analyze() after close() starts a new one."""
        with self._lock:
            if self._worker is not None:
                self._worker.close()

    def __enter__(self) -> StaticAnalyzer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # 1. the prompt alone

    def _prompt_facts(self, prompt: str, suffix: str) -> _PromptFacts:
        key = (prompt, suffix)
        facts = self._prompts.get(key)
        if facts is not None:
            self._prompts.move_to_end(key)
            return facts
        facts = _PromptFacts(False, None)
        context = prompt + suffix
        if _BAD_CHARACTER.search(context) is None:
            # a block left open at the cursor gets `pass` first: tree-sitter lets `def f():` without a body pass,
            # pylint would not; for a middle, a cursor line typed half-way (`y = `) is left out as a last resort
            stubbed = _with_stub_body(prompt, suffix)
            typed_line = prompt.rpartition("\n")[2] if suffix else ""
            whole_lines = prompt[: len(prompt) - len(typed_line)] if typed_line.strip() else None
            for source in (
                stubbed,
                context,
                whole_lines and _with_stub_body(whole_lines, suffix),
                whole_lines and whole_lines + suffix,
            ):
                if source is not None and not self._syntax.parse(source.encode("utf-8")).has_error:
                    facts = _PromptFacts(True, source)
                    break
        self._prompts[key] = facts
        while len(self._prompts) > self.settings.prompt_cache_size:
            self._prompts.popitem(last=False)
        return facts

    # 2. syntax, completeness, empty implementations (tree-sitter, per candidate)

    def _check_syntax(self, prompt: str, completion: str, suffix: str, was_cut: bool, facts: _PromptFacts) -> _Checked:
        started = time.perf_counter()
        code = prompt + completion + suffix
        coords = CandidateCoordinates(prompt, code)
        report = CandidateReport(parses=False, complete=True, prompt_parses=facts.parses)
        item = _Checked(report, code, coords)
        cut = was_cut and _ends_mid_statement(prompt + completion)
        bad = _BAD_CHARACTER.search(code)
        if bad is not None and not facts.parses:
            report.complete = not cut  # the prompt holds it: blame nothing on the candidate
        elif bad is not None:
            row = code.count("\n", 0, bad.start())
            line, column = coords.from_chars(row, bad.start() - (code.rfind("\n", 0, bad.start()) + 1))
            report.findings.append(
                Finding(
                    SYNTAX_ERROR, None, line, column, f"invalid character {bad.group()!r} (U+{ord(bad.group()):04X})"
                )
            )
            report.complete = not cut
        else:
            boundary = len(prompt.encode("utf-8"))
            self._tree_checks(item, (boundary, boundary + len(completion.encode("utf-8"))), cut, facts)
        if not report.parses and not facts.parses and not any(f.kind == SYNTAX_ERROR for f in report.findings):
            report.findings.append(Finding(PROMPT_SYNTAX_ERROR, None, 1, 0, _prompt_problem(prompt, suffix), WARNING))
        if not report.complete:
            last_line = completion.count("\n") + 1
            why = (
                "it was cut off (a length limit, the deadline or a broken stream ended it)"
                if cut
                else "the code is unfinished where it stops"
            )
            report.findings.append(Finding(TRUNCATED, None, last_line, 0, f"the candidate ends mid-statement: {why}"))
        report.elapsed_s = time.perf_counter() - started
        return item

    def _tree_checks(self, item: _Checked, span: tuple[int, int], cut: bool, facts: _PromptFacts) -> None:
        """span: the completion's bytes in the code (from the prompt's end to the suffix's start)."""
        report = item.report
        source = item.code.encode("utf-8")
        parsed = self._syntax.parse(source)
        problems = parsed.problems() if parsed.has_error else []
        report.parses = not problems
        report.complete = not cut and not (facts.parses and problems and parsed.error_at_end())
        if not facts.parses:
            return  # the prompt is broken: blame nothing on the candidate
        for problem in problems[: self.settings.max_syntax_findings]:
            report.findings.append(_syntax_finding(problem, item.coords))
        if not report.parses:
            return
        empty = empty_implementation(parsed.added_code(*span))
        if empty is not None:
            report.findings.append(empty)
        if self._worker is None:
            return
        if len(item.code) > self.settings.max_lint_chars:
            report.findings.append(
                Finding(
                    LINT_SKIPPED,
                    None,
                    1,
                    0,
                    f"not linted: {len(item.code)} characters is over max_lint_chars={self.settings.max_lint_chars}",
                    WARNING,
                )
            )
            return
        item.lintable = True

    # 3. lint (pylint in the warm worker, one run for the whole batch) and the context diff

    def _lint(self, facts: _PromptFacts, checked: list[_Checked]) -> None:
        targets = [c for c in checked if c.lintable]
        if not targets:
            return
        unique = list(dict.fromkeys(d.code for d in targets))  # identical candidates are linted once
        lint_prompt = facts.baseline is None
        sources = unique + ([facts.lint_source] if lint_prompt else [])
        started = time.perf_counter()
        detail = ""
        try:
            outcome = self._worker.lint(sources, self.settings.timeout_s)
        except Exception as error:  # a report, never an exception, whatever the worker does
            outcome = None
            detail = f"lint failed: {type(error).__name__}"
        share = (time.perf_counter() - started) / len(targets)
        for item in targets:
            item.report.elapsed_s += share
        if outcome is None or outcome.messages is None:
            kind = ANALYSIS_TIMEOUT if outcome is not None and outcome.failure == TIMEOUT else ANALYSIS_ERROR
            detail = outcome.detail if outcome is not None else detail
            for item in targets:
                item.report.findings.append(Finding(kind, None, 1, 0, detail, WARNING))
            return
        by_code = dict(zip(unique, outcome.messages))
        if lint_prompt:
            prompt_messages = outcome.messages[-1]
            facts.baseline = baseline(prompt_messages)
            if any(m["symbol"] == "syntax-error" for m in prompt_messages):
                facts.parses = False  # tree-sitter was more lenient than Python
        for item in targets:
            item.report.prompt_parses = facts.parses
            if facts.parses:
                for message in new_messages(by_code[item.code], facts.baseline):
                    item.report.findings.append(_lint_finding(message, item))
            if not item.report.parses:  # Python rejects what tree-sitter let through (indentation):
                item.report.findings = [f for f in item.report.findings if f.kind != EMPTY_IMPLEMENTATION]
            del item.report.findings[self.settings.max_findings :]


def _lint_finding(message: dict, item: _Checked) -> Finding:
    symbol = message["symbol"]
    row = max(int(message.get("line") or 1) - 1, 0)
    if message.get("category") == TYPE:  # mypy: character columns
        line, column = item.coords.from_chars(row, int(message.get("column") or 0))
    else:
        line, column = item.coords.from_bytes(row, max(int(message.get("column") or 0), 0))
    if symbol == "syntax-error":
        item.report.parses = False
        return Finding(SYNTAX_ERROR, None, line, column, message["message"], ERROR)
    if symbol in ANALYSIS_FAILURES:
        return Finding(ANALYSIS_ERROR, None, line, column, message["message"], WARNING)
    if message.get("category") == TYPE:
        return Finding(symbol, message.get("name"), line, column, message["message"], TYPE)
    severity = ERROR if message.get("category") in ERROR_CATEGORIES else WARNING
    return Finding(symbol, message.get("name"), line, column, message["message"], severity)


def _syntax_finding(problem: SyntaxProblem, coords: CandidateCoordinates) -> Finding:
    line, column = coords.from_bytes(problem.row, problem.byte_col)
    if problem.missing:
        return Finding(SYNTAX_ERROR, None, line, column, f"missing {problem.text!r}: the statement is unfinished")
    return Finding(SYNTAX_ERROR, None, line, column, f"invalid syntax at {problem.text!r}")


def _ends_mid_statement(code: str) -> bool:
    """For text that was cut off: whether it ends inside a statement (its last line unfinished, or inside an
    indented block such as a function body that was still being written)."""
    last = code.rpartition("\n")[2]
    if last.strip():
        return True  # the last line has no newline: it may stop mid-token
    last_written = code.rstrip().rpartition("\n")[2]
    return last_written[:1].isspace()  # the last written line is indented: a compound statement is open


def _with_stub_body(prompt: str, suffix: str = "") -> str | None:
    """The prompt with `pass` as the body of its last, still open block (`def f(x):`), if it ends in one, then the
    code after the cursor."""
    head = prompt.rstrip()
    last = head.rpartition("\n")[2]
    if not last.rstrip().endswith(":"):
        return None
    indent = last[: len(last) - len(last.lstrip())]
    return f"{head}\n{indent}    pass\n" + suffix.lstrip(" \t")


def _as_text(value) -> str:
    """Text with Unix newlines; bytes are decoded (invalid UTF-8 becomes lone surrogates, reported later)."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    if not isinstance(value, str):
        raise TypeError(f"expected source text (str), got {type(value).__name__}")
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _check_cut(cut, count: int) -> list[bool]:
    if cut is None:
        return [False] * count
    flags = list(cut)
    if len(flags) != count:
        raise ValueError(f"cut has {len(flags)} entries: it must have one per completion ({count})")
    for flag in flags:
        if not isinstance(flag, bool):
            raise TypeError(f"cut={flag!r} is invalid: each entry must be True or False (was the text cut off?)")
    return flags


def _prompt_problem(prompt: str, suffix: str = "") -> str:
    """Why the prompt alone does not parse, in words: no completion can make the whole parse, and the candidate is
    not blamed for it."""
    bad = _BAD_CHARACTER.search(prompt)
    if bad is not None:
        line = prompt.count("\n", 0, bad.start()) + 1
        what = f"it holds the invalid character {bad.group()!r} (U+{ord(bad.group()):04X}) on its line {line}"
    else:
        what = "it has a syntax error"
    if suffix:
        return (
            f"the code around the cursor (prompt and suffix) does not parse without a middle ({what}): the "
            "candidate is not blamed for it"
        )
    return f"the prompt itself does not parse ({what}): no completion can make it valid Python; fix the prompt"
