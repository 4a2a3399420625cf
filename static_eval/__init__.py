"""Static evaluation of code candidates in the prompt's language (languages.py): tree-sitter syntax, cut-off code and
empty implementations for every language, pylint and mypy findings (Python) diffed against the prompt."""

from .analyzer import StaticAnalyzer
from .findings import ERROR, LINT, SYNTAX, TYPES, WARNING, CandidateReport, Finding
from .settings import DEFAULT_PYLINT_MESSAGES, AnalyzerSettings

__all__ = [
    "StaticAnalyzer",
    "AnalyzerSettings",
    "CandidateReport",
    "Finding",
    "ERROR",
    "WARNING",
    "SYNTAX",
    "LINT",
    "TYPES",
    "DEFAULT_PYLINT_MESSAGES",
]
