"""Settings of the static analyzer, and the pylint messages it enables by default."""

from __future__ import annotations

from dataclasses import dataclass

# Error-level pylint messages: a program that has one is wrong (or will raise) where it runs.
# Left out on purpose: no-member, unsupported-binary-operation and other inference-heavy checks that
# flag correct dynamic code.
PYLINT_ERRORS = (
    "syntax-error",
    "undefined-variable",
    "used-before-assignment",
    "possibly-used-before-assignment",
    "return-outside-function",
    "yield-outside-function",
    "not-in-loop",
    "nonlocal-without-binding",
    "not-callable",
    "no-value-for-parameter",
    "too-many-function-args",
    "unexpected-keyword-arg",
    "redundant-keyword-arg",
    "missing-kwoa",
    "function-redefined",
    "duplicate-argument-name",
    "misplaced-bare-raise",
    "nonexistent-operator",
    "used-prior-global-declaration",
    "invalid-unary-operand-type",
    "not-an-iterable",
    "unsubscriptable-object",
    "unhashable-member",
    "assignment-from-no-return",
    "assignment-from-none",
    "bad-str-strip-call",
)
# Warning-level pylint messages: suspicious code that may still be right.
# unused-argument stays on: the prompt's own stub (a body that is only a docstring) leaves every
# argument unused, and the diff against the prompt removes exactly those, so it is only charged for
# functions the candidate writes itself (a helper that ignores an argument).
PYLINT_WARNINGS = (
    "unused-variable",
    "unused-import",
    "redefined-outer-name",
    "unreachable",
    "pointless-statement",
    "pointless-string-statement",
    "expression-not-assigned",
    "unbalanced-tuple-unpacking",
    "unbalanced-dict-unpacking",
    "undefined-loop-variable",
    "cell-var-from-loop",
    "dangerous-default-value",
    "self-assigning-variable",
    "duplicate-key",
    "redefined-builtin",
    "unused-argument",
    "lost-exception",
    "return-in-finally",
    "reimported",
    "unused-wildcard-import",
    "global-variable-undefined",
    "possibly-unused-variable",
)
DEFAULT_PYLINT_MESSAGES = PYLINT_ERRORS + PYLINT_WARNINGS


@dataclass(frozen=True)
class AnalyzerSettings:
    """How StaticAnalyzer checks candidates; the defaults suit HumanEval-size prompts."""

    lint: bool = True  # False: syntax and empty implementations only, no pylint worker
    types: bool = True  # also type-check with mypy in the worker (needs lint); False: pylint only
    pylint_messages: tuple[str, ...] = DEFAULT_PYLINT_MESSAGES  # enabled pylint symbols; all others are off
    timeout_s: float = 5.0  # hard limit for one lint batch; past it the worker is killed
    worker_start_timeout_s: float = 60.0  # how long a cold worker may take to import pylint and warm up
    worker_max_batches: int = 500  # the worker is replaced after this many batches (bounds cache growth)
    max_lint_chars: int = 200_000  # prompt + completion longer than this is not linted (lint-skipped)
    max_syntax_findings: int = 5  # syntax-error findings reported per candidate, at most
    max_findings: int = 30  # findings of any kind reported per candidate, at most
    prompt_cache_size: int = 64  # prompts whose own lint findings are remembered
    temp_dir: str | None = None  # where each batch's private folder is made (None: the system default)

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the allowed range."""
        for name in ("timeout_s", "worker_start_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name}={value!r} is out of range: it must be a number > 0 (seconds)")
        for name in (
            "worker_max_batches",
            "max_lint_chars",
            "max_syntax_findings",
            "max_findings",
            "prompt_cache_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is out of range: it must be an integer >= 1")
        if not all(isinstance(m, str) and m for m in self.pylint_messages):
            raise ValueError(f"pylint_messages={self.pylint_messages!r} is invalid: give non-empty symbols")
