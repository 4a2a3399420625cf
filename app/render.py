"""HTML fragments of the UI (status line, candidate headers, heatmap, statistics), built from escaped text only.

Every value that reaches the page through these functions goes through `html.escape` (or is a number
formatted here); candidate code itself is never passed through here: the UI shows it in gr.Code.
"""

from __future__ import annotations

from html import escape

from app.evidence import score_line_parts
from app.results import GrowingCandidate, Language, Progress, RankedEntry, RunResult
from app.stated import USAGE
from checks import CandidateChecks, Check
from engine.types import FINISH_BUDGET, FINISH_INTERRUPTED, FINISH_LENGTH, FINISH_STOP

# the page's words for engine.types.FINISH_REASONS (tests/test_app_render.py checks that every reason has one)
REASONS = {
    FINISH_STOP: "finished",
    FINISH_LENGTH: "hit max new tokens",
    FINISH_BUDGET: "stopped before its end (the time budget, a stop, or a settled answer: see the notes)",
    FINISH_INTERRUPTED: "cut: the server's stream broke off",
    None: "growing",
}


def status_html(state: Progress | RunResult | None) -> str:
    """One line (and a bar) saying what the run is doing and how far it got."""
    if state is None:
        return _line("Enter a prompt and press Generate.")
    model = escape(str(state.model.get("choice", "")))
    if isinstance(state, RunResult):
        head = f"Stopped ({escape(state.stopped)}); ranked what was produced" if state.stopped else "Done"
        total = state.timings.total_s or 0.0
        return _line(
            f"{head}: {len(state.candidates)} distinct candidates in {total:.1f} s with <b>{model}</b> · "
            + search_text(state)
            + language_text(state.language)
        ) + _bar(1.0)
    if state.status == "waiting":
        return _line("Waiting for the engine (another request is finishing)…")
    if state.status == "loading":
        return _line(
            f"Loading {escape(state.loading or 'the model')} for <b>{model}</b> — {state.elapsed_s:.0f} s. The first "
            "start of a bundled model prepares it once (minutes); this page stays connected meanwhile."
        )
    total, read = state.prompt_tokens, state.prompt_read_tokens
    if read < total:
        cached = state.cached_prompt_tokens
        return _line(
            f"Reading the prompt with <b>{model}</b>: {read} of {total} tokens"
            + (f" ({cached} from the cache of recent prompts)" if cached else "")
            + f" · {state.elapsed_s:.1f} s"
        ) + _bar(read / total)
    used, budget = state.generation_s, state.budget_s
    if state.search_round > 1:
        return _line(
            f"Searching with <b>{model}</b>: none of the {state.drawn_before} candidates drawn passes every check; "
            f"drawing {state.k} more (round {state.search_round}) · {used:.1f} s of {budget:g} s budget · "
            f"{sum(c.finish_reason is not None for c in state.candidates[state.drawn_before :])} of {state.k} finished"
        ) + _bar(min(used / budget, 1.0) if budget else 1.0)
    return _line(
        f"Generating with <b>{model}</b>: {used:.1f} s of {budget:g} s budget · {state.generated_tokens} tokens · "
        f"{state.finished} of {state.k} candidates finished"
    ) + _bar(min(used / budget, 1.0) if budget else 1.0)


def search_text(result: RunResult) -> str:
    """Where the search drew more than the first k rows: how many, in how many rounds, and why it ended."""
    search = result.search
    if search is None or search.rounds == 1:
        return ""
    return (
        f"searched {search.rounds} rounds, {search.drawn} candidates drawn, the best {search.shown} shown "
        f"({escape(search.reason)}) · "
    )


def language_text(language: Language) -> str:
    """What the prompt was taken for, and the analyses its candidates got, in words."""
    name = escape(language.record.display)
    what = f"a request in words, answered in {name}" if language.in_words else f"{name} code"
    found = {"field": "as asked", "default": "nothing said otherwise"}.get(
        language.found_from, escape(language.found_from)
    )
    ran = ", ".join(escape(a) for a in language.analyses) or "none"
    return f"{what} ({found}); analyses: {ran}"


def model_state_html(label: str, state: str, detail: str) -> str:
    """One line saying whether the chosen model is ready, still loading, or failed (with the error's fix)."""
    name = f"<b>{escape(label)}</b>"
    if state == "ready":
        return _line(f"Model {name}: ready." + (f" Runs {escape(detail)}." if detail else ""))
    if state == "loading":
        return _line(
            f"Model {name}: loading {escape(detail)}… (the first start of a bundled model prepares it "
            "once: minutes; later starts take seconds). You can press Generate: it waits for it."
        )
    if state == "failed":
        return _line(f'Model {name}: <span style="color:#b00020">failed to load</span>: {escape(detail)}')
    return _line(f"Model {name}: loads on the first request.")


def notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return f'<div class="rd-notes" style="color:#a15c00"><b>Note:</b><ul>{items}</ul></div>'


LEADER_NOTE = "provisional: ranked by agreement among the finished candidates; the analysis and the checks follow"


def candidate_header_html(
    entry: RankedEntry | GrowingCandidate, check_items: list[Check] = (), leading: bool = False
) -> str:
    """Rank, checks passed, score and its parts, copies, finish reason, static findings and each check's outcome
    (`check_items`: the run's checks, in the order of the candidate's outcomes). A growing row: its number, tokens
    and state, and where it `leading`, that it is the best so far (provisional)."""
    reason = escape(REASONS.get(entry.finish_reason, str(entry.finish_reason)))
    if isinstance(entry, GrowingCandidate):  # still generating: no rank yet
        lead = f"<b>best so far</b> ({LEADER_NOTE}) · " if leading else ""
        return f'<div class="rd-cand">{lead}<b>candidate {entry.index + 1}</b> · {entry.tokens} tokens · {reason}</div>'
    bits = [f"<b>#{int(entry.rank)}</b>"]
    if entry.checks is not None and entry.checks.outcomes:
        bits.append(f"checks passed {entry.checks.passed} of {len(entry.checks.outcomes)}")
    bits.append(_score_text(entry))
    if entry.score_parts.get("mean_logprob") is not None:
        bits.append(f"mean logprob {_num(entry.score_parts['mean_logprob'])}")
    if entry.count > 1:
        bits.append(f"×{entry.count} identical")
    bits.append(reason)
    bits += [escape(entry.tie_break)] if entry.tie_break else []
    bits += _warnings(entry)
    explanation = f'<div class="rd-explanation">{escape(entry.explanation)}</div>' if entry.explanation else ""
    return (
        f'<div class="rd-cand">{" · ".join(bits)}{explanation}{example_usage_html(entry.example_usage)}'
        f"{checks_html(entry.checks, list(check_items))}{findings_html(entry.findings)}</div>"
    )


def example_usage_html(usage: str | None) -> str:
    """An answer's example usage, shown apart from the code to copy (app/stated.shown_code)."""
    if not usage:
        return ""
    return (
        '<details class="rd-usage"><summary>the answer\'s example usage (not in the code below)</summary>'
        f"<pre>{escape(usage)}</pre></details>"
    )


def _score_text(entry: RankedEntry) -> str:
    if entry.score is None:
        return "unranked"
    parts = entry.score_parts
    return (
        f"score {_num(entry.score)} = consistency {_num(parts.get('consistency'))}"
        + (f" × logprob {_num(parts['logprob_term'])}" if parts.get("logprob_term") else "")
        + f" − static penalty {_num(parts.get('static_penalty'))}"
        + "".join(f" · {escape(label)} {_num(value)}" for label, value in score_line_parts(parts))
    )


def _warnings(entry: RankedEntry) -> list[str]:
    """What is wrong with a candidate, in red where it is bad."""
    warnings = []
    if not entry.code.strip():
        warnings.append('<span style="color:#b00020">empty: no code was produced</span>')
    if entry.parses is False:
        warnings.append('<span style="color:#b00020">does not parse</span>')
    if entry.demoted:
        warnings.append("moved below the parsing candidates")
    return warnings


CHECK_MARKS = {"passed": "✓", "failed": "✗", "error": "✗ error", "timeout": "✗ timeout"}


def checks_html(checks: CandidateChecks | None, items: list[Check]) -> str:
    """Each check of one candidate: ✓ or ✗, the check as written, its line, and what came back."""
    if checks is None or not checks.outcomes:
        return ""
    rows = "".join(
        f"<tr><td>{escape(CHECK_MARKS.get(o.status, str(o.status)))}</td>"
        f"<td>{int(item.line)}</td><td><code>{escape(item.label())}</code></td>"
        f"<td>{escape(str(o.got))}</td></tr>"
        for o, item in zip(checks.outcomes, items)
    )
    return (
        '<table class="rd-checks" style="font-size:0.85em;margin-top:4px"><tr><th>check</th><th>line</th>'
        f"<th>example</th><th>came back</th></tr>{rows}</table>"
    )


def findings_html(findings: list[dict]) -> str:
    if not findings:
        return ""
    rows = "".join(
        f"<tr><td>{escape(str(f.get('severity', '')))}</td><td>{escape(str(f.get('kind', '')))}</td>"
        f"<td>{int(f.get('line', 0))}{' of the usage' if f.get('in') == USAGE else ''}</td>"
        f"<td>{escape(str(f.get('message', '')))}</td></tr>"
        for f in findings
    )
    return (
        '<table class="rd-findings" style="font-size:0.85em;margin-top:4px"><tr><th>severity</th><th>kind</th>'
        f"<th>line</th><th>message</th></tr>{rows}</table>"
    )


def heatmap_html(labels: list[str], matrix: list[list[float | None]]) -> str:
    """The pairwise similarity matrix as a coloured table (darker = more alike), in rank order."""
    if not matrix:
        return "<div>No similarity matrix (ranking unavailable or no candidates).</div>"
    head = "".join(f"<th>{escape(str(label))}</th>" for label in labels)
    top = max((v for row in matrix for v in row if v is not None), default=0.0) or 1.0
    rows = []
    for label, row in zip(labels, matrix):
        cells = "".join(_cell(value, top) for value in row)
        rows.append(f"<tr><th>{escape(str(label))}</th>{cells}</tr>")
    return (
        '<div class="rd-heatmap"><div style="font-size:0.85em">Pairwise similarity of the distinct candidates '
        "in rank order: the share of all their distinct code tokens that both use (0 = none in common); the "
        "diagonal, a candidate with itself, is left empty; darker = more alike, scaled to the largest value)"
        "</div>"
        f'<table style="border-collapse:collapse;font-size:0.8em"><tr><th></th>{head}</tr>{"".join(rows)}</table></div>'
    )


def stats_html(stats: dict) -> str:
    """The run statistics as a two-column table."""
    if not stats:
        return ""
    rows = [
        ("wall time (s)", stats.get("total_s")),
        ("waiting for the engine (s)", stats.get("wait_s")),
        ("model loading (s)", stats.get("load_s")),
        ("generation (s)", stats.get("generation_s")),
        ("static analysis (s)", stats.get("analysis_s")),
        ("ranking (s)", stats.get("ranking_s")),
        ("tokens", stats.get("generated_tokens")),
        ("tokens/s", stats.get("tokens_per_s")),
        ("speculation", "on" if stats.get("speculation") else "off"),
        ("acceptance rate", stats.get("acceptance_rate")),
        ("mean draft length", stats.get("mean_draft_length")),
        ("drafter steps", ", ".join(f"{k}: {v}" for k, v in (stats.get("drafter_choices") or {}).items()) or "-"),
    ]
    body = "".join(
        f"<tr><td>{escape(name)}</td><td>{escape(_num(value) if not isinstance(value, str) else value)}</td></tr>"
        for name, value in rows
        if value is not None
    )
    return f'<table class="rd-stats" style="font-size:0.9em">{body}</table>'


def _cell(value: float | None, top: float) -> str:
    if value is None:
        return '<td style="padding:4px 6px">–</td>'
    shade = max(0.0, min(1.0, float(value) / top))
    text = "#fff" if shade > 0.55 else "#000"
    return (
        f'<td style="padding:4px 6px;text-align:center;background:rgba(33,102,172,{shade:.3f});color:{text}">'
        f"{float(value):.2f}</td>"
    )


def _num(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.3f}"


def _line(text: str) -> str:
    return f'<div class="rd-status">{text}</div>'


def _bar(fraction: float) -> str:
    return (
        '<div style="background:#e5e7eb;height:6px;border-radius:3px;margin-top:4px">'
        f'<div style="background:#2166ac;height:6px;border-radius:3px;width:{100 * fraction:.1f}%"></div></div>'
    )
