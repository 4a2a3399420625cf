"""The request pipeline: generate k candidates (streaming), analyze, check, rerank, into one typed RunResult.

Nothing here knows Gradio or validates fields (app/requests.py does): the objects it works with (engines,
analyzer) are given to it, and anything that fails inside a run is logged and reported as an InternalError.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import languages
import rerank
from app import search, stated
from app.evidence import AGREEMENT, CHECKS_PASSED, ENDED, STATED_AGREEMENT, evidence_for
from app.model_checks import (
    CONTINUATION,
    ModelCheckSettings,
    tail_checks,
    tested_function,
    tests_asked,
    tests_written,
    with_tails,
)
from app.model_examples import ExampleReaderSettings, examples_request, read_examples, unread_calls
from app.requests import CheckRequest
from app.results import (
    ChecksInfo,
    Language,
    ModelTests,
    Progress,
    RankedEntry,
    RunResult,
    Timings,
    candidate_fields,
    finite,
    mark_ties,
    request_notes,
)
from app.runs import BusyError, RunControl, as_reported
from app.search import Search, SearchSettings, combined, round_request
from app.settled import Majority, Settled
from checks import CandidateChecks, Check, CheckRunner, checks_for_infill, checks_for_prompt, checks_for_words
from checks.runner import PASSED
from checks.stated import reads_stated
from engine import (
    Candidate,
    CandidateSource,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    answer_skips,
    split_answer,
)
from engine.types import FINISH_STOP
from rerank import dual_agreement
from static_eval import StaticAnalyzer

log = logging.getLogger(__name__)


def _ended_program(result: GenerationResult, drafts: Drafts) -> str | None:
    """The program of the first row that ended by itself (the greedy row where it did), else None: a row cut by
    its limit leaves code the tests after it could not be read with."""
    ended = [i for i, row in enumerate(result.candidates) if row.finish_reason == FINISH_STOP]
    return drafts.program(ended[0]) if ended else None


def _own_checks(request: GenerationRequest, checks: CheckRequest) -> list[Check]:
    """The checks a request carries before any row is drawn: its examples (in the prompt's code, or the asserts of a
    request in words), then the user's own."""
    return Drafts.of(request, GenerationResult([], GenerationStats())).checks() + list(checks.user)


def _ended(result: GenerationResult) -> list[float]:
    """1 for each row that ended by itself, else 0 (the ENDED evidence)."""
    return [1.0 if row.finish_reason == FINISH_STOP else 0.0 for row in result.candidates]


def _either(should_stop, watch: Settled | Majority | None):
    """The engine's should_stop: the run's own, or the settled rule's."""
    if watch is None:
        return should_stop
    return lambda: watch.should_stop() or bool(should_stop and should_stop())


def _both(on_update, watch: Settled | Majority | None):
    """The engine's on_update: the settled rule hears the rows first, then the run's own listener."""
    if watch is None:
        return on_update

    def hear(partial: GenerationResult) -> None:
        watch.hear(partial)
        if on_update is not None:
            on_update(partial)

    return hear


def _stopped(control: RunControl | None) -> bool:
    """Whether the run was superseded, gone or stopped (read afresh each time: it may come at any moment)."""
    return control is not None and control.stopped


@dataclass
class _Drawn:
    """What one run has drawn and judged so far: the first round's rows, then each search round's after them."""

    result: GenerationResult
    drafts: Drafts
    reports: list | None  # static reports, one per row (None: analysis is off)
    info: ChecksInfo  # the request's checks
    outcomes: list[CandidateChecks] | None  # each row's outcomes on them (None: not run)
    check_notes: list[str]
    rounds: int  # rounds drawn
    last_round_s: float  # the last round's seconds (reading the examples aside)
    judge_s: float  # the last round's analysis and checks
    majority_stopped: bool = False  # the majority rule stopped the first round's growing rows (app/settled.py)


@dataclass
class Pipeline:
    """generate -> analyze -> check -> rerank for one request, as a RunResult (see `run`)."""

    analyzer: StaticAnalyzer | None = None  # None: no static analysis
    checker: CheckRunner | None = None  # runs the user's examples in the sandbox; None: checks are off
    rank_settings: rerank.RankSettings | None = None  # None: rerank's defaults
    searching: SearchSettings = field(default_factory=SearchSettings)  # when more rounds are drawn (app/search.py)
    model_tests: ModelCheckSettings | None = None  # tests the model writes where a prompt has no checks; None: off
    stated_checks: bool = True  # rank by the checks the answers state themselves where the prompt has none
    settle: bool = True  # stop the growing rows once the answer is settled (app/settled.py)
    example_reader: ExampleReaderSettings | None = None  # the model reads the examples the patterns miss; None: off
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
        on_round: Callable[[int, int], None] | None = None,
    ) -> RunResult:
        """Generate, analyze, check and rank synchronously; the ranked result. Where no candidate passes every
        check, further rounds of k rows are drawn while the budget allows (app/search.py); `on_round(round, drawn)`
        hears of each, and `on_update` gets every round's growing rows after the earlier rounds' rows."""
        started = time.perf_counter()
        spent = Timings()
        given = request  # as the user sent it; `request` is how the rows are asked from here on
        if self.stated_checks and not _own_checks(request, checks):  # where the answers' checks will be read
            request = stated.asking_examples(request)
        drawn = self._first_round(engine, request, control, on_update, checks, spent, started)
        reason = self._search(engine, request, control, on_update, checks, on_round, spent, drawn, started)
        tests, agreement, own = self._answers_evidence(engine, request, control, checks, reason, spent, drawn, started)
        checked = time.perf_counter()
        gathered = {
            ENDED.name: _ended(drawn.result) if drawn.majority_stopped else None,
            AGREEMENT.name: agreement,
            STATED_AGREEMENT.name: stated.agreement(own[1]) if own else None,
        }
        candidates, matrix = self._rank(drawn.result, drawn.drafts, drawn.reports, drawn.outcomes, gathered, own)
        ranked = time.perf_counter()
        spent.ranking_s, spent.pipeline_s = round(ranked - checked, 4), round(ranked - started, 4)
        drafts = drawn.drafts
        return RunResult(
            language=Language(drafts.language, drafts.found_from, request.in_words, self._analyses(drawn.reports)),
            request=given,
            stopped=control.reason if _stopped(control) else None,  # read last: it may come late
            ranking_method=self.rank_settings.label(),
            static_analysis=self.analyzer is not None,
            checks=drawn.info,
            notes=list(self.notes) + request_notes(given) + drawn.check_notes,
            candidates=candidates,
            similarity=matrix,
            engine_stats=drawn.result.stats,
            search=Search(drawn.rounds, len(drawn.result.candidates), len(candidates), reason),
            model_tests=tests,
            stated_checks=own[0] if own else None,
            timings=spent,
        )

    def _first_round(self, engine, request, control, on_update, checks: CheckRequest, spent, started) -> _Drawn:
        """The first round's k rows, analyzed; the examples read (by the patterns, then the model's reader while
        time is left); the checks run on the rows unless the run was stopped meanwhile."""
        should_stop = control.should_stop if control else None
        watch = self._settled(request, checks)
        asked = self._tailed(request, checks)
        try:
            result = self._generate(engine, asked, None, _either(should_stop, watch), _both(on_update, watch), spent)
        finally:
            if watch is not None:
                watch.close()
        drafts = Drafts.of(request, result)
        reports = self._analyze(drafts, [c.cut for c in result.candidates], spent)
        reading, examples = time.perf_counter(), drafts.checks()
        if checks.run and not _stopped(control):  # superseded or gone: what it had, without running it
            left = request.budget_s - (reading - started)
            examples += self._read_examples(engine, request, drafts, examples, left, should_stop, spent)
        read_s = time.perf_counter() - reading  # not part of a round: the rounds to come need none
        asked = checks if not _stopped(control) else CheckRequest(run=False)
        info, outcomes, check_notes = self._check(drafts, examples, asked, spent)
        settled_note = watch.note(result) if watch else None
        check_notes += [settled_note] if settled_note else []
        round_s = time.perf_counter() - started - read_s
        majority = isinstance(watch, Majority) and settled_note is not None
        judge_s = spent.analysis_s + spent.checks_s
        return _Drawn(result, drafts, reports, info, outcomes, check_notes, 1, round_s, judge_s, majority)

    def _tailed(self, request: GenerationRequest, checks: CheckRequest) -> GenerationRequest:
        """The first round's request: its rows go on past their own code into an assert line each (the engine's
        tails, model_checks.with_tails) where the model's tests are asked in the continuation form, the request has
        no checks of its own (the prompt's examples, the user's) and its checks run here; else as it is."""
        usable = checks.run and request.k > 1 and request.temperature > 0 and self._runs_language(request.language)
        if not usable or _own_checks(request, checks):
            return request
        return with_tails(request, self.model_tests)

    def _settled(self, request: GenerationRequest, checks: CheckRequest) -> Settled | Majority | None:
        """The settled rule's watcher for a first round of several rows of Python, code or answers in words (measured
        there; a build step per row would outlast the steps it saves) whose checks run here, else None; none either
        where the model's reader will add examples after the round (the rows would be judged on fewer checks than the
        ranking's). Answers in words that carry no check get the majority rule (app/settled.py)."""
        python = request.language is languages.PYTHON
        if not (self.settle and python and checks.run and request.k > 1 and self._runs_language(request.language)):
            return None
        found = _own_checks(request, checks)
        if not found:  # the majority rule where it was measured: the answers' own checks rank them, no tails
            measured = request.in_words and self.stated_checks and self.model_tests is None
            return Majority(request) if measured else None
        name = tested_function(request)
        if self.example_reader is not None and name and unread_calls(request.prompt, name, found):
            return None

        def run(programs: list[str]) -> list[int]:
            return [o.passed for o in self.checker.run(programs, found, request.language)]

        return Settled(request, found, run, lambda partial, row: Drafts.of(request, partial).program(row))

    def _search(self, engine, request, control, on_update, checks, on_round, spent, drawn: _Drawn, started) -> str:
        """Further rounds of k rows while no row passes every check and the budget allows (app/search.py), each
        added to `drawn`; `on_round(round, drawn)` hears of each. Why the search stopped."""
        while True:
            left = request.budget_s - (time.perf_counter() - started)
            passed = [o.passed for o in drawn.outcomes] if drawn.outcomes is not None else None
            reason = self.searching.why_stop(
                drawn.rounds,
                left,
                drawn.last_round_s,
                passed,
                len(drawn.info.items),
                request,
                checks.search,
                _stopped(control),
            )
            if reason is not None:
                return reason
            if on_round is not None:
                on_round(drawn.rounds + 1, len(drawn.result.candidates))
            if not self._next_round(engine, request, control, on_update, spent, drawn, left):
                return search.STOPPED

    def _next_round(self, engine, request, control, on_update, spent: Timings, drawn: _Drawn, left: float) -> bool:
        """One more round drawn, analyzed and checked into `drawn`; False (its rows dropped unjudged, the lock freed
        soon) where the run was superseded, gone or stopped meanwhile."""
        began, judged = time.perf_counter(), spent.analysis_s + spent.checks_s
        asked = round_request(request, drawn.rounds, left - drawn.judge_s)  # time left for its analysis and checks
        should_stop = control.should_stop if control else None
        more = self._generate(engine, asked, drawn.result, should_stop, on_update, spent)
        if _stopped(control):
            return False
        new = Drafts.of(request, more, pinned=drawn.drafts)
        drawn.reports = self._analyze(new, [c.cut for c in more.candidates], spent, drawn.reports)
        drawn.outcomes = drawn.outcomes + self._run_checks(new, drawn.info.items, spent)
        drawn.result, drawn.drafts = combined(drawn.result, more), drawn.drafts.followed_by(new)
        drawn.rounds, drawn.last_round_s = drawn.rounds + 1, time.perf_counter() - began
        drawn.judge_s = spent.analysis_s + spent.checks_s - judged
        return True

    def _answers_evidence(self, engine, request, control, checks, reason: str, spent, drawn: _Drawn, started):
        """Where the request has no checks to search by: the model's tests and each row's agreement on them, then
        the checks the answers state themselves with every row's outcomes (one sandboxed run per distinct row, if
        time is left); (tests, agreement, own), each None where it was not gathered."""
        tests, agreement, own = None, None, None
        if reason != search.NO_CHECKS or not checks.run:
            return tests, agreement, own
        should_stop = control.should_stop if control else None
        if not _stopped(control):
            left = request.budget_s - (time.perf_counter() - started)
            tests, agreement = self._model_tests(engine, request, drawn, left, should_stop, spent)
        if not _stopped(control) and time.perf_counter() - started < request.budget_s:
            own = self._stated_checks(drawn.drafts, spent)
        return tests, agreement, own

    @staticmethod
    def _generate(engine, request, before, should_stop, on_update, spent: Timings) -> GenerationResult:
        """One round's rows (`on_update` hears of them after the rows of the rounds `before`)."""
        started = time.perf_counter()
        hear = on_update if on_update is None or before is None else (lambda part: on_update(combined(before, part)))
        result = engine.generate(request, on_update=hear, should_stop=should_stop)
        spent.generation_s = round(spent.generation_s + time.perf_counter() - started, 4)
        return result

    def _analyze(self, drafts: Drafts, cut: list[bool], spent: Timings, before: list | None = None) -> list | None:
        """Each candidate's static report (in its language) after the reports `before`, or None when static
        analysis is off."""
        if self.analyzer is None:
            return None
        started = time.perf_counter()
        reports = self.analyzer.analyze(drafts.prompt, drafts.codes, cut, drafts.suffix, drafts.language)
        spent.analysis_s = round(spent.analysis_s + time.perf_counter() - started, 4)
        return (before or []) + list(reports)

    @staticmethod
    def _analyses(reports) -> tuple[str, ...]:
        """The analyses that ran on the candidates (syntax, lint, types), as the first report says."""
        return tuple(reports[0].analyses) if reports else ()

    def _check(
        self,
        drafts: Drafts,
        examples: list[Check],
        asked: CheckRequest,
        spent: Timings,
    ) -> tuple[ChecksInfo, list[CandidateChecks] | None, list[str]]:
        """The checks of this request (its `examples`: those in the prompt's code, or the asserts in a request in
        words, and those the model read; then the user's own), each candidate's outcomes when they ran (one
        sandboxed program each), and what to say."""
        found = list(examples) + list(asked.user)
        reason = self.checker.reason_for(drafts.language) if self.checker else "checks are off (--no-run-checks)"
        available = reason is None
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
        return replace(info, ran=True), self._run_checks(drafts, info.items, spent), []

    def _run_checks(self, drafts: Drafts, found, spent: Timings) -> list[CandidateChecks]:
        """Each row's outcomes on the checks (one sandboxed program per row)."""
        started = time.perf_counter()
        outcomes = self.checker.run(drafts.programs(), list(found), drafts.language)
        spent.checks_s = round(spent.checks_s + time.perf_counter() - started, 4)
        return list(outcomes)

    def _runs_language(self, language: languages.Language) -> bool:
        """Whether this pipeline's sandbox runs checks on code in `language`."""
        return self.checker is not None and self.checker.reason_for(language) is None

    def _read_examples(self, engine, request, drafts, found, left_s: float, should_stop, spent: Timings) -> list[Check]:
        """Where this pipeline has a reader and the prompt's Python function calls itself in its docstring more often
        than the examples `found` by the patterns: the examples the model reads there (app/model_examples.py);
        else none."""
        settings, name = self.example_reader, tested_function(request)
        usable = settings is not None and self._runs_language(drafts.language)
        if not usable or name is None or request.suffix or left_s < settings.min_left_s:
            return []
        if not unread_calls(request.prompt, name, found):
            return []
        asked = examples_request(request, name, settings)
        try:
            result = self._generate(
                engine, replace(asked, budget_s=min(asked.budget_s, left_s)), None, should_stop, None, spent
            )
        except Exception:  # noqa: BLE001 - a help to the request, not the request: the run goes on without it
            log.exception("reading the prompt's examples with the model failed; the run goes on without them")
            return []
        return read_examples(asked, result, request.prompt, name, found)

    def _model_tests(self, engine, request, drawn: _Drawn, left_s: float, should_stop, spent: Timings):
        """Where this pipeline asks for them and the request is a Python function or a request in words for one: the
        tests the model wrote for it (app/model_checks.py: in the continuation form, the asserts the round's rows
        wrote in their tails; else, or where the engine wrote none, in a request of their own while time is left)
        and each row's dual agreement on them; else (None, None)."""
        settings, drafts = self.model_tests, drawn.drafts
        runs = self._runs_language(drafts.language)
        usable = settings is not None and runs and request.temperature > 0 and request.k > 1
        if not usable:
            return None, None
        if settings.form == CONTINUATION and any(row.tail is not None for row in drawn.result.candidates):
            found = tail_checks(drawn.result, tested_function(request), drafts.codes)  # written in the round's batch
        else:
            found = self._tests_asked(engine, request, drafts, drawn.result, left_s, should_stop, spent)
            if found is None:
                return None, None
        if not found:
            return ModelTests(()), None
        outcomes = self._run_checks(drafts, found, spent)
        return ModelTests(tuple(found)), dual_agreement(
            [tuple(o.status == PASSED for o in c.outcomes) for c in outcomes]
        )

    def _tests_asked(self, engine, request, drafts: Drafts, result, left_s: float, should_stop, spent: Timings):
        """The tests the model writes in a request of their own (CodeT's in words, or the continuation past the first
        row that ended by itself, where the round's rows wrote no tails), or None where none is asked (no function,
        no such row, too little time left)."""
        settings = self.model_tests
        program = _ended_program(result, drafts)
        asked = tests_asked(request, program, settings)
        if asked is None or left_s < settings.min_left_s:
            return None
        written = self._generate(
            engine, replace(asked, budget_s=min(asked.budget_s, left_s)), None, should_stop, None, spent
        )
        return tests_written(asked, written, tested_function(request), program, settings)

    def _stated_checks(self, drafts: Drafts, spent: Timings):
        """Where this pipeline reads them and the drafts are in a language they are read in (Python, JavaScript,
        TypeScript) that the sandbox runs: the checks the rows state themselves and every row's outcomes on all of
        them (app/stated.py); else None."""
        if not self.stated_checks or not self._runs_language(drafts.language) or not reads_stated(drafts.language.name):
            return None
        programs = drafts.programs()
        found = stated.gather(programs, drafts.language.name)
        if not found.items:
            return None
        started = time.perf_counter()
        outcomes = stated.cross_check(self.checker, programs, found, drafts.language)
        spent.checks_s = round(spent.checks_s + time.perf_counter() - started, 4)
        return found, outcomes

    def _rank(
        self,
        result: GenerationResult,
        drafts: Drafts,
        reports,
        outcomes: list[CandidateChecks] | None,
        gathered: dict[str, list[float] | None],
        own=None,
    ) -> tuple[list[RankedEntry], list[list[float | None]]]:
        """One entry per distinct candidate (k at most), best first, and their similarity matrix in the same order
        (its diagonal, a candidate with itself, left empty: it says nothing)."""
        cands = drafts.as_candidates(result.candidates)
        gathered = {CHECKS_PASSED.name: [o.passed for o in outcomes] if outcomes is not None else None, **gathered}
        ranked, similarities = rerank.rank_with_similarity(
            [c.text for c in cands],
            [c.logprobs for c in cands],
            reports,
            self.rank_settings,
            evidence=evidence_for(gathered),
        )
        shown = ranked[: drafts.request.k]  # after a search, the k best of all that were drawn
        candidates = [self._ranked_candidate(r, cands, reports, outcomes, drafts, own) for r in shown]
        mark_ties(candidates)
        rows = similarities.tolist()[: len(shown)]
        matrix = [
            [None if i == j else finite(v) for j, v in enumerate(row[: len(shown)])] for i, row in enumerate(rows)
        ]
        return candidates, matrix

    def _ranked_candidate(self, ranked: rerank.RankedCandidate, cands, reports, outcomes, drafts, own) -> RankedEntry:
        """One ranked candidate: its first copy's fields, its score and the parts of it, its checks (and where it
        fails an example it states itself, a finding that says so), an answer's example usage apart."""
        parts = ranked.as_dict()
        fields = candidate_fields(ranked.rank, ranked.indices, cands, reports)
        if own is not None:
            head = ranked.indices[0]
            program = drafts.program(head)
            first_line = drafts.prompt.count("\n") + 1  # where the row begins in its program
            fields["findings"] += stated.own_failures(own[0], own[1][head], program, first_line, drafts.language.name)
        usage = None  # an answer's example usage, shown beside its code
        if drafts.request.in_words:
            asked = "\n".join(turn.content for turn in drafts.request.turns if turn.role == "user")
            fields["code"], usage, fields["findings"] = stated.shown(
                fields["code"], fields["findings"], asked, drafts.language.name
            )
        return RankedEntry(
            **fields,
            example_usage=usage,
            explanation=drafts.explanations[ranked.indices[0]] if drafts.explanations else None,
            score=parts["score"],
            scorer=ranked.scorer,
            demoted=ranked.demoted,
            score_parts={
                **ranked.evidence,
                "consistency": parts["consistency"],
                "logprob_term": parts["logprob_term"] if self.rank_settings.uses_logprobs else None,
                "static_penalty": parts["static_penalty"],
                "mean_logprob": parts["mean_logprob"],
            },
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
            yield box.progress(request, model, time.perf_counter() - started, loading())
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
                progress = box.progress(request, model, time.perf_counter() - started, loading())
                yield replace(progress, leader=self.provisional_leader(progress, request))
        finally:
            if not finished:
                control.stop("the request was cancelled")

    def provisional_leader(self, progress: Progress, request: GenerationRequest) -> int | None:
        """The row this pipeline's ranking puts first among the first round's rows finished so far, read by agreement
        (and the rows' order) alone: the analysis and the checks come once every row is done. None before a row has
        finished, during a search's later rounds, or for one row."""
        if progress.status != "generating" or progress.search_round > 1 or progress.k < 2:
            return None
        finished = [row for row in progress.candidates if row.finish_reason is not None]
        if not finished:
            return None
        skip = answer_skips(request)
        texts = [split_answer(row.code, skip=skip).code if request.in_words else row.code for row in finished]
        settings = self.rank_settings
        if settings.uses_logprobs:  # the growing rows carry no log-probabilities
            settings = replace(settings, scorer="gsc")
        try:
            return finished[rerank.rank(texts, settings=settings)[0].indices[0]].index
        except Exception:  # noqa: BLE001 - a hint on the page, not the run: the run goes on without it
            log.exception("ranking the finished rows for the page's best so far failed; shown without one")
            return None

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
        on_round: Callable[[int, int], None] | None = None,
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
            final = self.run(engine, request, control, on_update=on_update, checks=checks, on_round=on_round)
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
                on_round=lambda number, drawn: box.post(search_round=number, drawn_before=drawn),
            )
            box.post(final=final)
        except Exception as err:  # noqa: BLE001 - handed over to the consumer thread, which raises it
            box.post(error=as_reported(err))


@dataclass(frozen=True)
class Drafts:
    """What is judged of a run's rows: the code of each (a row itself, or the code block of an answer in words),
    what it is read with (the prompt and suffix around code; nothing around an answer's code), and its language."""

    request: GenerationRequest
    codes: list[str]  # per row
    explanations: list[str] | None  # per row, the prose of an answer in words; None for code
    language: languages.Language  # of the code: the request's, or for answers the fence most of them name
    found_from: str  # how: the request's languages.Detection.how, or "fence (answers)"

    @staticmethod
    def of(request: GenerationRequest, result: GenerationResult, pinned: Drafts | None = None) -> Drafts:
        """The rows' code and language; `pinned`: a later round's rows, judged in the first round's language."""
        if pinned is not None:
            fresh = Drafts.of(request, result)
            return replace(fresh, language=pinned.language, found_from=pinned.found_from)
        language, found_from = request.language, request.language_from
        if not request.in_words:
            return Drafts(request, [c.text for c in result.candidates], None, language, found_from)
        answers = [split_answer(c.text, skip=answer_skips(request)) for c in result.candidates]
        fenced = Counter(languages.from_fence("```" + a.fence) for a in answers if a.fence)
        fenced.pop(None, None)
        if fenced and found_from != languages.FIELD:
            language, found_from = fenced.most_common(1)[0][0], "fence (answers)"
        codes, prose = [a.code for a in answers], [a.explanation for a in answers]
        return Drafts(request, codes, prose, language, found_from)

    def followed_by(self, later: Drafts) -> Drafts:
        """These rows, then a later round's (read in the same language)."""
        explanations = None if self.explanations is None else self.explanations + later.explanations
        return replace(self, codes=self.codes + later.codes, explanations=explanations)

    @property
    def prompt(self) -> str:
        return "" if self.request.in_words else self.request.prompt

    @property
    def suffix(self) -> str:
        return self.request.suffix

    def program(self, row: int) -> str:
        """The program a row's checks run in: the code around it, the row, the code after it."""
        return self.prompt + self.codes[row] + self.suffix

    def programs(self) -> list[str]:
        """Every row's program (`program`), in row order."""
        return [self.program(row) for row in range(len(self.codes))]

    def checks(self) -> list[Check]:
        """The examples the request carries: in the prompt's code (or around a middle), or the assert lines of a
        request in words."""
        request = self.request
        if request.in_words:
            return checks_for_words(request.turns[-1].content, self.language)
        if request.suffix:
            return checks_for_infill(request.prompt, request.suffix, self.language)
        return checks_for_prompt(request.prompt, self.language)

    def as_candidates(self, rows: list[Candidate]) -> list[Candidate]:
        """The rows as the ranking reads them: their code (an answer's block) with their tokens' probabilities."""
        if not self.request.in_words:
            return rows
        return [replace(row, text=code) for row, code in zip(rows, self.codes)]


class _Mailbox:
    """The worker's latest news for the consumer: phase, latest partial result, RunResult or error."""

    def __init__(self):
        self._cond = threading.Condition()
        self.phase = "waiting"
        self.latest: GenerationResult | None = None
        self.search_round = 1  # the round being drawn (app/search.py), and the rows drawn before it
        self.drawn_before = 0
        self.final: RunResult | None = None
        self.error: BaseException | None = None

    def post(self, **news) -> None:
        with self._cond:
            for name, value in news.items():
                setattr(self, name, value)
            if "final" in news or "error" in news:
                self._cond.notify_all()

    def progress(self, request: GenerationRequest, model: dict, elapsed_s: float, loading: str | None) -> Progress:
        with self._cond:
            phase, latest, rounds = self.phase, self.latest, (self.search_round, self.drawn_before)
        return Progress.of(phase, latest, request, model, elapsed_s, loading, rounds)

    def wait(self, timeout: float) -> tuple[RunResult | None, BaseException | None]:
        """Wait up to `timeout` for the end of the run; (final, error), both None while it runs."""
        with self._cond:
            self._cond.wait_for(lambda: self.final is not None or self.error is not None, timeout)
            return self.final, self.error
