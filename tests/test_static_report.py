"""Report data: frozen findings, errors/warnings, JSON form, settings and argument validation."""

import dataclasses
import json

import pytest

from static_eval import DEFAULT_PYLINT_MESSAGES, AnalyzerSettings, CandidateReport, Finding, StaticAnalyzer


def test_finding_is_frozen_data():
    finding = Finding("undefined-variable", "y", 2, 4, "Undefined variable 'y'", "error")
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.line = 3


def test_report_properties_and_json():
    error = Finding("syntax-error", None, 1, 0, "bad", "error")
    warning = Finding("unused-variable", "t", 2, 4, "unused", "warning")
    report = CandidateReport(parses=False, complete=True, prompt_parses=True, findings=[error, warning], elapsed_s=0.01)
    assert report.errors == [error] and report.warnings == [warning]
    data = json.loads(json.dumps(report.as_dict()))
    assert data["findings"][1]["kind"] == "unused-variable" and data["n_errors"] == 1


def test_default_messages_cover_the_issue_list():
    wanted = {
        "undefined-variable",
        "used-before-assignment",
        "unused-variable",
        "unused-import",
        "redefined-outer-name",
        "return-outside-function",
        "unreachable",
        "not-callable",
        "no-value-for-parameter",
        "too-many-function-args",
        "unbalanced-tuple-unpacking",
        "pointless-statement",
    }
    assert wanted <= set(DEFAULT_PYLINT_MESSAGES)
    assert AnalyzerSettings().pylint_messages == DEFAULT_PYLINT_MESSAGES


@pytest.mark.parametrize(
    "bad", [{"timeout_s": 0}, {"max_lint_chars": -1}, {"prompt_cache_size": 0}, {"pylint_messages": ("",)}]
)
def test_bad_settings_are_rejected(bad):
    with pytest.raises(ValueError):
        StaticAnalyzer(AnalyzerSettings(lint=False, **bad))


def test_cut_flags_are_checked():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as analyzer:
        with pytest.raises(ValueError):
            analyzer.analyze("x = 1\n", ["y = 2\n"], [False, False])
        with pytest.raises(TypeError):
            analyzer.analyze("x = 1\n", ["y = 2\n"], ["stop"])  # finish reasons are the engine's: say cut or not
        assert analyzer.analyze("x = 1\n", []) == []
