"""Static evaluation of code candidates: tree-sitter syntax, empty implementations, pylint and mypy findings diffed
against the prompt."""

from .analyzer import StaticAnalyzer
from .findings import ERROR, WARNING, CandidateReport, Finding
from .settings import DEFAULT_PYLINT_MESSAGES, AnalyzerSettings

__all__ = [
    "StaticAnalyzer",
    "AnalyzerSettings",
    "CandidateReport",
    "Finding",
    "ERROR",
    "WARNING",
    "DEFAULT_PYLINT_MESSAGES",
]
