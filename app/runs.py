"""Run control: stopping one run (Stop, a cancel, a vanished client), finding a session's run, and which errors are
the user's (shown as they are) and which are ours (logged with their traceback, shown as an internal error)."""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid

from engine import InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.types import SettingError

log = logging.getLogger(__name__)


class BusyError(RuntimeError):
    """The engine stayed busy past the wait limit: the caller should retry."""


class InternalError(RuntimeError):
    """Something failed inside the app, not in the request: logged with its traceback under `error_id`."""

    def __init__(self, error_id: str, cause: BaseException):
        super().__init__(
            f"internal error {error_id}: the app failed while serving this request "
            f"({type(cause).__name__}: {cause}). This is a fault of the app, not of your input; it was "
            f"logged with id {error_id}. Please retry, and report the id if it happens again."
        )
        self.error_id = error_id


USER_ERRORS = (InvalidRequest, BusyError, ModelSetupError, RemoteError)  # what the caller can act on, shown as is


# how the app's user changes each setting an error names (engine.types.SettingError.settings): by these options
APP_OPTIONS = {
    "fan_out=requests": "--fan-out requests",
    "api_key": "with --api-key-env VAR (the variable that holds it)",
    "model": "(--served-model)",
    "base_url": "--base-url",
    "draft_model": "--draft",
    "drafter=sibling": "--drafter sibling",
    "cache_dir": "--cache-dir",
}


def in_app_terms(err: BaseException) -> str:
    """An error's message with the settings it names turned into the app's command-line options."""
    return err.worded(APP_OPTIONS) if isinstance(err, SettingError) else str(err)


def as_reported(err: BaseException) -> BaseException:
    """The error to show for `err`: user errors in the app's terms; anything else logged with its traceback and
    wrapped in an InternalError that says so."""
    if isinstance(err, InternalError):
        return err
    if isinstance(err, USER_ERRORS):
        text = in_app_terms(err)
        if text == str(err):
            return err
        translated = copy.copy(err)
        translated.args = (text,)
        translated.__cause__ = err
        return translated
    error_id = uuid.uuid4().hex[:8]
    log.error("internal error %s while serving a request", error_id, exc_info=err)
    return InternalError(error_id, err)


class RunControl:
    """Stops one run: the Stop button, a cancelled request, or a consumer that stopped reading.

    The engine polls `should_stop` between steps. A consumer that vanished without a word (a
    dropped connection whose generator is never closed) stops reading, so its heartbeats stop and the
    run ends `idle_timeout_s` later: the engine is never held for a client that is gone. None: no heartbeats are
    expected (an HTTP route runs the pipeline in its own thread and stops the run when its client disconnects).
    """

    def __init__(self, idle_timeout_s: float | None = 5.0):
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
        idle = self.idle_timeout_s is not None and time.monotonic() - self._last_seen > self.idle_timeout_s
        if not self._stop.is_set() and idle:
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
