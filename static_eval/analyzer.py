"""StaticAnalyzer: syntax, empty implementations and context-diffed lint findings for a batch of candidates (each a
continuation of the prompt, or a middle between the prompt and the code after the cursor), in the prompt's language:
tree-sitter checks for every language of languages.py, pylint and mypy for Python."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass

import languages
from languages import INDENT, Language

from .blocks import closing_text, open_blocks
from .coords import CandidateCoordinates
from .diff import baseline, new_messages
from .empty import empty_implementation
from .findings import (
    ANALYSIS_ERROR,
    ANALYSIS_TIMEOUT,
    EMPTY_IMPLEMENTATION,
    ERROR,
    LINT,
    LINT_SKIPPED,
    PROMPT_SYNTAX_ERROR,
    SYNTAX,
    SYNTAX_ERROR,
    TRUNCATED,
    TYPE,
    TYPES,
    WARNING,
    CandidateReport,
    Finding,
)
from .lint import ANALYSIS_FAILURES, ERROR_CATEGORIES
from .settings import AnalyzerSettings
from .syntax import SyntaxProblem, TreeSitterSyntax
from .worker import NOT_CHECKED_FURTHER, TIMEOUT, LintWorker

_CLOSING_CHARACTERS = ("}", ")", "]", ";")  # code that ends in one of these did not stop mid-statement
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")  # source text can hold neither NUL nor lone surrogates


@dataclass
class _PromptFacts:
    """What the context alone (the prompt, and the code after the cursor) is, computed once per context."""

    parses: bool  # a valid prefix: parses as is, or once its open block gets a body (or its open blocks close)
    lint_source: str | None  # Python: what to lint for the baseline (the context, or with `pass` at the cursor)
    baseline: Counter | None = None  # the context's own lint messages by key, once linted
    open_blocks: int = 0  # other languages: how many blocks the context leaves open (for the suffix or harness)


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
        self._syntaxes: dict[str, TreeSitterSyntax] = {}  # language id -> its parser, made on first use
        self._prompts: OrderedDict[tuple[str, str, str], _PromptFacts] = OrderedDict()  # (language, prompt, suffix)
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
        self,
        prompt: str,
        completions: list[str],
        cut: list[bool] | None = None,
        suffix: str = "",
        language: Language | str | None = None,
    ) -> list[CandidateReport]:
        """One report per completion; each completion continues the prompt text directly (and, given the code after
        the cursor, `suffix`, is the middle between them: judged as prompt + middle + suffix, minus what prompt +
        suffix alone already has). cut: per completion, whether its text was cut off where it was (a length limit,
        a deadline, a broken stream) rather than ending by itself; None: none was. language: a languages.Language,
        or its id or alias (ValueError naming the known ones otherwise); None: Python. Every language gets the
        tree-sitter checks, Python pylint and mypy too; each report's `analyses` says which ran."""
        language = languages.resolve(language)
        prompt, suffix = _as_text(prompt), _as_text(suffix)
        completions = [_as_text(c) for c in completions]
        cut = _check_cut(cut, len(completions))
        with self._lock:
            try:
                syntax = self._syntax_for(language)
            except (ImportError, ValueError) as error:  # its grammar package is missing or does not load
                return [_not_analysed(language, error, was_cut) for was_cut in cut]
            facts = self._prompt_facts(prompt, suffix, syntax)
            checked = [
                self._check_syntax(prompt, c, suffix, was_cut, facts, syntax) for c, was_cut in zip(completions, cut)
            ]
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

    def _syntax_for(self, language: Language) -> TreeSitterSyntax:
        syntax = self._syntaxes.get(language.name)
        if syntax is None:
            syntax = self._syntaxes[language.name] = TreeSitterSyntax(language)
        return syntax

    # 1. the prompt alone

    def _prompt_facts(self, prompt: str, suffix: str, syntax: TreeSitterSyntax) -> _PromptFacts:
        language = syntax.language
        key = (language.name, prompt, suffix)
        facts = self._prompts.get(key)
        if facts is not None:
            self._prompts.move_to_end(key)
            return facts
        facts = _PromptFacts(False, None)
        context = prompt + suffix
        if _BAD_CHARACTER.search(context) is None:
            # for a middle, a cursor line typed half-way (`y = `) is left out as a last resort
            typed_line = prompt.rpartition("\n")[2] if suffix else ""
            whole_lines = prompt[: len(prompt) - len(typed_line)] if typed_line.strip() else None
            if language.blocks == INDENT:
                # a block left open at the cursor gets `pass` first: tree-sitter lets `def f():` without a body
                # pass, pylint would not
                sources = (
                    _with_stub_body(prompt, suffix),
                    context,
                    whole_lines and _with_stub_body(whole_lines, suffix),
                    whole_lines and whole_lines + suffix,
                )
            else:  # the blocks left open (`function f(a) {`) are closed: `}`, `end`, `fi` appended
                sources = (_closed(context, language), whole_lines and _closed(whole_lines + suffix, language))
            for source in sources:
                if source is not None and not syntax.parse(source.encode("utf-8")).has_error:
                    facts = _PromptFacts(True, source, open_blocks=_depth(context, language))
                    break
        self._prompts[key] = facts
        while len(self._prompts) > self.settings.prompt_cache_size:
            self._prompts.popitem(last=False)
        return facts

    # 2. syntax, completeness, empty implementations (tree-sitter, per candidate)

    def _check_syntax(
        self, prompt: str, completion: str, suffix: str, was_cut: bool, facts: _PromptFacts, syntax: TreeSitterSyntax
    ) -> _Checked:
        started = time.perf_counter()
        language = syntax.language
        code = prompt + completion + suffix
        coords = CandidateCoordinates(prompt, code)
        report = CandidateReport(
            parses=False, complete=True, prompt_parses=facts.parses, language=language.name, analyses=(SYNTAX,)
        )
        item = _Checked(report, code, coords)
        cut = was_cut and _ends_mid_statement(prompt, completion, language)
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
        elif language.blocks == INDENT:
            boundary = len(prompt.encode("utf-8"))
            self._tree_checks(item, (boundary, boundary + len(completion.encode("utf-8"))), cut, facts, syntax)
        else:
            self._block_checks(item, len(prompt.encode("utf-8")), cut, facts, syntax)
        if not report.parses and not facts.parses and not any(f.kind == SYNTAX_ERROR for f in report.findings):
            report.findings.append(
                Finding(PROMPT_SYNTAX_ERROR, None, 1, 0, _prompt_problem(prompt, suffix, language), WARNING)
            )
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

    def _tree_checks(
        self, item: _Checked, span: tuple[int, int], cut: bool, facts: _PromptFacts, syntax: TreeSitterSyntax
    ) -> None:
        """Python. span: the completion's bytes in the code (from the prompt's end to the suffix's start)."""
        report = item.report
        source = item.code.encode("utf-8")
        parsed = syntax.parse(source)
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

    def _block_checks(
        self, item: _Checked, boundary: int, cut: bool, facts: _PromptFacts, syntax: TreeSitterSyntax
    ) -> None:
        """Languages other than Python: the code is parsed with the blocks it leaves open closed (a completion may
        leave the prompt's own blocks to the suffix or the harness, as MultiPL-E's stop at a function's last `}`
        does); one that leaves open blocks it opened itself is unfinished. boundary: the prompt's end in bytes."""
        report = item.report
        closers = open_blocks(item.code, syntax.language)
        code_end = len(item.code.encode("utf-8"))
        parsed = syntax.parse((item.code + closing_text(closers)).encode("utf-8"))
        problems = parsed.problems() if parsed.has_error else []
        report.parses = not problems
        written = item.code.rstrip()
        # unfinished: it opened blocks it leaves open, or an error reaches its end that is not a stray closer (`}}`)
        unfinished = len(closers) > facts.open_blocks or bool(
            problems and written[-1:] not in _CLOSING_CHARACTERS and parsed.error_at_end(len(written.encode("utf-8")))
        )
        report.complete = not cut and not (facts.parses and unfinished)
        if not facts.parses:
            return  # the prompt is broken: blame nothing on the candidate
        in_code = [p for p in problems if p.start_byte < code_end]  # the rest is at the end: reported as unfinished
        for problem in in_code[: self.settings.max_syntax_findings]:
            report.findings.append(_syntax_finding(problem, item.coords))
        function = parsed.open_function(boundary) if report.parses else None
        if function is not None and function.empty:
            where = f"function {function.name!r}" if function.name else "the function"
            report.findings.append(
                Finding(
                    EMPTY_IMPLEMENTATION,
                    function.name,
                    1,
                    0,
                    f"{where} has no code that runs (its body is empty or only comments): write the implementation",
                    ERROR,
                )
            )

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
            type_checked = self.settings.types and not any(
                m["symbol"] in NOT_CHECKED_FURTHER for m in by_code[item.code]
            )
            item.report.analyses = (SYNTAX, LINT, TYPES) if type_checked else (SYNTAX, LINT)
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


def _ends_mid_statement(prompt: str, completion: str, language: Language = languages.PYTHON) -> bool:
    """For text that was cut off: whether it ends inside a statement (its last line unfinished, or inside a block
    such as a function body that was still being written)."""
    code = prompt + completion
    last = code.rpartition("\n")[2]
    if last.strip():
        return True  # the last line has no newline: it may stop mid-token
    if language.blocks != INDENT:  # still inside the block the prompt opened, or inside one of its own
        return _depth(code, language) >= max(_depth(prompt, language), 1)
    last_written = code.rstrip().rpartition("\n")[2]
    return last_written[:1].isspace()  # the last written line is indented: a compound statement is open


def _depth(code: str, language: Language) -> int:
    """How many blocks (and brackets) the code leaves open."""
    return len(open_blocks(code, language))


def _closed(code: str, language: Language) -> str:
    """The code with the blocks it leaves open closed."""
    return code + closing_text(open_blocks(code, language))


def _not_analysed(language: Language, error: Exception, was_cut: bool) -> CandidateReport:
    """The report when the language's grammar cannot be loaded: nothing is known, nothing is blamed."""
    detail = (
        f"not analysed: the tree-sitter grammar for {language.display} did not load ({type(error).__name__}: "
        f"{error}); install {language.grammar.package} (requirements.txt pins it)"
    )
    return CandidateReport(
        parses=False,
        complete=not was_cut,
        prompt_parses=False,
        findings=[Finding(ANALYSIS_ERROR, None, 1, 0, detail, WARNING)],
        language=language.name,
    )


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


def _prompt_problem(prompt: str, suffix: str = "", language: Language = languages.PYTHON) -> str:
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
    return (
        f"the prompt itself does not parse ({what}): no completion can make it valid {language.display}; fix the "
        "prompt (or say which language it is)"
    )
