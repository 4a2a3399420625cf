"""Findings and per-candidate reports: plain data, pyflakes style (a kind, a place, a message), never prose."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ERROR = "error"  # the candidate is wrong or cannot be the answer
WARNING = "warning"  # suspicious, or the analysis itself could not finish
TYPE = "type"  # a type checker's error (kind "type-" + mypy's code): usually a failure when run, but the
# checker's inference errs more often than the error-level lint checks (measured: bench_static)

# Kinds this package produces itself; every other kind is a pylint message symbol (e.g. "undefined-variable").
SYNTAX_ERROR = "syntax-error"  # an ERROR or MISSING node, or a parse failure
TRUNCATED = "truncated"  # the candidate was cut off mid-statement
EMPTY_IMPLEMENTATION = "empty-implementation"  # the candidate adds nothing that runs
ANALYSIS_TIMEOUT = "analysis-timeout"  # the linter ran past its hard limit and was killed
ANALYSIS_ERROR = "analysis-error"  # the linter crashed or could not read the code
LINT_SKIPPED = "lint-skipped"  # not linted (too large), so lint findings are unknown
PROMPT_SYNTAX_ERROR = "prompt-syntax-error"  # the prompt alone does not parse: why a candidate cannot

# The analyses a report can say ran (CandidateReport.analyses).
SYNTAX = "syntax"  # tree-sitter: syntax errors, cut-off code, empty implementations (every language)
LINT = "lint"  # pylint (Python only)
TYPES = "types"  # mypy (Python only)


@dataclass(frozen=True)
class Finding:
    """One problem in a candidate, placed in the candidate's own coordinates (line 1 = its first line)."""

    kind: str  # e.g. "undefined-variable", "syntax-error", "empty-implementation"
    symbol: str | None  # the name involved, when there is one
    line: int  # 1-based line in the completion
    column: int  # 0-based column (characters) in the completion
    message: str  # human-readable text; never compare it in code
    severity: str = ERROR  # ERROR, WARNING or TYPE

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.kind}: {self.message}"


@dataclass
class CandidateReport:
    """What static analysis says about one candidate (prompt + completion)."""

    parses: bool  # prompt + completion is syntactically valid in its language (blocks the prompt opened may be
    # left for the suffix or the harness to close)
    complete: bool  # not cut off mid-statement (by the length limit, the deadline or otherwise)
    prompt_parses: bool  # the prompt alone is a valid prefix; if not, nothing is linted or blamed
    findings: list[Finding] = field(default_factory=list)  # problems the completion brings (the prompt's own removed)
    elapsed_s: float = 0.0  # this candidate's syntax time plus its share of the batch lint time
    language: str = "python"  # the id (languages.py) of the language it was analysed as
    analyses: tuple[str, ...] = ()  # which analyses ran on it: SYNTAX, LINT, TYPES (lint and types: Python only)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def type_errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == TYPE]

    @property
    def kinds(self) -> list[str]:
        """Finding kinds in order, for tests and quick policy checks."""
        return [f.kind for f in self.findings]

    def as_dict(self) -> dict:
        """JSON-serialisable form for the UI and the API."""
        return {
            "parses": self.parses,
            "complete": self.complete,
            "prompt_parses": self.prompt_parses,
            "n_errors": len(self.errors),
            "n_warnings": len(self.warnings),
            "n_type_errors": len(self.type_errors),
            "findings": [asdict(f) for f in self.findings],
            "elapsed_s": round(self.elapsed_s, 6),
            "language": self.language,
            "analyses": list(self.analyses),
        }
