"""HTML fragments of the UI (status line, candidate headers, heatmap, statistics), built from escaped text only.

Every value that reaches the page through these functions goes through `html.escape` (or is a number
formatted here); candidate code itself is never passed through here: the UI shows it in gr.Code.
"""

from __future__ import annotations

from html import escape

from engine.types import FINISH_BUDGET, FINISH_INTERRUPTED, FINISH_LENGTH, FINISH_STOP

# the page's words for engine.types.FINISH_REASONS (tests/test_app_render.py checks that every reason has one)
REASONS = {
    FINISH_STOP: "finished",
    FINISH_LENGTH: "hit max new tokens",
    FINISH_BUDGET: "cut by the time budget",
    FINISH_INTERRUPTED: "cut: the server's stream broke off",
    None: "growing",
}


def status_html(state: dict) -> str:
    """One line (and a bar) saying what the run is doing and how far it got."""
    status, progress = state.get("status"), state.get("progress") or {}
    model = escape(str((state.get("model") or {}).get("choice", "")))
    if status == "waiting":
        return _line("Waiting for the engine (another request is finishing)…")
    if status == "loading":
        what = escape(state.get("loading") or "the model")
        return _line(
            f"Loading {what} for <b>{model}</b> — {progress.get('elapsed_s', 0):.0f} s. The first start of "
            "a bundled model prepares it once (minutes); this page stays connected meanwhile."
        )
    total, read = progress.get("prompt_tokens", 0), progress.get("prompt_read_tokens", 0)
    if status == "generating" and read < total:
        cached = progress.get("cached_prompt_tokens", 0)
        return _line(
            f"Reading the prompt with <b>{model}</b>: {read} of {total} tokens"
            + (f" ({cached} from the cache of recent prompts)" if cached else "")
            + f" · {progress.get('elapsed_s', 0.0):.1f} s"
        ) + _bar(read / total)
    if status == "generating":
        used, budget = progress.get("generation_s", 0.0), progress.get("budget_s", 1.0)
        return _line(
            f"Generating with <b>{model}</b>: {used:.1f} s of {budget:g} s budget · "
            f"{progress.get('generated_tokens', 0)} tokens · {progress.get('finished', 0)} of "
            f"{progress.get('k', 0)} candidates finished"
        ) + _bar(min(used / budget, 1.0) if budget else 1.0)
    if status == "done":
        stats = state.get("stats", {})
        stopped = state.get("stopped")
        head = f"Stopped ({escape(stopped)}); ranked what was produced" if stopped else "Done"
        return _line(
            f"{head}: {len(state.get('candidates', []))} distinct candidates in {stats.get('total_s', 0):.1f} s "
            f"with <b>{model}</b>."
        ) + _bar(1.0)
    return _line("Enter a prompt and press Generate.")


def model_state_html(label: str, state: str, detail: str) -> str:
    """One line saying whether the chosen model is ready, still loading, or failed (with the error's fix)."""
    name = f"<b>{escape(label)}</b>"
    if state == "ready":
        return _line(f"Model {name}: ready.")
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


def candidate_header_html(entry: dict, check_items: list[dict] = ()) -> str:
    """Rank, checks passed, score and its parts, copies, finish reason, static findings and each check's outcome
    (`check_items`: the run's checks, in the order of the candidate's outcomes)."""
    reason = escape(REASONS.get(entry.get("finish_reason"), str(entry.get("finish_reason"))))
    if entry.get("rank") is None:  # still generating: no rank yet
        return (
            f'<div class="rd-cand"><b>candidate {entry.get("index", 0) + 1}</b> · {entry.get("tokens", 0)} tokens'
            f" · {reason}</div>"
        )
    parts = entry.get("score_parts") or {}
    bits = [f"<b>#{int(entry['rank'])}</b>"]
    checks = entry.get("checks")
    if checks and checks.get("outcomes"):
        bits.append(f"checks passed {int(checks['passed'])} of {len(checks['outcomes'])}")
    if entry.get("score") is not None:
        bits.append(
            f"score {_num(entry['score'])} = consistency {_num(parts.get('consistency'))}"
            + (f" × logprob {_num(parts['logprob_term'])}" if parts.get("logprob_term") else "")
            + f" − static penalty {_num(parts.get('static_penalty'))}"
        )
    else:
        bits.append("unranked")
    if parts.get("mean_logprob") is not None:
        bits.append(f"mean logprob {_num(parts['mean_logprob'])}")
    if entry.get("count", 1) > 1:
        bits.append(f"×{int(entry['count'])} identical")
    bits.append(reason)
    if not (entry.get("code") or "").strip():
        bits.append('<span style="color:#b00020">empty: no code was produced</span>')
    if entry.get("tie_break"):
        bits.append(escape(entry["tie_break"]))
    if entry.get("parses") is False:
        bits.append('<span style="color:#b00020">does not parse</span>')
    if entry.get("demoted"):
        bits.append("moved below the parsing candidates")
    return (
        f'<div class="rd-cand">{" · ".join(bits)}{checks_html(checks, list(check_items))}'
        f"{findings_html(entry.get('findings') or [])}</div>"
    )


CHECK_MARKS = {"passed": "✓", "failed": "✗", "error": "✗ error", "timeout": "✗ timeout"}


def checks_html(checks: dict | None, items: list[dict]) -> str:
    """Each check of one candidate: ✓ or ✗, the check as written, its line, and what came back."""
    if not checks or not checks.get("outcomes"):
        return ""
    rows = "".join(
        f"<tr><td>{escape(CHECK_MARKS.get(o.get('status'), str(o.get('status'))))}</td>"
        f"<td>{int(item.get('line', 0))}</td><td><code>{escape(str(item.get('label', '')))}</code></td>"
        f"<td>{escape(str(o.get('got', '')))}</td></tr>"
        for o, item in zip(checks["outcomes"], items)
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
        f"<td>{int(f.get('line', 0))}</td><td>{escape(str(f.get('message', '')))}</td></tr>"
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
