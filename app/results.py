"""The typed records of a run that the entry points read (progress while it goes on, the ranked result when it is
done), each with one `as_dict()` for the JSON shape that /generate, the page's raw view and the protocols carry."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import languages
from app.search import Search
from app.stated import StatedChecks
from checks import CandidateChecks, Check
from engine import GenerationRequest, GenerationResult, GenerationStats

GREEDY_NOTE = (
    "temperature 0 is greedy decoding, which has one answer: one candidate was computed whatever k "
    "asked for. Set a temperature above 0 for k different candidates to rank."
)
TIE_RULE = "equal score: the higher mean log-probability ranks first, then the earlier row"


def request_notes(request: GenerationRequest) -> list[str]:
    """What the user should know about how their request was served."""
    return [GREEDY_NOTE] if request.temperature == 0 else []


# --- while a run goes on ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GrowingCandidate:
    """One row while it grows: no rank yet."""

    index: int  # the row
    code: str  # its text so far
    finish_reason: str | None  # None while it grows
    tokens: int
    rank: None = None  # ranked only when the run is done

    def as_dict(self) -> dict:
        return {
            "rank": None,
            "index": self.index,
            "code": self.code,
            "finish_reason": self.finish_reason,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class Progress:
    """A state while the run goes on: its phase and the growing rows."""

    status: str  # "waiting" (for the engine), "loading" (the model), "generating"
    model: dict  # the model choice (app.models.ModelChoice.as_dict)
    loading: str | None  # what is loading, in the "loading" phase
    elapsed_s: float  # since the request came
    generation_s: float  # of which generating
    budget_s: float
    k: int
    generated_tokens: int
    prompt_tokens: int
    prompt_read_tokens: int  # of the prompt read so far (cached and computed)
    cached_prompt_tokens: int
    candidates: tuple[GrowingCandidate, ...]  # every row drawn so far, the earlier rounds' first
    search_round: int = 1  # the round being drawn: above 1, no candidate of the earlier rounds passed every check
    drawn_before: int = 0  # rows the earlier rounds drew
    leader: int | None = None  # the row ranked first among those finished so far (provisional), or None

    @property
    def finished(self) -> int:
        return sum(c.finish_reason is not None for c in self.candidates)

    @staticmethod
    def of(
        phase: str,
        latest: GenerationResult | None,
        request: GenerationRequest,
        model: dict,
        elapsed_s: float,
        loading: str | None,
        search: tuple[int, int] = (1, 0),
    ) -> Progress:
        """The state of a run in `phase`, from the engine's latest partial result (None before the first) and the
        search's (round, rows drawn before it)."""
        stats = latest.stats if latest is not None else GenerationStats()
        rows = latest.candidates if latest is not None else []
        return Progress(
            status=phase,
            model=model,
            loading=loading if phase == "loading" else None,
            elapsed_s=round(elapsed_s, 3),
            generation_s=round(stats.wall_s, 3),
            budget_s=request.budget_s,
            k=request.k,
            generated_tokens=stats.generated_tokens,
            prompt_tokens=stats.prompt_tokens,
            prompt_read_tokens=stats.prompt_read_tokens,
            cached_prompt_tokens=stats.cached_prompt_tokens,
            candidates=tuple(
                GrowingCandidate(i, c.text, c.finish_reason, len(c.token_ids)) for i, c in enumerate(rows)
            ),
            search_round=search[0],
            drawn_before=search[1],
        )

    def as_dict(self) -> dict:
        counts = ("elapsed_s", "generation_s", "budget_s", "k", "generated_tokens", "prompt_tokens")
        return {
            "status": self.status,
            "model": self.model,
            "loading": self.loading,
            "progress": {
                **{name: getattr(self, name) for name in counts},
                "prompt_read_tokens": self.prompt_read_tokens,
                "cached_prompt_tokens": self.cached_prompt_tokens,
                "finished": self.finished,
                "search_round": self.search_round,
                "drawn_before": self.drawn_before,
                "leader": self.leader,
            },
            "candidates": [c.as_dict() for c in self.candidates],
        }


# --- when it is done -------------------------------------------------------------------------------------------
@dataclass
class RankedEntry:
    """One distinct candidate of a done run, with everything that says why it ranks where it does."""

    rank: int  # 1 = best
    code: str  # the completion (a middle, for a request with code after the cursor)
    count: int  # rows that produced this text
    indices: list[int]  # those rows
    score: float | None
    scorer: str | None
    demoted: bool  # moved below the candidates that parse
    score_parts: dict  # why it ranks there: each kind of evidence (app/evidence.py), then the score's own terms
    finish_reason: str | None  # its first copy's (engine.types.FINISH_REASONS)
    finish_reasons: dict[str, int]  # every copy's
    tokens: int
    parses: bool | None  # None: no static analysis
    complete: bool | None
    n_errors: int | None
    n_warnings: int | None
    n_type_errors: int | None
    findings: list[dict]  # static_eval's findings as data
    checks: CandidateChecks | None  # its outcomes on the checks, where they ran
    explanation: str | None = None  # the prose of an answer to a request in words; None for code
    example_usage: str | None = None  # shown beside `code`, not in it (app/stated.shown_code)
    tie_break: str | None = None  # the tie rule, where an equal score was ordered by it

    def ranking(self) -> dict:
        """The fields the protocols carry beside each choice (`ranked_drafts`)."""
        return {
            "rank": self.rank,
            "score": self.score,
            "score_parts": dict(self.score_parts),
            "copies": self.count,
            "finish_reason": self.finish_reason,
            "parses": self.parses,
            "findings": self.findings,
            "checks": self.checks.as_dict() if self.checks is not None else None,
            "tie_break": self.tie_break,
            "example_usage": self.example_usage,
        }

    def as_dict(self) -> dict:
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return {**fields, "score_parts": dict(self.score_parts), "checks": self.ranking()["checks"]}


@dataclass(frozen=True)
class ChecksInfo:
    """The run's checks: whether they could run, whether they did, and each check as data."""

    available: bool  # the sandbox can run them here
    reason: str | None  # why not, where they cannot
    ran: bool = False
    items: tuple[Check, ...] = ()  # the prompt's examples, then the user's checks

    def as_dict(self) -> dict:
        items = [{**c.as_dict(), "label": c.label()} for c in self.items]
        return {"available": self.available, "reason": self.reason, "ran": self.ran, "items": items}


@dataclass(frozen=True)
class ModelTests:
    """Tests the model wrote for a prompt that has no examples (app/model_checks.py): the candidates were ranked by
    their agreement on them (rerank/agreement.py); they are evidence, not the user's checks."""

    items: tuple[Check, ...]

    def as_dict(self) -> dict:
        return {"items": [{**c.as_dict(), "label": c.label()} for c in self.items]}


@dataclass(frozen=True)
class Language:
    """What the run took the prompt to be, and which analyses its candidates got."""

    record: languages.Language  # the request's (resolved once, where it was built) or its answers' fences'
    found_from: str  # languages.Detection.how: "field", "filename", "fence", "path header", "text", "default"
    in_words: bool  # a request in words, answered with code blocks
    analyses: tuple[str, ...]  # the static analyses that ran: "syntax", "lint", "types"

    @property
    def name(self) -> str:
        """Its languages.py id: "python", "javascript", ..."""
        return self.record.name

    def as_dict(self) -> dict:
        return {"name": self.name, "from": self.found_from, "in_words": self.in_words, "analyses": list(self.analyses)}


@dataclass
class Timings:
    """Where a run's seconds went."""

    generation_s: float = 0.0
    analysis_s: float = 0.0
    checks_s: float = 0.0
    ranking_s: float = 0.0
    pipeline_s: float = 0.0  # the four above
    wait_s: float | None = None  # for the engine (another request was running)
    load_s: float | None = None  # loading the model
    total_s: float | None = None  # from the request to the answer


@dataclass
class RunResult:
    """The ranked result of one run (status "done"): candidates best first, and how they were made and judged."""

    request: GenerationRequest
    stopped: str | None  # why the run was stopped before its end (superseded, gone, Stop); None: it ran out
    ranking_method: str
    static_analysis: bool  # whether static analysis ran
    checks: ChecksInfo
    notes: list[str]  # what the user should know about how the request was served
    candidates: list[RankedEntry]  # best first
    similarity: list[list[float | None]]  # pairwise, in rank order, the diagonal empty
    engine_stats: GenerationStats
    language: Language
    search: Search | None = None  # the rounds drawn and why the search ended (app/search.py)
    model_tests: ModelTests | None = None  # tests the model wrote where the prompt had no checks; None: not asked
    stated_checks: StatedChecks | None = None  # the checks the answers state themselves (app/stated.py)
    timings: Timings = field(default_factory=Timings)
    model: dict = field(default_factory=dict)  # the model choice (app.models.ModelChoice.as_dict)
    status: str = "done"

    @property
    def labels(self) -> list[str]:
        return [f"#{c.rank}" for c in self.candidates]

    def ranked_copies(self) -> Iterator[RankedEntry]:
        """Each distinct candidate once per copy, best first: the protocols give one choice per candidate asked
        for, copies side by side."""
        given = 0
        for candidate in self.candidates:  # k copies in all: after a search the best may have more than k
            copies = min(candidate.count, self.request.k - given)
            yield from [candidate] * copies
            given += copies

    def stats(self) -> dict:
        """The engine's statistics and the timings, in one flat mapping."""
        stats = self.engine_stats.as_dict()
        stats["speculation"] = speculation = self.engine_stats.proposed_tokens > 0
        if not speculation:  # acceptance and draft length mean nothing without drafts
            stats["acceptance_rate"] = stats["mean_draft_length"] = None
        timings = {name: value for name, value in asdict(self.timings).items() if value is not None}
        return {**stats, **timings}

    def summary(self) -> dict:
        """What the protocols carry beside their choices (`ranked_drafts` at the top): notes, statistics, why the
        run stopped, the checks and the language."""
        return {
            "notes": self.notes,
            "stats": self.stats(),
            "stopped": self.stopped,
            "checks": self.checks.as_dict(),
            "language": self.language.as_dict(),
            "search": self.search.as_dict() if self.search else None,
        }

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "stopped": self.stopped,
            "request": request_dict(self.request),
            "language": self.language.as_dict(),
            "ranking": {"available": True, "method": self.ranking_method},
            "static_analysis": {"available": self.static_analysis},
            "checks": self.checks.as_dict(),
            "search": self.search.as_dict() if self.search else None,
            "model_tests": self.model_tests.as_dict() if self.model_tests else None,
            "stated_checks": self.stated_checks.as_dict() if self.stated_checks else None,
            "notes": list(self.notes),
            "candidates": [c.as_dict() for c in self.candidates],
            "similarity": {"labels": self.labels, "matrix": self.similarity},
            "stats": self.stats(),
            "model": self.model,
        }


def candidate_fields(rank: int, indices: list[int], cands, reports) -> dict:
    """The fields every ranked candidate has from its first copy (and the reasons of all copies)."""
    head = cands[indices[0]]
    report = reports[indices[0]] if reports else None
    return {
        "rank": rank,
        "code": head.text,
        "count": len(indices),
        "indices": list(indices),
        "finish_reason": head.finish_reason,
        "finish_reasons": dict(Counter(cands[i].finish_reason for i in indices)),
        "tokens": len(head.token_ids),
        "parses": report.parses if report is not None else None,
        "complete": report.complete if report is not None else None,
        "n_errors": len(report.errors) if report is not None else None,
        "n_warnings": len(report.warnings) if report is not None else None,
        "n_type_errors": len(report.type_errors) if report is not None else None,
        "findings": [asdict(f) for f in report.findings] if report is not None else [],
    }


def mark_ties(candidates: list[RankedEntry]) -> None:
    """Say where equal scores were ordered by the tie rule (rerank.rank: higher mean log-probability, then
    generation order), so that two equal numbers in a row explain themselves."""
    for one, other in zip(candidates, candidates[1:]):
        if one.score is not None and one.score == other.score and one.demoted == other.demoted:
            one.tie_break = other.tie_break = TIE_RULE


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
