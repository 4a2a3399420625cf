"""The JSON shape of a result: progress while a run goes on, and one entry per ranked candidate when it is done."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict

from engine import GenerationRequest, GenerationResult

GREEDY_NOTE = (
    "temperature 0 is greedy decoding, which has one answer: one candidate was computed whatever k "
    "asked for. Set a temperature above 0 for k different candidates to rank."
)


def request_notes(request: GenerationRequest) -> list[str]:
    """What the user should know about how their request was served."""
    return [GREEDY_NOTE] if request.temperature == 0 else []


def progress(
    phase: str,
    latest: GenerationResult | None,
    request: GenerationRequest,
    model: dict,
    started: float,
    loading: str | None,
) -> dict:
    """A state while the run goes on: its phase ("waiting", "loading", "generating") and the growing rows."""
    candidates = (
        []
        if latest is None
        else [
            {"rank": None, "index": i, "code": c.text, "finish_reason": c.finish_reason, "tokens": len(c.token_ids)}
            for i, c in enumerate(latest.candidates)
        ]
    )
    return {
        "status": phase,
        "model": model,
        "loading": loading if phase == "loading" else None,
        "progress": {
            "elapsed_s": round(time.perf_counter() - started, 3),
            "generation_s": round(latest.stats.wall_s, 3) if latest else 0.0,
            "budget_s": request.budget_s,
            "k": request.k,
            "generated_tokens": latest.stats.generated_tokens if latest else 0,
            "prompt_tokens": latest.stats.prompt_tokens if latest else 0,
            "prompt_read_tokens": latest.stats.prompt_read_tokens if latest else 0,
            "cached_prompt_tokens": latest.stats.cached_prompt_tokens if latest else 0,
            "finished": sum(c["finish_reason"] is not None for c in candidates),
        },
        "candidates": candidates,
    }


def entry_for(rank: int, indices: list[int], cands, reports) -> dict:
    """The fields every displayed candidate has, from its first copy (and the reasons of all copies)."""
    head = cands[indices[0]]
    report = reports[indices[0]] if reports else None
    findings = [asdict(f) for f in report.findings] if report is not None else []
    return {
        "rank": rank,
        "code": head.text,
        "count": len(indices),
        "indices": list(indices),
        "score": None,
        "scorer": None,
        "demoted": False,
        "score_parts": {
            "consistency": None,
            "logprob_term": None,
            "static_penalty": None,
            "mean_logprob": finite(sum(head.logprobs) / len(head.logprobs)) if head.logprobs else None,
        },
        "finish_reason": head.finish_reason,
        "finish_reasons": dict(Counter(cands[i].finish_reason for i in indices)),
        "tokens": len(head.token_ids),
        "parses": report.parses if report is not None else None,
        "complete": report.complete if report is not None else None,
        "n_errors": len(report.errors) if report is not None else None,
        "n_warnings": len(report.warnings) if report is not None else None,
        "n_type_errors": len(report.type_errors) if report is not None else None,
        "findings": findings,
    }


def ranked_copies(final: dict) -> Iterator[tuple[dict, dict]]:
    """(entry, its ranking fields) of a done result once per copy of each distinct candidate, best first: the
    protocols give one choice per candidate asked for, copies side by side."""
    for entry in final["candidates"]:
        ranking = {
            "rank": entry["rank"],
            "score": entry["score"],
            "score_parts": entry["score_parts"],
            "copies": entry["count"],
            "finish_reason": entry["finish_reason"],
            "parses": entry["parses"],
            "findings": entry["findings"],
            "checks": entry.get("checks"),
            "tie_break": entry.get("tie_break"),
        }
        for _ in range(entry["count"]):
            yield entry, ranking


def mark_ties(entries: list[dict]) -> None:
    """Say where equal scores were ordered by the tie rule (rerank.rank: higher mean log-probability, then
    generation order), so that two equal numbers in a row explain themselves."""
    for entry, other in zip(entries, entries[1:]):
        if entry["score"] is not None and entry["score"] == other["score"] and entry["demoted"] == other["demoted"]:
            entry["tie_break"] = other["tie_break"] = TIE_RULE
    for entry in entries:
        entry.setdefault("tie_break", None)


TIE_RULE = "equal score: the higher mean log-probability ranks first, then the earlier row"


def run_stats(result: GenerationResult) -> dict:
    stats = result.stats.as_dict()
    speculation = result.stats.proposed_tokens > 0
    stats["speculation"] = speculation
    if not speculation:  # acceptance and draft length mean nothing without drafts
        stats["acceptance_rate"] = stats["mean_draft_length"] = None
    return stats


def request_dict(request: GenerationRequest) -> dict:
    return {
        "prompt_chars": len(request.prompt),
        "suffix_chars": len(request.suffix),
        "extra_files": [f.name for f in request.extra],
        "k": request.k,
        "budget_s": request.budget_s,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_new_tokens": request.max_new_tokens,
        "seed": request.seed,
    }


def finite(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
