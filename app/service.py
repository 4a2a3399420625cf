"""The request pipeline: validate inputs, generate k candidates (streaming), analyze, rerank, into one JSON-ready dict.

Nothing here knows Gradio: bad input raises InvalidRequest (app/ui.py turns it into gr.Error), anything else
that fails is logged and reported as an InternalError, and the
objects it works with (engines, analyzer) are given to it.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

from engine import Engine, GenerationRequest, GenerationResult, InvalidRequest, ModelSetupError

log = logging.getLogger(__name__)

try:  # static analysis and reranking are optional parts: without them candidates are shown unranked
    import static_eval  # noqa: F401  pylint: disable=unused-import  (only: is it installed?)
except ImportError as err:  # pragma: no cover - exercised only on an install without them
    static_eval, STATIC_EVAL_MISSING = None, f"static analysis unavailable ({err})"
else:
    STATIC_EVAL_MISSING = None
try:
    import rerank
except ImportError as err:  # pragma: no cover
    rerank, RERANK_MISSING = None, f"ranking unavailable ({err}): candidates are shown in generation order"
else:
    RERANK_MISSING = None

# The default time budget (seconds) is the largest the form allows. Measured on the shared 2-core CPU
# (bundled 1.5B + 0.5B draft, k=8, HumanEval/0, drafter auto): 2.6 tokens/s over all rows, so 100 s
# gave 22-39 tokens per candidate and only 1 of 8 finished; a typical solution needs ~60. A budget
# is a deadline, not a duration: a run ends as soon as all k candidates finish, so a long one costs
# nothing when the machine is fast.
DEFAULT_BUDGET_S = 120.0


class BusyError(RuntimeError):
    """The engine stayed busy past the wait limit: the caller should retry."""


class InternalError(RuntimeError):
    """Something failed inside the app, not in the request: logged with its traceback under `error_id`."""

    def __init__(self, error_id: str, cause: BaseException):
        super().__init__(f"internal error {error_id}: the app failed while serving this request "
                         f"({type(cause).__name__}: {cause}). This is a fault of the app, not of your input; it was "
                         f"logged with id {error_id}. Please retry, and report the id if it happens again.")
        self.error_id = error_id


USER_ERRORS = (InvalidRequest, BusyError, ModelSetupError)  # what the caller can act on, shown as is


def as_reported(err: BaseException) -> BaseException:
    """The error to show for `err`: user errors as they are; anything else logged with its traceback and
    wrapped in an InternalError that says so."""
    if isinstance(err, USER_ERRORS + (InternalError,)):
        return err
    error_id = uuid.uuid4().hex[:8]
    log.error("internal error %s while serving a request", error_id, exc_info=err)
    return InternalError(error_id, err)


@dataclass(frozen=True)
class Limits:
    """What the app accepts from a request (the engine's own limits are wider)."""

    max_k: int = 16                  # candidates per request: 1..max_k
    min_budget_s: float = 1.0        # seconds per request: min_budget_s..max_budget_s
    max_budget_s: float = 120.0
    max_new_tokens: int = 1024       # tokens per candidate: 1..max_new_tokens
    max_temperature: float = 2.0     # 0 (greedy)..max_temperature
    max_prompt_chars: int = 100_000  # a cheap bound before tokenizing; the engine checks the context in tokens

    def __post_init__(self):
        if not 1 <= self.max_k <= 32:
            raise ValueError(f"max_k={self.max_k!r} is out of range: it must be an integer in 1..32")
        if not 1 <= self.max_budget_s <= 3600:
            raise ValueError(f"max_budget_s={self.max_budget_s!r} is out of range: it must be in 1..3600 seconds")


@dataclass(frozen=True)
class Defaults:
    """The values a form starts with and an API call gets for the fields it leaves out."""

    k: int = 8
    budget_s: float = DEFAULT_BUDGET_S
    temperature: float = 0.8
    max_new_tokens: int = 256
    top_p: float = 0.95
    seed: int = -1                   # -1: a fresh random seed per request

    def clipped(self, limits: Limits) -> "Defaults":
        """These defaults inside the limits (a small --max-k or --max-budget lowers them)."""
        return Defaults(min(self.k, limits.max_k), min(max(self.budget_s, limits.min_budget_s), limits.max_budget_s),
                        self.temperature, min(self.max_new_tokens, limits.max_new_tokens), self.top_p, self.seed)


# --- validation ---------------------------------------------------------------------------------------
def build_request(prompt, k, budget_s, temperature, max_new_tokens, top_p=0.95, seed=-1,
                  limits: Limits = Limits()) -> GenerationRequest:
    """A validated GenerationRequest; InvalidRequest (a ValueError) names the bad value and the allowed range."""
    prompt = _check_prompt(prompt, limits)
    k = _as_int("k", k, 1, limits.max_k)
    budget_s = _as_number("budget_s", budget_s, limits.min_budget_s, limits.max_budget_s, "seconds")
    temperature = _as_number("temperature", temperature, 0.0, limits.max_temperature, "0 means greedy")
    max_new_tokens = _as_int("max_new_tokens", max_new_tokens, 1, limits.max_new_tokens)
    top_p = _as_number("top_p", top_p, 0.0, 1.0, "nucleus mass")
    if top_p == 0:
        raise InvalidRequest("top_p=0 is out of range: it must be in (0, 1]")
    seed = _as_int("seed", seed, -1, 2**63 - 1)
    if temperature == 0:
        k = 1  # greedy decoding has one answer: k rows would compute it k times (Pipeline.run says so)
    request = GenerationRequest(prompt=prompt, k=k, max_new_tokens=max_new_tokens, budget_s=budget_s,
                                temperature=temperature, top_p=top_p, seed=None if seed == -1 else seed)
    request.validate()
    return request


def _check_prompt(prompt, limits: Limits) -> str:
    if not isinstance(prompt, str):
        raise InvalidRequest(f"prompt must be text, got {type(prompt).__name__}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates: JSON can carry them, UTF-8 cannot
        raise InvalidRequest(f"prompt is not valid UTF-8 text: character {err.start} is {prompt[err.start]!a}, a lone "
                         "surrogate; send UTF-8 text") from None
    if not prompt.strip():
        raise InvalidRequest("prompt is empty: give some code or a function signature to complete")
    if len(prompt) > limits.max_prompt_chars:
        raise InvalidRequest(f"prompt is {len(prompt)} characters: it must be 1..{limits.max_prompt_chars} characters")
    return prompt


def _as_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # sliders and JSON numbers may send 8.0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(f"{name}={value!r} is out of range: it must be an integer in {low}..{high}")
    return value


def _as_number(name: str, value, low: float, high: float, unit: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:
        raise InvalidRequest(f"{name}={value!r} is out of range: it must be a number in {low:g}..{high:g} ({unit})")
    return float(value)


# --- stopping -------------------------------------------------------------------------------------------
class RunControl:
    """Stops one run: the Stop button, a cancelled request, or a consumer that stopped reading.

    The engine polls `should_stop` between steps. A consumer that vanished without a word (a
    dropped connection whose generator is never closed) stops reading, so its heartbeats stop and the
    run ends `idle_timeout_s` later: the engine is never held for a client that is gone.
    """

    def __init__(self, idle_timeout_s: float = 5.0):
        self.idle_timeout_s = idle_timeout_s
        self.reason: str | None = None
        self._stop = threading.Event()
        self._last_seen = time.monotonic()

    def stop(self, reason: str = "stopped by the user") -> None:
        if not self._stop.is_set():
            self.reason = reason
            self._stop.set()

    def heartbeat(self) -> None:
        self._last_seen = time.monotonic()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def should_stop(self) -> bool:
        if not self._stop.is_set() and time.monotonic() - self._last_seen > self.idle_timeout_s:
            self.stop("the client stopped listening")
        return self._stop.is_set()


class RunRegistry:
    """The running request of each session, so that a Stop click (its own request) finds it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._runs: dict[str, RunControl] = {}

    def start(self, session: str, control: RunControl) -> RunControl:
        with self._lock:
            previous = self._runs.get(session)
            self._runs[session] = control
        if previous is not None:
            previous.stop("replaced by a newer request of the same session")
        return control

    def finish(self, session: str, control: RunControl) -> None:
        with self._lock:
            if self._runs.get(session) is control:
                del self._runs[session]

    def stop(self, session: str) -> bool:
        """Stop the session's run; False when it has none."""
        with self._lock:
            control = self._runs.get(session)
        if control is None:
            return False
        control.stop()
        return True


# --- the pipeline ---------------------------------------------------------------------------------------
@dataclass
class Pipeline:
    """generate -> analyze -> rerank for one request, as a JSON-ready dict (see `run`)."""

    analyzer: object | None = None          # a static_eval.StaticAnalyzer, or None to skip analysis
    rank_settings: object | None = None     # rerank.RankSettings; None: rerank's defaults
    update_interval_s: float = 0.5          # streaming: at most one partial result per interval
    busy_timeout_s: float = 30.0            # how long a run waits for the engine before "busy, retry"
    idle_timeout_s: float = 5.0             # a run whose consumer stopped reading this long is stopped
    notes: list[str] = field(default_factory=list)  # set up by __post_init__: what is unavailable

    def __post_init__(self):
        if rerank is not None and self.rank_settings is None:
            self.rank_settings = rerank.RankSettings()
        self.notes = []
        if rerank is None:
            self.notes.append(RERANK_MISSING or "ranking unavailable: candidates are shown in generation order")
        if self.analyzer is None:
            self.notes.append(STATIC_EVAL_MISSING or "static analysis is off: no findings are shown")

    def run(self, engine: Engine, request: GenerationRequest, control: RunControl | None = None,
            on_update: Callable[[GenerationResult], None] | None = None) -> dict:
        """Generate, analyze and rank synchronously; the final result dict (status "done")."""
        started = time.perf_counter()
        result = engine.generate(request, on_update=on_update, should_stop=control.should_stop if control else None)
        generated = time.perf_counter()
        texts = [c.text for c in result.candidates]
        reasons = [c.finish_reason for c in result.candidates]
        reports = self.analyzer.analyze(request.prompt, texts, reasons) if self.analyzer else None
        analyzed = time.perf_counter()
        candidates, matrix = self._rank(result, reports)
        ranked = time.perf_counter()
        stats = _stats(result)
        stats.update(generation_s=round(generated - started, 4), analysis_s=round(analyzed - generated, 4),
                     ranking_s=round(ranked - analyzed, 4), pipeline_s=round(ranked - started, 4))
        return {
            "status": "done",
            "stopped": control.reason if control is not None and control.stopped else None,
            "request": _request_dict(request),
            "ranking": {"available": rerank is not None,
                        "method": self.rank_settings.label() if rerank is not None else None},
            "static_analysis": {"available": self.analyzer is not None},
            "notes": list(self.notes) + request_notes(request),
            "candidates": candidates,
            "similarity": {"labels": [f"#{c['rank']}" for c in candidates], "matrix": matrix},
            "stats": stats,
        }

    def _rank(self, result: GenerationResult, reports) -> tuple[list[dict], list[list[float | None]]]:
        cands = result.candidates
        texts = [c.text for c in cands]
        if rerank is None:
            return _unranked(result, reports), []
        logprobs = [c.logprobs for c in cands]
        ranked = rerank.rank(texts, token_logprobs=logprobs, reports=reports, settings=self.rank_settings)
        heads = [r.indices[0] for r in ranked]
        matrix = rerank.similarity_matrix([texts[i] for i in heads], self.rank_settings,
                                          token_logprobs=[logprobs[i] for i in heads])
        entries = []
        for r in ranked:
            parts = r.as_dict()
            entry = _entry(r.rank, r.indices, cands, reports)
            uses_logprobs = self.rank_settings.scorer not in ("gsc", "random")
            entry.update(score=parts["score"], scorer=r.scorer, demoted=r.demoted,
                         score_parts={"consistency": parts["consistency"],
                                      "logprob_term": parts["logprob_term"] if uses_logprobs else None,
                                      "static_penalty": parts["static_penalty"], "mean_logprob": parts["mean_logprob"]})
            entries.append(entry)
        _mark_ties(entries)
        matrix = [[None if i == j else _finite(v) for j, v in enumerate(row)] for i, row in enumerate(matrix.tolist())]
        return entries, matrix   # the diagonal (a candidate with itself) is left empty: it says nothing

    # --- streaming ---------------------------------------------------------------------------------------
    def stream(self, request: GenerationRequest, engine_for: Callable[[], Engine], lock: threading.Lock,
               control: RunControl, model: dict, loading: Callable[[], str | None] = lambda: None,
               ) -> Iterator[dict]:
        """Yield progress dicts (status "waiting", "loading", "generating") then the final dict ("done").

        The run happens in a worker thread that waits for `lock` (one generation at a time), gets the
        engine (`engine_for` may load it: minutes on a first start, so progress keeps the client alive),
        then runs the pipeline. Closing this generator early (a cancelled or disconnected client)
        stops the engine, which frees the lock within one step.
        """
        box = _Mailbox()
        worker = threading.Thread(target=self._work, args=(box, request, engine_for, lock, control, model),
                                  name="ranked-drafts-run", daemon=True)
        started = time.perf_counter()
        control.heartbeat()
        worker.start()
        finished = False
        try:
            yield _progress(box, request, model, started, loading())
            while True:
                control.heartbeat()
                final, error = box.wait(self.update_interval_s)
                if error is not None:
                    finished = True
                    raise error
                if final is not None:
                    finished = True
                    final["stats"]["total_s"] = round(time.perf_counter() - started, 4)
                    final["model"] = model
                    yield final
                    return
                yield _progress(box, request, model, started, loading())
        finally:
            if not finished:
                control.stop("the request was cancelled")

    def _work(self, box: "_Mailbox", request, engine_for, lock: threading.Lock, control: RunControl,
              model: dict) -> None:
        try:
            started = time.perf_counter()
            if not lock.acquire(timeout=self.busy_timeout_s):
                raise BusyError(f"busy: the engine is still serving another request after {self.busy_timeout_s:g} s "
                                "of waiting; retry in a moment")
            try:
                box.post(phase="loading")
                locked = time.perf_counter()
                engine = engine_for()
                loaded = time.perf_counter()
                box.post(phase="generating")
                final = self.run(engine, request, control, on_update=lambda result: box.post(latest=result))
            finally:
                lock.release()
            final["stats"].update(wait_s=round(locked - started, 4), load_s=round(loaded - locked, 4))
            box.post(final=final)
        except Exception as err:  # noqa: BLE001 - handed over to the consumer thread, which raises it
            box.post(error=as_reported(err))


class _Mailbox:
    """The worker's latest news for the consumer: phase, latest partial result, final dict or error."""

    def __init__(self):
        self._cond = threading.Condition()
        self.phase = "waiting"
        self.latest: GenerationResult | None = None
        self.final: dict | None = None
        self.error: BaseException | None = None

    def post(self, **news) -> None:
        with self._cond:
            for name, value in news.items():
                setattr(self, name, value)
            if "final" in news or "error" in news:
                self._cond.notify_all()

    def wait(self, timeout: float) -> tuple[dict | None, BaseException | None]:
        """Wait up to `timeout` for the end of the run; (final, error), both None while it runs."""
        with self._cond:
            self._cond.wait_for(lambda: self.final is not None or self.error is not None, timeout)
            return self.final, self.error


GREEDY_NOTE = ("temperature 0 is greedy decoding, which has one answer: one candidate was computed whatever k "
               "asked for. Set a temperature above 0 for k different candidates to rank.")


def request_notes(request: GenerationRequest) -> list[str]:
    """What the user should know about how their request was served."""
    return [GREEDY_NOTE] if request.temperature == 0 else []


# --- dict builders -----------------------------------------------------------------------------------------
def _progress(box: _Mailbox, request: GenerationRequest, model: dict, started: float, loading: str | None) -> dict:
    latest = box.latest
    candidates = [] if latest is None else [
        {"rank": None, "index": i, "code": c.text, "finish_reason": c.finish_reason, "tokens": len(c.token_ids)}
        for i, c in enumerate(latest.candidates)]
    return {
        "status": box.phase,
        "model": model,
        "loading": loading if box.phase == "loading" else None,
        "progress": {"elapsed_s": round(time.perf_counter() - started, 3),
                     "generation_s": round(latest.stats.wall_s, 3) if latest else 0.0,
                     "budget_s": request.budget_s, "k": request.k,
                     "generated_tokens": latest.stats.generated_tokens if latest else 0,
                     "finished": sum(c["finish_reason"] is not None for c in candidates)},
        "candidates": candidates,
    }


def _entry(rank: int, indices: list[int], cands, reports) -> dict:
    """The fields every displayed candidate has, from its first copy (and the reasons of all copies)."""
    head = cands[indices[0]]
    report = reports[indices[0]] if reports else None
    findings = [asdict(f) for f in report.findings] if report is not None else []
    return {
        "rank": rank, "code": head.text, "count": len(indices), "indices": list(indices),
        "score": None, "scorer": None, "demoted": False,
        "score_parts": {"consistency": None, "logprob_term": None, "static_penalty": None,
                        "mean_logprob": _finite(sum(head.logprobs) / len(head.logprobs)) if head.logprobs else None},
        "finish_reason": head.finish_reason,
        "finish_reasons": dict(Counter(cands[i].finish_reason for i in indices)),
        "tokens": len(head.token_ids),
        "parses": report.parses if report is not None else None,
        "complete": report.complete if report is not None else None,
        "n_errors": len(report.errors) if report is not None else None,
        "n_warnings": len(report.warnings) if report is not None else None,
        "findings": findings,
    }


def _mark_ties(entries: list[dict]) -> None:
    """Say where equal scores were ordered by the tie rule (rerank.rank: higher mean log-probability, then
    generation order), so that two equal numbers in a row explain themselves."""
    for entry, other in zip(entries, entries[1:]):
        if entry["score"] is not None and entry["score"] == other["score"] and entry["demoted"] == other["demoted"]:
            entry["tie_break"] = other["tie_break"] = TIE_RULE
    for entry in entries:
        entry.setdefault("tie_break", None)


TIE_RULE = "equal score: the higher mean log-probability ranks first, then the earlier row"


def _unranked(result: GenerationResult, reports) -> list[dict]:
    """Without rerank: identical texts merged, in generation order, no scores."""
    groups: dict[str, list[int]] = {}
    for index, candidate in enumerate(result.candidates):
        key = "\n".join(line.rstrip() for line in candidate.text.rstrip().splitlines())
        groups.setdefault(key, []).append(index)
    return [_entry(place + 1, indices, result.candidates, reports) for place, indices in enumerate(groups.values())]


def _stats(result: GenerationResult) -> dict:
    stats = result.stats.as_dict()
    speculation = result.stats.proposed_tokens > 0
    stats["speculation"] = speculation
    if not speculation:  # acceptance and draft length mean nothing without drafts
        stats["acceptance_rate"] = stats["mean_draft_length"] = None
    return stats


def _request_dict(request: GenerationRequest) -> dict:
    return {"prompt_chars": len(request.prompt), "k": request.k, "budget_s": request.budget_s,
            "temperature": request.temperature, "top_p": request.top_p, "max_new_tokens": request.max_new_tokens,
            "seed": request.seed}


def _finite(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
