"""One long-lived thread for everything the local models compute: loading, the format calibration, every generation.

Why (issue 46, docs/CPU.md): torch's CPU kernels run on OpenMP (libgomp), and each OS thread that enters a parallel
region gets its own team of worker threads, kept for as long as that thread lives. Once the threads libgomp manages
outnumber the CPUs (a model loaded on one thread, requests served on the server's worker threads, the page's run
threads), libgomp stops letting idle workers spin and puts them to sleep between regions, and every one of a step's
hundreds of parallel regions then waits for a sleeping worker to wake. Measured on a 2-core AMD EPYC Zen 5: the same
greedy request 37.5 ms a step on the thread that loaded the model, 48.0 ms on a fresh thread. So the hub runs all of
it on one thread: its team is the only one, and it stays warm.

Callers block until their call is done; the hub admits one generation at a time anyway (its generation_lock), so
nothing queues behind a generation but a model's first load. A call made on the compute thread itself (a callback
of a generation asking for more) runs at once."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from engine import CandidateSource, GenerationRequest, GenerationResult

_STOP = object()  # what close() queues: the thread ends once the calls before it are done


class ComputeThread:
    """Runs calls on one daemon thread, started at the first call; `close()` ends it (a later call starts another).
    A caller interrupted while it waits (Ctrl-C) stops waiting, not the call: a generation ends by its own deadline or
    should_stop."""

    def __init__(self, name: str = "ranked-drafts-compute"):
        self.name = name
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # starting and closing
        self._here = threading.local()  # `inside` is set on the compute thread (any this object started)

    def run(self, function: Callable[..., Any], *args, **kwargs) -> Any:
        """function(*args, **kwargs) on the compute thread: its result, or its exception raised here."""
        if getattr(self._here, "inside", False):
            return function(*args, **kwargs)
        done: Future = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._calls = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._calls,), name=self.name, daemon=True)
                self._thread.start()
            self._calls.put((done, function, args, kwargs))
        return done.result()

    def close(self, timeout_s: float = 10.0) -> None:
        """End the thread once the calls queued before are done (its OpenMP team goes with it); wait for that up to
        timeout_s, so that what the last call held is released when this returns."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._calls.put(_STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _serve(self, calls: queue.SimpleQueue) -> None:
        self._here.inside = True
        while (call := calls.get()) is not _STOP:
            _answer(*call)
            del call  # nothing of the last call (its engine, its exception's frames) is held while waiting


def _answer(done: Future, function: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    try:
        done.set_result(function(*args, **kwargs))
    except BaseException as err:  # noqa: BLE001 - handed to the caller, who raises it
        done.set_exception(err)


class OnComputeThread:
    """A local engine whose generations run on the hub's compute thread; its other attributes read through to it
    (reads only: nothing sets an engine's attributes through the hub)."""

    def __init__(self, engine: CandidateSource, thread: ComputeThread):
        self._engine, self._thread = engine, thread

    def generate(
        self,
        request: GenerationRequest,
        on_update: Callable[[GenerationResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        return self._thread.run(self._engine.generate, request, on_update=on_update, should_stop=should_stop)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # its own (before __init__ set them: a copy) and dunders are not the engine's
            raise AttributeError(name)
        return getattr(self._engine, name)
