"""The request pipeline: generate k candidates (streaming), analyze, check, rerank, into one typed RunResult.

Nothing here knows Gradio or validates fields (app/requests.py does): the objects it works with (engines,
analyzer) are given to it, and anything that fails inside a run is logged and reported as an InternalError.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import rerank
from app.requests import CheckRequest
from app.results import (
    ChecksInfo,
    Progress,
    RankedEntry,
    RunResult,
    ScoreParts,
    Timings,
    candidate_fields,
    finite,
    mark_ties,
    request_notes,
)
from app.runs import BusyError, RunControl, as_reported
from checks import CandidateChecks, CheckRunner, checks_for_infill, checks_for_prompt
from engine import CandidateSource, GenerationRequest, GenerationResult
from static_eval import StaticAnalyzer


@dataclass
class Pipeline:
    """generate -> analyze -> check -> rerank for one request, as a RunResult (see `run`)."""

    analyzer: StaticAnalyzer | None = None  # None: no static analysis
    checker: CheckRunner | None = None  # runs the user's examples in the sandbox; None: checks are off
    rank_settings: rerank.RankSettings | None = None  # None: rerank's defaults
    update_interval_s: float = 0.5  # streaming: at most one partial result per interval
    busy_timeout_s: float = 30.0  # how long a run waits for the engine before "busy, retry"
    idle_timeout_s: float = 5.0  # a run whose consumer stopped reading this long is stopped
    notes: list[str] = field(default_factory=list)  # set up by __post_init__: what is off

    def __post_init__(self):
        self.rank_settings = self.rank_settings or rerank.RankSettings()
        self.notes = [] if self.analyzer is not None else ["static analysis is off: no findings are shown"]

    def run(
        self,
        engine: CandidateSource,
        request: GenerationRequest,
        control: RunControl | None = None,
        on_update: Callable[[GenerationResult], None] | None = None,
        checks: CheckRequest = CheckRequest(),
    ) -> RunResult:
        """Generate, analyze, check and rank synchronously; the ranked result."""
        started = time.perf_counter()
        result = engine.generate(request, on_update=on_update, should_stop=control.should_stop if control else None)
        generated = time.perf_counter()
        texts = [c.text for c in result.candidates]
        cut = [c.cut for c in result.candidates]
        reports = self.analyzer.analyze(request.prompt, texts, cut, request.suffix) if self.analyzer else None
        analyzed = time.perf_counter()
        stopped = control is not None and control.stopped  # superseded or gone: what it had, without running it
        info, outcomes, check_notes = self._check(request, texts, checks if not stopped else CheckRequest(run=False))
        checked = time.perf_counter()
        candidates, matrix = self._rank(result, reports, outcomes)
        ranked = time.perf_counter()
        return RunResult(
            request=request,
            stopped=control.reason if stopped else None,
            ranking_method=self.rank_settings.label(),
            static_analysis=self.analyzer is not None,
            checks=info,
            notes=list(self.notes) + request_notes(request) + check_notes,
            candidates=candidates,
            similarity=matrix,
            engine_stats=result.stats,
            timings=Timings(
                generation_s=round(generated - started, 4),
                analysis_s=round(analyzed - generated, 4),
                checks_s=round(checked - analyzed, 4),
                ranking_s=round(ranked - checked, 4),
                pipeline_s=round(ranked - started, 4),
            ),
        )

    def _check(
        self,
        request: GenerationRequest,
        texts: list[str],
        asked: CheckRequest,
    ) -> tuple[ChecksInfo, list[CandidateChecks] | None, list[str]]:
        """The checks of this request (the examples in the prompt's code, then the user's own), each candidate's
        outcomes when they ran (prompt + candidate + suffix, one sandboxed program each), and what to say."""
        found = (
            checks_for_infill(request.prompt, request.suffix) if request.suffix else checks_for_prompt(request.prompt)
        ) + list(asked.user)
        available = self.checker is not None and self.checker.available
        reason = None if available else self.checker.reason if self.checker else "checks are off (--no-run-checks)"
        info = ChecksInfo(available, reason, ran=False, items=tuple(found))
        if not found:
            return info, None, []
        if not asked.run:
            return (
                info,
                None,
                [f"{len(found)} checks were found and not run (run_checks is off, or the run was stopped)"],
            )
        if not available:
            return info, None, [f"{len(found)} checks were found and not run: {reason}"]
        outcomes = self.checker.run([request.prompt + text + request.suffix for text in texts], found)
        return replace(info, ran=True), outcomes, []

    def _rank(
        self,
        result: GenerationResult,
        reports,
        outcomes: list[CandidateChecks] | None,
    ) -> tuple[list[RankedEntry], list[list[float | None]]]:
        """One entry per distinct candidate, best first, and their similarity matrix in the same order (its
        diagonal, a candidate with itself, left empty: it says nothing)."""
        cands = result.candidates
        passes = [o.passed for o in outcomes] if outcomes is not None else None
        ranked, similarities = rerank.rank_with_similarity(
            [c.text for c in cands], [c.logprobs for c in cands], reports, self.rank_settings, check_passes=passes
        )
        candidates = [self._ranked_candidate(r, cands, reports, outcomes) for r in ranked]
        mark_ties(candidates)
        matrix = [
            [None if i == j else finite(v) for j, v in enumerate(row)] for i, row in enumerate(similarities.tolist())
        ]
        return candidates, matrix

    def _ranked_candidate(self, ranked: rerank.RankedCandidate, cands, reports, outcomes) -> RankedEntry:
        """One ranked candidate: its first copy's fields, its score and the parts of it, its checks."""
        parts = ranked.as_dict()
        return RankedEntry(
            **candidate_fields(ranked.rank, ranked.indices, cands, reports),
            score=parts["score"],
            scorer=ranked.scorer,
            demoted=ranked.demoted,
            score_parts=ScoreParts(
                checks_passed=ranked.checks_passed,
                consistency=parts["consistency"],
                logprob_term=parts["logprob_term"] if self.rank_settings.uses_logprobs else None,
                static_penalty=parts["static_penalty"],
                mean_logprob=parts["mean_logprob"],
            ),
            checks=outcomes[ranked.indices[0]] if outcomes is not None else None,
        )

    # --- streaming ---------------------------------------------------------------------------------------
    def stream(
        self,
        request: GenerationRequest,
        engine_for: Callable[[], CandidateSource],
        lock: threading.Lock,
        control: RunControl,
        model: dict,
        loading: Callable[[], str | None] = lambda: None,
        checks: CheckRequest = CheckRequest(),
    ) -> Iterator[Progress | RunResult]:
        """Yield Progress states ("waiting", "loading", "generating") then the RunResult ("done").

        The run happens in a worker thread that waits for `lock` (one generation at a time), gets the
        engine (`engine_for` may load it: minutes on a first start, so progress keeps the client alive),
        then runs the pipeline. Closing this generator early (a cancelled or disconnected client)
        stops the engine, which frees the lock within one step.
        """
        box = _Mailbox()
        worker = threading.Thread(
            target=self._work,
            args=(box, request, engine_for, lock, control, checks),
            name="ranked-drafts-run",
            daemon=True,
        )
        started = time.perf_counter()
        control.heartbeat()
        worker.start()
        finished = False
        try:
            yield Progress.of(box.phase, box.latest, request, model, time.perf_counter() - started, loading())
            while True:
                control.heartbeat()
                final, error = box.wait(self.update_interval_s)
                if error is not None:
                    finished = True
                    raise error
                if final is not None:
                    finished = True
                    final.timings.total_s = round(time.perf_counter() - started, 4)
                    final.model = model
                    yield final
                    return
                yield Progress.of(box.phase, box.latest, request, model, time.perf_counter() - started, loading())
        finally:
            if not finished:
                control.stop("the request was cancelled")

    def final(
        self,
        request: GenerationRequest,
        engine_for: Callable[[], CandidateSource],
        lock: threading.Lock,
        control: RunControl,
        model: dict,
        checks: CheckRequest = CheckRequest(),
    ) -> RunResult:
        """The RunResult of a run, for callers that wait for it without progress (HTTP APIs): the
        run happens in the caller's thread, and the caller stops `control` when its client goes. Errors are raised
        as reported (user errors in the app's terms, anything else an InternalError, logged)."""
        started = time.perf_counter()
        try:
            final = self._serve(request, engine_for, lock, control, checks)
        except Exception as err:
            reported = as_reported(err)
            if reported is err:
                raise
            raise reported from err
        final.timings.total_s = round(time.perf_counter() - started, 4)
        final.model = model
        return final

    def _serve(
        self,
        request: GenerationRequest,
        engine_for: Callable[[], CandidateSource],
        lock: threading.Lock,
        control: RunControl,
        checks: CheckRequest,
        on_phase: Callable[[str], None] = lambda phase: None,
        on_update: Callable[[GenerationResult], None] | None = None,
    ) -> RunResult:
        """Wait for `lock` (one generation at a time), get the engine (`engine_for` may load it), run the pipeline;
        the RunResult with the time spent waiting and loading."""
        started = time.perf_counter()
        if not lock.acquire(timeout=self.busy_timeout_s):
            raise BusyError(
                f"busy: the engine is still serving another request after {self.busy_timeout_s:g} s "
                "of waiting; retry in a moment"
            )
        try:
            on_phase("loading")
            locked = time.perf_counter()
            engine = engine_for()
            loaded = time.perf_counter()
            on_phase("generating")
            final = self.run(engine, request, control, on_update=on_update, checks=checks)
        finally:
            lock.release()
        final.timings.wait_s, final.timings.load_s = round(locked - started, 4), round(loaded - locked, 4)
        return final

    def _work(
        self,
        box: _Mailbox,
        request,
        engine_for,
        lock: threading.Lock,
        control: RunControl,
        checks: CheckRequest,
    ) -> None:
        """The streaming run's worker thread: `_serve`, its news posted to `box`."""
        try:
            final = self._serve(
                request,
                engine_for,
                lock,
                control,
                checks,
                on_phase=lambda phase: box.post(phase=phase),
                on_update=lambda result: box.post(latest=result),
            )
            box.post(final=final)
        except Exception as err:  # noqa: BLE001 - handed over to the consumer thread, which raises it
            box.post(error=as_reported(err))


class _Mailbox:
    """The worker's latest news for the consumer: phase, latest partial result, RunResult or error."""

    def __init__(self):
        self._cond = threading.Condition()
        self.phase = "waiting"
        self.latest: GenerationResult | None = None
        self.final: RunResult | None = None
        self.error: BaseException | None = None

    def post(self, **news) -> None:
        with self._cond:
            for name, value in news.items():
                setattr(self, name, value)
            if "final" in news or "error" in news:
                self._cond.notify_all()

    def wait(self, timeout: float) -> tuple[RunResult | None, BaseException | None]:
        """Wait up to `timeout` for the end of the run; (final, error), both None while it runs."""
        with self._cond:
            self._cond.wait_for(lambda: self.final is not None or self.error is not None, timeout)
            return self.final, self.error
