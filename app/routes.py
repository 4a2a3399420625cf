"""HTTP routes beside Gradio's on the app's server: JSON bodies in, a run per request in a worker thread, stopped when
the client goes away (editors cancel a request at nearly every keystroke), mounted ahead of Gradio's own routes. A peer
protocol is a `Protocol` (parse, respond, stream, error); `mount_protocols` serves each one the same way on a
`Service`."""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import gradio as gr
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.models import ModelChoice
from app.requests import CheckRequest
from app.results import RunResult
from app.runs import USER_ERRORS, RunControl, RunRegistry, as_reported
from app.serving import Service
from engine import GenerationRequest


def json_handler(
    serve: Callable[[dict, RunControl], object],
    error: Callable[[int, str], object],
    needs: str,
    runs: RunRegistry | None = None,
    session_of: Callable[[dict, str], str | None] | None = None,
):
    """An async route handler: the body must be a JSON object (else error(400, ...) naming `needs`, what it must
    hold); serve(body, control) runs in a worker thread, and control stops when the client disconnects. With
    `runs`, a request whose session_of(body, client address) names a session stops the run that session has going:
    editors do not cancel a request the user typed past, so the newer one supersedes it."""

    async def handler(http_request: Request):
        try:
            body = await http_request.json()
        except (ValueError, UnicodeDecodeError):
            return error(400, f"the body is not JSON: send a JSON object with {needs}")
        if not isinstance(body, dict):
            return error(400, "the body must be a JSON object")
        control = RunControl(idle_timeout_s=None)  # _stop_when_gone watches the client
        host = http_request.client.host if http_request.client else ""
        session = session_of(body, host) if runs is not None and session_of is not None else None
        if session is not None:
            runs.start(session, control)
        watcher = asyncio.create_task(_stop_when_gone(http_request, control))
        try:
            return await run_in_threadpool(serve, body, control)
        finally:
            watcher.cancel()
            if session is not None:
                runs.finish(session, control)

    return handler


async def _stop_when_gone(http_request: Request, control: RunControl) -> None:
    """Stop the run when the client disconnects: the engine is free for the next request within a step (what the
    prompt's reading got so far stays in the prefix cache)."""
    while not control.stopped:
        if await http_request.is_disconnected():
            control.stop("the client disconnected")
            return
        await asyncio.sleep(0.1)


def mount_first(demo: gr.Blocks, routes: list[tuple[str, Callable, str]]) -> None:
    """Add (path, handler, method) routes to a launched demo's server ahead of Gradio's, which may not shadow them."""
    table = demo.app.router.routes
    before = len(table)
    for path, handler, method in routes:
        demo.app.add_api_route(path, handler, methods=[method])
    table[:] = table[before:] + table[:before]


@dataclass(frozen=True)
class Parsed:
    """What a protocol reads from a request's body: the model it names, the engine's request (None: nothing to run,
    the models only loaded), the checks to run, and what the protocol's answer needs besides the result (`detail`,
    the protocol's own)."""

    body: dict
    choice: ModelChoice
    request: GenerationRequest | None
    checks: CheckRequest = CheckRequest()
    detail: Any = None


class Protocol(ABC):
    """A peer's protocol on one POST route: `parse` a JSON body, `respond` with the answer to a done run (or `stream`
    it, where the body asks), each error in the protocol's `error` shape. `mount_protocols` serves every protocol
    the same way: parse, run, answer; a run's failure -> the first of `failures` (exception types, HTTP status, the
    protocol's error kind) that matches, other user errors a 400, anything else ours, a 500 naming the logged id."""

    path: str  # the POST route
    needs: str  # what a body must hold, for the message to a body that is not JSON
    failures: tuple[tuple[tuple[type, ...], int, str], ...] = ()  # what a run raised -> status, the protocol's kind
    names: dict[str, str] = {}  # /generate's field names -> the protocol's, in validation messages
    retry_after: tuple[int, str] | None = None  # (status, seconds): a Retry-After header on answers of that status
    streams_by_default = False  # whether a body without "stream" gets a stream
    stream_type = "text/event-stream"

    @abstractmethod
    def parse(self, body: dict, service: Service) -> Parsed:
        """The request a body asks for; a user error (InvalidRequest, ...) names the bad field."""

    @abstractmethod
    def respond(self, final: RunResult | None, parsed: Parsed) -> Response | dict | list:
        """The answer to a done run (None where the request ran nothing), as a Response or its JSON."""

    @abstractmethod
    def stream(self, final: RunResult | None, parsed: Parsed) -> Iterable[str]:
        """The answer as the protocol's stream of events or lines."""

    @abstractmethod
    def error(self, status: int, message: str, kind: str, headers: dict | None = None) -> Response:
        """An error in the protocol's shape."""

    def session_of(self, body: dict, host: str) -> str | None:
        """The client session a request belongs to: its newer request stops the running one (None: no session)."""
        return None

    def routes(self, service: Service) -> list[tuple[str, Callable, str]]:
        """The protocol's further (path, handler, method) routes beside its POST route."""
        return []


def mount_protocols(demo: gr.Blocks, service: Service, protocols: list[Protocol]) -> None:
    """Add each protocol's routes to a launched demo's server, ahead of Gradio's, all served by `service`."""
    routes = []
    for protocol in protocols:
        handler = json_handler(
            lambda body, control, protocol=protocol: _serve(protocol, service, body, control),
            lambda status, message, protocol=protocol: protocol.error(status, message, "invalid_request_error"),
            protocol.needs,
            RunRegistry(),
            protocol.session_of,
        )
        routes += [(protocol.path, handler, "POST"), *protocol.routes(service)]
    mount_first(demo, routes)


def _serve(protocol: Protocol, service: Service, body: dict, control: RunControl) -> Response:
    """One request through `protocol`: parse, run on `service`, answer (or stream the answer), errors in its shape."""
    try:
        parsed = protocol.parse(body, service)
    except USER_ERRORS as err:
        return protocol.error(400, in_protocol_names(str(err), protocol.names), "invalid_request_error")
    except Exception as err:  # noqa: BLE001 - a failure of ours while reading the body: logged, shown as ours
        return protocol.error(500, str(as_reported(err)), "server_error")
    try:
        final = _run(service, parsed, control)
    except Exception as err:  # noqa: BLE001 - every failure becomes an answer in the protocol's shape
        status, message, kind = _failure(err, protocol.failures)
        retry = protocol.retry_after
        return protocol.error(
            status, message, kind, {"Retry-After": retry[1]} if retry and retry[0] == status else None
        )
    try:
        if body.get("stream", protocol.streams_by_default):
            return StreamingResponse(iter(protocol.stream(final, parsed)), media_type=protocol.stream_type)
        answer = protocol.respond(final, parsed)
    except Exception as err:  # noqa: BLE001 - a failure of ours while answering: logged, shown as ours
        return protocol.error(500, str(as_reported(err)), "server_error")
    return answer if isinstance(answer, Response) else JSONResponse(answer)


def _run(service: Service, parsed: Parsed, control: RunControl) -> RunResult | None:
    if parsed.request is None:
        service.load(parsed.choice)
        return None
    return service.final(parsed.choice, parsed.request, control, parsed.checks)


def _failure(err: Exception, failures: tuple[tuple[tuple[type, ...], int, str], ...]) -> tuple[int, str, str]:
    """(status, message, error kind) of what a run raised."""
    for types, status, kind in failures:
        if isinstance(err, types):
            return status, str(err), kind
    if isinstance(err, USER_ERRORS):
        return 400, str(err), "invalid_request_error"
    return 500, str(as_reported(err)), "server_error"


def in_protocol_names(message: str, names: dict[str, str]) -> str:
    """A validation message that begins with a /generate field name (k=..., max_new_tokens=...), with the field named
    as a protocol names it (`names`: ours -> the protocol's)."""
    if not names:
        return message
    return re.sub(r"^(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], message)
