"""The UI's HTML fragments show every piece of text escaped: markup in candidates or findings never renders."""

from __future__ import annotations

import languages
from app import render
from app.results import ChecksInfo, GrowingCandidate, Language, RankedEntry, RunResult, Timings
from engine import GenerationRequest, GenerationStats

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'


def entry() -> RankedEntry:
    return RankedEntry(
        rank=1,
        code=XSS,
        count=2,
        indices=[0, 1],
        score=0.5,
        scorer="gsc",
        demoted=False,
        score_parts={
            "checks_passed": None,
            "agreement": None,
            "consistency": 0.6,
            "logprob_term": 0.0,
            "static_penalty": 0.1,
            "mean_logprob": -0.4,
        },
        finish_reason="stop",
        finish_reasons={"stop": 2},
        tokens=3,
        parses=False,
        complete=True,
        n_errors=1,
        n_warnings=0,
        n_type_errors=0,
        findings=[{"kind": XSS, "line": 3, "column": 0, "message": XSS, "severity": "error"}],
        checks=None,
    )


def test_candidate_header_escapes_findings_and_shows_the_score_parts():
    html = render.candidate_header_html(entry())
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert "#1" in html and "score 0.500" in html and "consistency 0.600" in html and "penalty 0.100" in html
    assert "×2 identical" in html and "finished" in html and "does not parse" in html


def test_growing_candidate_header_has_no_rank():
    html = render.candidate_header_html(GrowingCandidate(index=2, code="", finish_reason=None, tokens=7))
    assert "candidate 3" in html and "7 tokens" in html and "growing" in html


def test_heatmap_escapes_labels_and_formats_numbers():
    html = render.heatmap_html([XSS, "#2"], [[1.0, 0.25], [0.25, None]])
    assert "<script" not in html and "0.25" in html and "–" in html


def test_status_and_notes_escape_names():
    state = RunResult(
        request=GenerationRequest(prompt="x"),
        stopped=XSS,
        ranking_method="gsc",
        static_analysis=True,
        checks=ChecksInfo(True, None),
        notes=[],
        candidates=[],
        similarity=[],
        engine_stats=GenerationStats(),
        language=Language(languages.PYTHON, "default", False, ("syntax",)),
        timings=Timings(total_s=1.0),
        model={"choice": XSS},
    )
    assert "<script" not in render.status_html(state)
    assert "<script" not in render.notes_html([XSS])
    assert "<script" not in render.stats_html({"drafter_choices": {XSS: 1}, "total_s": 2.0})


def test_every_finish_reason_of_the_engine_has_words_and_a_protocol_name():
    """The engine defines how a candidate can end (engine.types.FINISH_REASONS); the page and the OpenAI mapping
    must know each one, and only the cut ones map to "length"."""
    from app.openai_api import protocol_finish
    from engine.types import CUT_REASONS, FINISH_REASONS

    assert set(render.REASONS) == set(FINISH_REASONS) | {None}
    assert {r: protocol_finish(r) for r in FINISH_REASONS} == {
        r: "length" if r in CUT_REASONS else "stop" for r in FINISH_REASONS
    }
    assert CUT_REASONS < set(FINISH_REASONS) and "stop" not in CUT_REASONS
