"""Hostile input always gives a report, never an exception; a stuck lint is stopped and reported; no files are left."""

import time

import pytest

from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = 'def f(x):\n    """Do something."""\n'


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer() as built:
        yield built


@pytest.mark.parametrize(
    ("completion", "parses", "kind"),
    [
        ("    return x\x00\n", False, "syntax-error"),  # NUL byte
        ("    return '\ud800'\n", False, "syntax-error"),  # lone surrogate (not UTF-8)
        (b"    return '\xff\xfe'\n", False, "syntax-error"),  # invalid UTF-8 given as bytes
        ("Hello! This is not Python at all; it is prose.\nReally.\n", False, "syntax-error"),
        ("    return " + "(" * 3000 + "x" + ")" * 3000 + "\n", False, "syntax-error"),  # deeper than Python allows
        ("    return " + "[" * 3000 + "x" + "]" * 3000 + "\n", False, "syntax-error"),
        # grammatical, but too deep for the linter: it parses, and the failed lint is reported, not raised
        ("    return " + "-" * 3000 + "x\n", True, "analysis-error"),
        ("    return " + "not " * 3000 + "x\n", True, "analysis-error"),
        ("    return " + "x+" * 3000 + "x\n", True, "analysis-error"),
    ],
)
def test_hostile_completion_gives_a_report(analyzer, completion, parses, kind):
    report = analyzer.analyze(PROMPT, [completion])[0]
    assert report.parses is parses
    assert kind in report.kinds
    assert ("syntax-error" in report.kinds) is not parses  # a verdict always comes with its reason


@pytest.mark.parametrize("completion", ["    return x\x00\n", "    return '\ud800'\n", b"    return '\xff'\n"])
def test_bad_characters_are_syntax_errors(analyzer, completion):
    report = analyzer.analyze(PROMPT, [completion])[0]
    assert not report.parses and "syntax-error" in report.kinds


def test_prose_is_a_syntax_error(analyzer):
    report = analyzer.analyze(PROMPT, ["Hello! This is not Python at all; it is prose.\n"])[0]
    assert not report.parses and "syntax-error" in report.kinds


def test_hostile_prompt_gives_reports(analyzer):
    for prompt in ["\x00def f(", "\ud800", "(" * 5000, "def f(x:\n"]:
        report = analyzer.analyze(prompt, ["    return 1\n"])[0]
        assert not report.prompt_parses
        assert "syntax-error" not in report.kinds  # the prompt's own problem is not charged


def test_one_megabyte_is_reported_without_linting(analyzer):
    completion = "    y = x\n" * 100_000 + "    return y\n"  # about 1 MB
    started = time.perf_counter()
    report = analyzer.analyze(PROMPT, [completion])[0]
    assert time.perf_counter() - started < 5.0
    assert report.parses and "lint-skipped" in report.kinds


def test_lint_past_the_timeout_is_stopped_reported_and_recovered():
    big = "".join(f"    v{i} = x + {i}\n" for i in range(2_000)) + "    return x\n"  # pylint needs seconds
    with StaticAnalyzer(AnalyzerSettings(timeout_s=0.3)) as tight:
        started = time.perf_counter()
        report = tight.analyze(PROMPT, [big, "    return x\n"])[0]
        assert time.perf_counter() - started < 20.0  # the wait for a cold worker, then at most the timeout
        assert "analysis-timeout" in report.kinds
        assert next(f for f in report.findings if f.kind == "analysis-timeout").severity == "warning"
        # a fresh worker takes over; close() stops it and the next call starts another
        assert tight.analyze(PROMPT, ["    return undefined_name\n"])[0].kinds == ["undefined-variable"]
        tight.close()
        assert tight.analyze(PROMPT, ["    return undefined_name\n"])[0].kinds == ["undefined-variable"]


def test_no_temporary_files_are_left(tmp_path):
    big = "".join(f"    v{i} = x + {i}\n" for i in range(2_000)) + "    return x\n"
    with StaticAnalyzer(AnalyzerSettings(temp_dir=str(tmp_path), timeout_s=0.5)) as private:
        private.analyze(PROMPT, ["    return x\n", "    return y\n"])
        batch_files = lambda: [p for p in tmp_path.iterdir() if not p.name.startswith("static_eval_mypy_")]
        assert batch_files() == []  # only the worker's mypy cache lives on while it runs
        private.analyze(PROMPT, [big])  # killed mid-batch: its folder goes too
    assert list(tmp_path.iterdir()) == []  # the cache goes with the worker


def test_findings_per_candidate_are_capped(analyzer):
    report = analyzer.analyze(PROMPT, ["    return " + "-" * 300 + "x\n"])[0]
    assert 1 <= len(report.findings) <= analyzer.settings.max_findings


@pytest.mark.parametrize(
    ("prompt", "completion"),
    [
        ('def f(x):\x00\n    """NUL in the prompt."""\n', "    return x\n"),
        ("def f(x:\n", "    return x\n"),  # the prompt's own syntax error
        ("def f(x):\n", "    return (x\n"),  # the candidate's
        ("def f(x):\n", "    return x\x00\n"),
    ],
)
def test_every_unparsable_candidate_says_why(analyzer, prompt, completion):
    """Regression (issue 11): a prompt that does not parse gave `parses: false` with no finding at all."""
    report = analyzer.analyze(prompt, [completion])[0]
    assert not report.parses
    assert {"syntax-error", "prompt-syntax-error"} & set(report.kinds)
    if not report.prompt_parses:
        assert "prompt-syntax-error" in report.kinds and "syntax-error" not in report.kinds  # not blamed
