"""No one waits for the slowest row once the answer is settled (issue 46): while a k-row request generates, each row
that ends by itself runs, sandboxed, on the checks the request carries (the prompt's examples, the user's asserts);
once the greedy row has ended and ENOUGH rows that ended pass every check, the rows still growing are stopped.

The checks run on a worker thread: the engine only reads the latest verdict at its next step and never waits for
the sandbox (a row that loops costs its own run, not the request's steps).

Replayed on the committed k=8 HumanEval samples (`python -m benchmarks.eval_outrun --settled 2`, scored with the
shipped ranking): the longest row's steps 75% of what they were, the ranked first draft 79.3% against 78.0% without
the rule (a long sampled row that outruns two passing siblings is seldom the one that should rank first), Pass@All
82.9% against 83.5% (docs/CPU.md).

A request in words that carries no check has nothing to settle on; there `Majority` stops the rows still growing once
the greedy row and more than half of the k rows have ended by themselves. Replayed on four saved bench_words draws
(MBPP in words without an example, 360 tasks, the rows ended in order of their length, the ended rows re-ranked on
their own stated checks: `python -m benchmarks.eval_majority`), the ranked first answer passed 245 times against 242
with every row, for about 70% of the longest row's steps (a long row is seldom the one the answers' own examples rank
first); end to end on 100 of those tasks, 18% less waiting and the ranked answer 2.47x greedy's median time instead
of 3.14x (docs/MEASUREMENTS.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from checks import Check
from engine import GenerationRequest, GenerationResult
from engine.types import FINISH_BUDGET, FINISH_STOP

log = logging.getLogger(__name__)
ENOUGH = 2  # rows that ended by themselves and pass every check


@dataclass
class Settled:
    """Hears a request's growing rows (`hear`, the engine's on_update) and says when to stop them (`should_stop`).
    `run(programs)` runs the checks on programs (the pipeline's sandbox) and gives each one's checks passed;
    `program(result, row)` is a row's program. `close()` when the generation is over."""

    request: GenerationRequest
    checks: list[Check]
    run: Callable[[list[str]], list[int]]  # checks passed per program
    program: Callable[[GenerationResult, int], str]
    enough: int = ENOUGH
    passing: set[int] = field(default_factory=set)  # rows that ended and pass every check
    heard: set[int] = field(default_factory=set)  # rows that ended and were sent to run
    settled: bool = False
    _pending: tuple[list[int], Future] | None = None
    _worker: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "settled-checks"))

    def hear(self, partial: GenerationResult) -> None:
        """Take the finished run's verdicts, send the rows that ended since to run; settle once the greedy row has
        ended and enough pass."""
        rows = partial.candidates
        if self.settled or not self.checks or len(rows) < 2:
            return
        self._collect()
        ended = [i for i, row in enumerate(rows) if row.finish_reason == FINISH_STOP and i not in self.heard]
        if ended and self._pending is None and self.checks:
            self._pending = (ended, self._worker.submit(self.run, [self.program(partial, i) for i in ended]))
            self.heard.update(ended)
        greedy_ended = not self.request.greedy_first or rows[0].finish_reason is not None
        self.settled = greedy_ended and len(self.passing) >= self.enough

    def _collect(self) -> None:
        if self._pending is None or not self._pending[1].done():
            return
        (ended, future), self._pending = self._pending, None
        try:
            passed = future.result()
        except Exception:  # noqa: BLE001 - a help to the request, not the request: the rows grow on
            log.exception("running the checks on finished rows failed; the rows grow to their own ends")
            self.checks = []
            return
        self.passing.update(i for i, n in zip(ended, passed) if n == len(self.checks))

    def should_stop(self) -> bool:
        return self.settled

    def close(self) -> None:
        """Let the worker go (a run still going ends within the sandbox's own limits)."""
        self._worker.shutdown(wait=False, cancel_futures=True)

    def note(self, result: GenerationResult) -> str | None:
        """What to say when the rule stopped rows, else None."""
        growing = _stopped_rows(result) if self.settled else None
        if growing is None:
            return None
        return f"settled: {len(self.passing)} finished rows passed every check, so the {growing} stopped there"


def _stopped_rows(result: GenerationResult) -> str | None:
    """The rows a settled rule stopped, as its note says them ('3 rows still growing were'), or None where none was."""
    stopped = sum(1 for row in result.candidates if row.finish_reason == FINISH_BUDGET)
    if not stopped:
        return None
    return "1 row still growing was" if stopped == 1 else f"{stopped} rows still growing were"


@dataclass
class Majority:
    """Hears a request's growing rows and says when to stop them where there is no check to settle on: once the
    greedy row has ended and more than half of the rows ended by themselves (a row cut by its token limit does not
    count). Used where it was measured: answers in words ranked on their own stated checks, without the model's
    tests' tails (Pipeline._settled). `close()` as Settled's."""

    request: GenerationRequest
    ended: int = 0
    settled: bool = False

    def hear(self, partial: GenerationResult) -> None:
        rows = partial.candidates
        if self.settled:
            return
        self.ended = sum(row.finish_reason == FINISH_STOP for row in rows)
        greedy_ended = not self.request.greedy_first or (bool(rows) and rows[0].finish_reason is not None)
        growing = any(row.finish_reason is None for row in rows)
        self.settled = greedy_ended and growing and self.ended > len(rows) // 2

    def should_stop(self) -> bool:
        return self.settled

    def close(self) -> None:
        """Nothing runs beside the rows."""

    def note(self, result: GenerationResult) -> str | None:
        """What to say when the rule stopped rows, else None."""
        growing = _stopped_rows(result) if self.settled else None
        if growing is None:
            return None
        return (
            f"settled: {self.ended} of {len(result.candidates)} rows had ended and the request carries no check, so "
            f"the {growing} stopped there"
        )
