"""A long-lived lint worker process (pylint, and mypy when asked, stay imported and warm) and its client with a hard
timeout.

Protocol: length-prefixed JSON over the worker's stdin/stdout. The client writes each batch of sources
to a private temporary folder, sends the paths, and removes the folder afterwards, whatever happens.
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from dataclasses import dataclass

from .lint import ANALYSIS_FAILURES, WARM_UP_SOURCE

TIMEOUT = "timeout"  # the batch ran past its limit: the worker was killed
CRASH = "crash"  # the worker died, could not start, or raised
NOT_CHECKED_FURTHER = frozenset(ANALYSIS_FAILURES) | {"syntax-error"}  # see _check_all


@dataclass
class LintOutcome:
    """Messages for each source in a batch, or why there are none."""

    messages: list[list[dict]] | None  # per source, pylint messages as dicts (see lint.py); None on failure
    failure: str | None = None  # TIMEOUT or CRASH when messages is None
    detail: str = ""  # what went wrong, for the finding's message


class LintWorker:
    """Client of one worker process; start() is non-blocking, lint() waits at most the timeout given."""

    def __init__(
        self,
        messages: tuple[str, ...],
        start_timeout_s: float,
        max_batches: int,
        temp_dir: str | None = None,
        types: bool = False,
    ):
        self._messages = messages
        self._types = types  # also type-check each batch with mypy
        self._type_cache: str | None = None  # mypy's incremental cache, owned by this client (removed at close)
        self._temp_dir = temp_dir
        self._start_timeout_s = start_timeout_s
        self._max_batches = max_batches
        self._process: subprocess.Popen | None = None
        self._pending = 0  # replies the worker still owes for start-up (ready, warm-up batch)
        self._warm_folder: str | None = None
        self._batches = 0
        self._finalizer = None

    def start(self) -> None:
        """Spawn the worker if none runs; it imports pylint and warms up in the background."""
        if self._process is not None:
            return
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        bootstrap = f"import sys; sys.path.insert(0, {package_parent!r}); from static_eval.worker import main; main()"
        self._process = subprocess.Popen(
            [sys.executable, "-E", "-s", "-c", bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
            bufsize=0,
            close_fds=True,
        )
        self._batches = 0
        if self._types:
            self._type_cache = tempfile.mkdtemp(prefix="static_eval_mypy_", dir=self._temp_dir)
        self._finalizer = weakref.finalize(self, _stop, self._process, self._type_cache)
        _write_message(self._process.stdin, {"messages": list(self._messages), "type_cache": self._type_cache})
        # Warm up with a small typical file, so that the first real batch finds pylint and the stdlib warm.
        self._warm_folder = tempfile.mkdtemp(prefix="static_eval_", dir=self._temp_dir)
        _write_message(self._process.stdin, {"paths": _write_sources(self._warm_folder, [WARM_UP_SOURCE])})
        self._pending = 2

    def lint(self, sources: list[str], timeout_s: float) -> LintOutcome:
        """Lint the sources in one pylint run; kills and restarts the worker past timeout_s."""
        folder = tempfile.mkdtemp(prefix="static_eval_", dir=self._temp_dir)
        try:
            paths = _write_sources(folder, sources)
            return self._lint_paths(paths, timeout_s)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _lint_paths(self, paths: list[str], timeout_s: float) -> LintOutcome:
        phase, limit_s = "starting the lint worker", self._start_timeout_s
        try:
            self.start()
            deadline = time.monotonic() + limit_s
            while self._pending:
                _read_message(self._process.stdout, deadline)
                self._pending -= 1
            self._drop_warm_folder()
            phase, limit_s = "lint", timeout_s
            _write_message(self._process.stdin, {"paths": paths})
            reply = _read_message(self._process.stdout, time.monotonic() + timeout_s)
        except TimeoutError:
            self._restart()
            return LintOutcome(None, TIMEOUT, f"{phase} took longer than {limit_s:g} s and was stopped")
        except (OSError, EOFError, ValueError) as error:
            self._restart()
            return LintOutcome(None, CRASH, f"lint worker failed: {type(error).__name__}")
        if "error" in reply:
            return LintOutcome(None, CRASH, f"pylint failed: {reply['error']}")
        self._batches += 1
        if self._batches >= self._max_batches:
            self._restart()
        return LintOutcome([reply["results"].get(path, []) for path in paths])

    def _restart(self) -> None:
        """Stop the worker and start a fresh one at once, so it warms up before the next batch."""
        self.close()
        try:
            self.start()
        except OSError:  # could not spawn now: the next batch tries again
            self.close()

    def close(self) -> None:
        """Stop the worker process (if any)."""
        if self._finalizer is not None:
            self._finalizer()
        self._process = None
        self._finalizer = None
        self._pending = 0
        self._drop_warm_folder()
        if self._type_cache is not None:
            shutil.rmtree(self._type_cache, ignore_errors=True)
            self._type_cache = None

    def _drop_warm_folder(self) -> None:
        if self._warm_folder is not None:
            shutil.rmtree(self._warm_folder, ignore_errors=True)
            self._warm_folder = None


def _stop(process: subprocess.Popen, type_cache: str | None = None) -> None:
    """Kill the worker (it owns no files: the client does, so there is nothing to lose) and remove its mypy cache."""
    try:
        process.stdin.close()
    except OSError:
        pass
    process.kill()
    process.wait()
    if type_cache is not None:
        shutil.rmtree(type_cache, ignore_errors=True)


def _write_sources(folder: str, sources: list[str]) -> list[str]:
    """One file per source, each under a unique module name (astroid caches modules by name)."""
    batch = uuid.uuid4().hex[:12]
    paths = []
    for index, source in enumerate(sources):
        path = os.path.join(folder, f"candidate_{batch}_{index}.py")
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(source)
        paths.append(path)
    return paths


def _write_message(stream, payload: dict) -> None:
    body = json.dumps(payload).encode("ascii")
    stream.write(len(body).to_bytes(4, "big") + body)
    stream.flush()


def _read_message(stream, deadline: float) -> dict:
    size = int.from_bytes(_read_exact(stream.fileno(), 4, deadline), "big")
    return json.loads(_read_exact(stream.fileno(), size, deadline))


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    buffer = bytearray()
    while len(buffer) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(fd, size - len(buffer))
        if not chunk:
            raise EOFError("lint worker closed its output")
        buffer += chunk
    return bytes(buffer)


def main() -> None:
    """Worker process: configure pylint (and mypy, given a cache folder), then check each batch of paths until stdin
    closes; a path's messages are pylint's, then mypy's."""
    output = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed by pylint goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    source = sys.stdin.buffer
    from static_eval.lint import PylintChecker

    config = _read_blocking(source)
    if config is None:
        return
    checkers = [PylintChecker(tuple(config["messages"]))]
    if config.get("type_cache"):
        from static_eval.typecheck import MypyChecker

        checkers.append(MypyChecker(config["type_cache"]))
    _write_message(output, {"ready": True})
    batches = 0
    while (request := _read_blocking(source)) is not None:
        try:
            reply = {"results": _check_all(checkers, request["paths"])}
        except Exception as error:  # pylint raised on hostile input: report it, keep serving
            reply = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        _write_message(output, reply)
        batches += 1
        if batches == 1:
            # After the warm-up batch: pylint and the warm stdlib trees live as long as the worker, so keep
            # them out of the collector's full passes (measured: those cost 0.5 s now and then otherwise).
            gc.freeze()


def _check_all(checkers, paths: list[str]) -> dict[str, list[dict]]:
    """Each checker's messages per path, in order; a file an earlier checker found unparsable (Python's own parser,
    stricter than tree-sitter: an unexpected indent) or could not analyse (deeper than astroid recurses) is not
    given to the next: mypy stops checking every file of a run at one file's syntax error."""
    results: dict[str, list[dict]] = {path: [] for path in paths}
    for checker in checkers:
        for path, messages in checker.check(paths).items():
            results[path] += messages
        paths = [p for p in paths if not any(m["symbol"] in NOT_CHECKED_FURTHER for m in results[p])]
        if not paths:
            break
    return results


def _read_blocking(stream) -> dict | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    return json.loads(stream.read(int.from_bytes(header, "big")))
