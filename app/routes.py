"""HTTP routes beside Gradio's on the app's server: JSON bodies in, a run per request in a worker thread, stopped when
the client goes away (editors cancel a request at nearly every keystroke), mounted ahead of Gradio's own routes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import gradio as gr
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from app.requests import CheckRequest
from app.results import RunResult
from app.runs import USER_ERRORS, RunControl, RunRegistry, as_reported


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


def final_or_error(
    pipeline,
    hub,
    choice,
    request,
    control: RunControl,
    statuses: list[tuple[tuple[type, ...], int, str]],
    checks: CheckRequest = CheckRequest(),
) -> tuple[RunResult | None, tuple[int, str, str] | None]:
    """(the run's RunResult, None), or (None, (status, message, kind)) from the first of `statuses` (exception
    types, HTTP status, the protocol's error kind) that matches what the run raised; other user errors are a 400,
    anything else is ours: a 500 whose message has the logged error's id."""
    try:
        return pipeline.final(
            request, lambda: hub.engine(choice.label), hub.generation_lock, control, choice.as_dict(), checks=checks
        ), None
    except Exception as err:  # noqa: BLE001 - every failure becomes an answer in the protocol's shape
        for types, status, kind in statuses:
            if isinstance(err, types):
                return None, (status, str(err), kind)
        if isinstance(err, USER_ERRORS):
            return None, (400, str(err), "invalid_request_error")
        return None, (500, str(as_reported(err)), "server_error")


def in_protocol_names(message: str, names: dict[str, str]) -> str:
    """A validation message that begins with a /generate field name (k=..., max_new_tokens=...), with the field named
    as a protocol names it (`names`: ours -> the protocol's)."""
    return re.sub(r"^(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], message)
