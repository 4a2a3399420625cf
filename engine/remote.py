"""A remote candidate source: k completions of one prompt from an OpenAI-compatible server (`POST /v1/completions`:
vLLM, SGLang, llama.cpp's llama-server), streamed, answering the same call as Engine.generate.

The server samples; this side applies the engine's own stopping rules to the text as it arrives (stop strings and
the end of the function body: one rule, engine/text/stopping.py), keeps the deadline (the streams are closed at the
budget and what arrived is kept, flagged "budget"), and turns every way a server can fail into a RemoteError whose
message names the server and the fix. A stream that breaks off midway keeps what arrived, flagged "interrupted".
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import httpx

from engine.text.stopping import RowState, StopRules
from engine.types import (
    FINISH_BUDGET,
    FINISH_INTERRUPTED,
    FINISH_LENGTH,
    FINISH_STOP,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    SettingError,
)

FAN_OUT_CHOICES = ("n", "requests")
# how a middle (code after the cursor) is asked for: OpenAI's `suffix` on /completions (SGLang, OpenAI's own), or
# llama.cpp's /infill at the server's root (llama-server: its /v1/completions ignores `suffix`)
INFILL_CHOICES = ("suffix", "infill")
LLAMA_STOP_TYPES = {"eos": FINISH_STOP, "word": FINISH_STOP, "limit": FINISH_LENGTH}  # llama.cpp's stop_type
# finish_reason spellings of the common servers -> ours (anything else that ends a choice counts as "stop")
SERVER_FINISH = {
    "stop": FINISH_STOP,
    "eos": FINISH_STOP,
    "stop_sequence": FINISH_STOP,
    "length": FINISH_LENGTH,
    "max_tokens": FINISH_LENGTH,
    "abort": FINISH_INTERRUPTED,
    "cancelled": FINISH_INTERRUPTED,
}
MAX_SERVER_STOPS = 4  # OpenAI's limit on `stop`; the rest are applied here only


class RemoteError(SettingError, RuntimeError):
    """The server could not give candidates: the message says what happened and what to do."""


@dataclass(frozen=True)
class RemoteSettings:
    """Where the candidates come from."""

    base_url: str  # the server's OpenAI base, e.g. http://127.0.0.1:8080/v1
    model: str  # the served model name sent as `model`
    api_key: str | None = None  # sent as a Bearer token when set
    fan_out: str = "n"  # "n": one request with n=k; "requests": k requests of n=1 (servers without n)
    logprobs: bool = True  # ask for token log-probabilities (a server without them answers without)
    connect_timeout_s: float = 5.0
    infill: str = "suffix"  # how middles are asked for: one of INFILL_CHOICES

    def validate(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={self.base_url!r} is invalid: give http(s)://host:port/v1")
        if self.fan_out not in FAN_OUT_CHOICES:
            raise ValueError(f"fan_out={self.fan_out!r} is unknown: choose one of {', '.join(FAN_OUT_CHOICES)}")
        if self.infill not in INFILL_CHOICES:
            raise ValueError(f"infill={self.infill!r} is unknown: choose one of {', '.join(INFILL_CHOICES)}")


@dataclass
class _Row(RowState):
    """One candidate as it arrives: the engine's row, plus the text of each token when the server gives it."""

    token_texts: list[str] = field(default_factory=list)


class RemoteClient:
    """Candidates from an OpenAI-compatible server, through the engine's interface (generate)."""

    def __init__(self, settings: RemoteSettings, transport: httpx.BaseTransport | None = None):
        settings.validate()
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(None, connect=settings.connect_timeout_s),
            limits=httpx.Limits(max_connections=None),
        )  # k streams per request, no queueing

    def close(self) -> None:
        self._client.close()

    def generate(
        self,
        request: GenerationRequest,
        on_update: Callable[[GenerationResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        rules: StopRules | None = None,
    ) -> GenerationResult:
        """request.k continuations; returns by the deadline with what arrived (the streams are closed there).
        `rules` end the rows (default: the request's own); a caller that sends the server the code in another form
        (bench_e2e's chat-form text) gives those of the code the rows continue."""
        request.validate()
        started = time.perf_counter()
        # deadline.after_prompt: the server reads the prompt first; the budget starts with the first text it sends.
        # deadline.waits_for_line is not kept here: a row is closed at the deadline wherever its text stands
        deadline = float("inf") if request.deadline.after_prompt else started + request.budget_s
        rows = [_Row() for _ in range(request.k)]
        rules = rules if rules is not None else StopRules.of(request, frozenset())
        events: queue.Queue = queue.Queue()
        infill = request.is_infill and self.settings.infill == "infill"
        url = self._infill_url() if infill else "chat/completions" if request.in_words else "completions"
        streams = [
            _Stream(self._client, url, body, rows_of, events, infill)
            for body, rows_of in (self._infill_requests(request) if infill else self._requests(request))
        ]
        for stream in streams:
            stream.start()
        try:
            self._collect(
                rows,
                rules,
                streams,
                events,
                deadline,
                should_stop,
                on_update,
                started,
                request.budget_s if request.deadline.after_prompt else None,
            )
        finally:
            for stream in streams:
                stream.close()
        for row in rows:
            row.finish_reason = row.finish_reason or FINISH_BUDGET
        return _result(rows, started)

    # --- requests and their streams -----------------------------------------------------------------------
    def _requests(self, request: GenerationRequest) -> list[tuple[dict, list[int]]]:
        """(JSON body, the rows its choices 0.. fill) of every request to send."""
        asked = (
            {"messages": [{"role": t.role, "content": t.content} for t in request.turns]}
            if request.in_words  # a request in words: the server's chat endpoint, in its own template
            else {"prompt": request.prompt}
        )
        body = {
            "model": self.settings.model,
            **asked,
            "max_tokens": request.max_new_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": True,
        }
        if request.stop:
            body["stop"] = list(request.stop[:MAX_SERVER_STOPS])
        if request.is_infill:  # OpenAI's `suffix` (other files have no field there: they are not sent)
            body["suffix"] = request.suffix
        if self.settings.logprobs:
            body["logprobs"] = True if request.in_words else 1  # the chat API's is a switch, completions' a count
        return self._fanned_out(body, request, "n")

    def _infill_url(self) -> str:
        """llama.cpp's /infill sits at the server's root, beside /v1."""
        root = str(self._client.base_url).rstrip("/")
        return (root[: -len("/v1")] if root.endswith("/v1") else root) + "/infill"

    def _infill_requests(self, request: GenerationRequest) -> list[tuple[dict, list[int]]]:
        """llama.cpp /infill bodies: n_cmpl alternatives in one request (or one each), streamed."""
        body = {
            "input_prefix": request.prompt,
            "input_suffix": request.suffix,
            "input_extra": [{"filename": f.name, "text": f.text} for f in request.extra],
            "n_predict": request.max_new_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stop": list(request.stop[:MAX_SERVER_STOPS]),
            "stream": True,
            "cache_prompt": True,
        }
        return self._fanned_out(body, request, "n_cmpl")

    def _fanned_out(self, body: dict, request: GenerationRequest, count_field: str) -> list[tuple[dict, list[int]]]:
        """One body asking for k choices in `count_field` (fan_out "n"), or k bodies of one choice each, seeded
        seed + row."""
        if self.settings.fan_out == "n":
            return [
                (
                    body | {count_field: request.k} | ({"seed": request.seed} if request.seed is not None else {}),
                    list(range(request.k)),
                )
            ]
        return [
            (body | ({"seed": request.seed + row} if request.seed is not None else {}), [row])
            for row in range(request.k)
        ]

    def _collect(
        self,
        rows,
        rules,
        streams,
        events,
        deadline,
        should_stop,
        on_update,
        started,
        budget_after_first: float | None = None,
    ) -> None:
        """Apply what the streams send until every row is done, every stream ended, the deadline or a stop
        (budget_after_first: the deadline is that many seconds after the first choice arrives)."""
        errors: list[RemoteError] = []
        while any(r.finish_reason is None for r in rows) and not (all(s.ended for s in streams) and events.empty()):
            if time.perf_counter() >= deadline or (should_stop and should_stop()):
                return
            try:
                event = events.get(timeout=min(0.05, max(deadline - time.perf_counter(), 0.001)))
            except queue.Empty:
                continue
            kind, payload = event
            if kind == "choice":
                if budget_after_first is not None and deadline == float("inf"):
                    deadline = time.perf_counter() + budget_after_first
                row_index, choice = payload
                _apply(rows[row_index], choice, rules)
            elif kind == "error":
                errors.append(payload)
            if on_update is not None and events.empty():
                on_update(_result(rows, started))
        if errors and not any(r.text for r in rows):
            raise errors[0]  # nothing arrived: say why
        unfinished = [r for r in rows if r.finish_reason is None]
        if unfinished and not errors and all(not r.text for r in unfinished):
            raise RemoteError(
                f"the server at {self._client.base_url} sent {len(rows) - len(unfinished)} of the "
                f"{len(rows)} choices asked for: it may not support `n`; use fan_out='requests'",
                settings={"fan_out=requests": "fan_out='requests'"},
            )
        for row in unfinished:  # a stream that ended or broke without finishing its rows
            row.finish_reason = FINISH_INTERRUPTED


def _apply(row: _Row, choice: dict, rules: StopRules) -> None:
    """Add one streamed choice delta to its row, then the engine's stopping rules."""
    if row.finish_reason is not None:
        return  # already ended here (a stop string or the body's end): the rest is ignored
    old_len = len(row.text)
    row.text += choice.get("text") or ""
    pieces, values, ids = _logprobs_of(choice.get("logprobs"))
    row.logprobs += values
    row.token_ids += ids
    row.token_texts += pieces
    reason = choice.get("finish_reason")
    if reason is not None:
        row.finish_reason = SERVER_FINISH.get(str(reason).lower(), FINISH_STOP)
    cut = rules.ends_at(row.text, old_len, final=row.finish_reason == FINISH_STOP)  # as StopRules.extend
    if cut is not None:
        row.text, row.finish_reason = row.text[:cut], FINISH_STOP
        kept = _tokens_within(row, cut)  # the tokens (and their log-probabilities) that lie in the kept text
        row.logprobs, row.token_ids, row.token_texts = row.logprobs[:kept], row.token_ids[:kept], row.token_texts[:kept]


def _tokens_within(row: _Row, cut: int) -> int:
    """How many of the row's tokens lie within its first `cut` characters (by their texts, when the server gave
    them; otherwise all are kept)."""
    if len(row.token_texts) != len(row.logprobs):
        return len(row.logprobs)
    total, kept = 0, 0
    for text in row.token_texts:
        total += len(text)
        if total > cut:
            break
        kept += 1
    return kept


def _logprobs_of(logprobs) -> tuple[list[str], list[float], list[int]]:
    """(token texts, log-probabilities, token ids) from either spelling: OpenAI's completions ("tokens",
    "token_logprobs") or llama-server's ("content": [{"token", "logprob", "id"}])."""
    if not isinstance(logprobs, dict):
        return [], [], []
    if isinstance(logprobs.get("content"), list):
        content = [c for c in logprobs["content"] if isinstance(c, dict)]
        return (
            [str(c.get("token", "")) for c in content],
            [float(c.get("logprob", 0.0)) for c in content],
            [int(c["id"]) for c in content if isinstance(c.get("id"), int)],
        )
    values = [float(v) for v in logprobs.get("token_logprobs") or [] if v is not None]
    return [str(t) for t in logprobs.get("tokens") or []], values, []


def _result(rows: list[_Row], started: float) -> GenerationResult:
    stats = GenerationStats(wall_s=time.perf_counter() - started, generated_tokens=sum(len(r.logprobs) for r in rows))
    return GenerationResult([r.as_candidate() for r in rows], replace(stats))


class _Stream:
    """One streamed request, read in its own thread; its choices and its failure go to the events queue."""

    def __init__(
        self, client: httpx.Client, url: str, body: dict, rows: list[int], events: queue.Queue, infill: bool = False
    ):
        self.client, self.url, self.body, self.rows, self.events = client, url, body, rows, events
        self.infill = infill  # llama.cpp /infill events (no choices, no [DONE]) instead of OpenAI chunks
        self._open = set(range(len(rows)))  # choices not yet ended (an /infill stream ends when none is left)
        self.ended = False
        self._response: httpx.Response | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ranked-drafts-remote", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Cancel the request (the server frees its slots when the connection closes)."""
        self._closed.set()
        response = self._response
        if response is not None:
            response.close()

    def _run(self) -> None:
        try:
            with self.client.stream("POST", self.url, json=self.body) as response:
                self._response = response
                if self._closed.is_set():
                    return
                if response.status_code != 200:
                    response.read()
                    raise _http_error(response, self.client.base_url, self.body.get("model", ""))
                for line in response.iter_lines():
                    if self._closed.is_set():
                        return
                    if self._line(line):
                        return
            if not self._closed.is_set() and not (self.infill and not self._open):
                self.events.put(
                    (
                        "error",
                        RemoteError(
                            f"the server at {self.client.base_url} ended the stream "
                            "without [DONE]: the candidates may be cut"
                        ),
                    )
                )
        except RemoteError as err:
            self.events.put(("error", err))
        except (httpx.HTTPError, OSError) as err:
            if not self._closed.is_set():
                self.events.put(("error", _transport_error(err, self.client.base_url)))
        except Exception as err:  # noqa: BLE001 - a chunk of an unexpected shape: said, never a silent death
            self.events.put(
                (
                    "error",
                    RemoteError(
                        f"the server at {self.client.base_url} sent a stream this client "
                        f"cannot read ({type(err).__name__}: {err})"
                    ),
                )
            )
        finally:
            self.ended = True

    def _line(self, line: str) -> bool:
        """Handle one SSE line; True at [DONE]."""
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            return True
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            raise RemoteError(
                f"the server at {self.client.base_url} sent malformed JSON in its stream "
                f"({data[:80]!r}): is it an OpenAI-compatible /v1/completions?"
            ) from None
        if not isinstance(chunk, dict):
            raise RemoteError(f"the server at {self.client.base_url} sent {data[:80]!r} where a JSON object belongs")
        if "error" in chunk:
            raise RemoteError(f"the server at {self.client.base_url} reported an error mid-stream: {chunk['error']}")
        choices = [_infill_choice(chunk)] if self.infill else [_as_text_choice(c) for c in chunk.get("choices") or []]
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
                raise RemoteError(
                    f"the server at {self.client.base_url} sent a choice of an unknown shape: {str(choice)[:80]}"
                )
            index = choice.get("index", 0)
            if 0 <= index < len(self.rows):
                self.events.put(("choice", (self.rows[index], choice)))
                if choice.get("finish_reason") is not None:
                    self._open.discard(index)
        return self.infill and not self._open


def _as_text_choice(choice):
    """A chat chunk's choice (its text in `delta.content`) as a completions choice (`text`); others as they are."""
    if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
        return {**choice, "text": choice["delta"].get("content") or ""}
    return choice


def _infill_choice(event: dict) -> dict:
    """One llama.cpp /infill stream event as an OpenAI completions choice (index, text, finish_reason)."""
    reason = LLAMA_STOP_TYPES.get(str(event.get("stop_type")), FINISH_STOP) if event.get("stop") else None
    return {"index": event.get("index", 0), "text": event.get("content") or "", "finish_reason": reason}


def _http_error(response: httpx.Response, base_url, model: str) -> RemoteError:
    status, server = response.status_code, str(base_url)
    detail = response.text[:200]
    if status == 401 or status == 403:
        return RemoteError(
            f"the server at {server} refused the request ({status}): give its API key (api_key). Server said: {detail}",
            settings={"api_key": "(api_key)"},
        )
    if status == 404:
        return RemoteError(
            f"the server at {server} does not serve model {model!r} or /completions (404): check "
            f"the served model name (model) and base_url (it ends in /v1). Server said: {detail}",
            settings={"model": "(model)", "base_url": "base_url"},
        )
    if status in (429, 503):
        retry = response.headers.get("Retry-After")
        return RemoteError(
            f"the server at {server} is overloaded ({status}); retry "
            + (f"after {retry} s" if retry else "in a moment")
            + f". Server said: {detail}"
        )
    if status == 400:
        return RemoteError(f"the server at {server} rejected the request (400): {detail}")
    return RemoteError(f"the server at {server} answered {status}: {detail}")


def _transport_error(err: Exception, base_url) -> RemoteError:
    if isinstance(err, httpx.ConnectError):
        return RemoteError(
            f"no server answers at {base_url} ({err}): is it running, and is base_url right?",
            settings={"base_url": "base_url"},
        )
    if isinstance(err, httpx.TimeoutException):
        return RemoteError(f"the server at {base_url} did not answer in time ({type(err).__name__})")
    return RemoteError(
        f"the connection to the server at {base_url} broke off ({type(err).__name__}: {err}); what arrived is kept"
    )
