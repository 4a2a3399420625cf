"""Ranked answers over OpenAI's chat protocol: `POST /v1/chat/completions` on the app's own server.

`messages` is the conversation (system, user and assistant turns, each `content` a string or a list of text parts; the
last a user's): the request in words. `n` is k; each answer's code block is a candidate, checked (the assert lines in
the request are its checks), ranked, and the choices come back best first, each message the answer's prose and its
code block, with its rank, score and findings in an extra `ranked_drafts` field, as in /v1/completions.
`max_tokens` (or `max_completion_tokens`), `temperature`, `top_p`, `seed`, `stop`, `stream` (server-sent events in the
chat chunk shape once the ranking is done, then [DONE]); extra fields `budget_s`, `language` (the language asked for),
`checks` and `run_checks`. Errors use OpenAI's error shape. Chat clients (the `openai` SDK, Open WebUI, Continue's
chat, aider) use it unchanged.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import languages
from app.openai_api import Completions, model_and_n, protocol_finish
from app.requests import Limits, build_request, capped_tokens, check_text, stop_strings
from app.results import RankedEntry, RunResult
from app.serving import Service
from engine import CHAT_ROLES, ChatTurn, InvalidRequest


def _parse(body: dict, service: Service):
    """(model choice, GenerationRequest of a request in words) from a chat completions body (a null field: its
    default, as OpenAI reads it)."""
    body = {key: value for key, value in body.items() if value is not None}
    turns = _turns(body.get("messages"))
    choice, n = model_and_n(body, service)
    limits, defaults = service.limits, service.defaults
    tokens = body.get("max_completion_tokens", body.get("max_tokens", defaults.max_new_tokens))
    request = build_request(
        turns[-1].content,
        k=n,
        budget_s=body.get("budget_s", defaults.budget_s),
        temperature=body.get("temperature", defaults.temperature),
        max_new_tokens=capped_tokens(tokens, limits),
        top_p=body.get("top_p", defaults.top_p),
        seed=body.get("seed"),
        limits=limits,
        language=body.get("language"),
        turns=turns,
        stop=stop_strings(body.get("stop")),
    )
    return choice, request


def _turns(messages) -> tuple[ChatTurn, ...]:
    """The conversation of `messages`; InvalidRequest names what is wrong with it."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages must be a non-empty array of {role, content} objects")
    turns = tuple(_turn(index, message) for index, message in enumerate(messages))
    if turns[-1].role != "user":
        raise InvalidRequest(
            f"messages[{len(turns) - 1}] has role {turns[-1].role!r}: the last message must be the user's"
        )
    return turns


def _turn(index: int, message) -> ChatTurn:
    role = message.get("role") if isinstance(message, dict) else None
    if role == "developer":
        role = "system"  # OpenAI's newer name for the system turn
    if role not in CHAT_ROLES:
        raise InvalidRequest(f"messages[{index}].role={role!r} is invalid: use one of {', '.join(CHAT_ROLES)}")
    content = message.get("content")
    if isinstance(content, list):  # text parts; other kinds (images) have nothing for a code model
        content = "\n".join(_text_part(index, number, part) for number, part in enumerate(content))
    if not isinstance(content, str):
        raise InvalidRequest(f"messages[{index}].content must be a string or a list of text parts")
    return ChatTurn(role, check_text(content, Limits(), f"messages[{index}].content"))


def _text_part(index: int, number: int, part) -> str:
    """One part's text ("" for a part of another kind, such as an image); InvalidRequest names a malformed one."""
    if not isinstance(part, dict) or part.get("type", "text") != "text":
        return ""
    if not isinstance(part.get("text"), str):
        raise InvalidRequest(f"messages[{index}].content[{number}] is a text part without text: give its `text`")
    return part["text"]


def answer_text(entry: RankedEntry, language: languages.Language) -> str:
    """An answer as a chat client shows it: its prose, its code in a fenced block, then its example usage in a
    block of its own (apart from the code to copy, app/stated.shown_code)."""
    fence = language.fence
    block = f"```{fence}\n{entry.code}```" if entry.code else ""
    usage = f"```{fence}\n{entry.example_usage}```" if entry.example_usage else ""
    if usage and not re.match(r"\W*\s*(?:example|usage|test)", entry.example_usage, re.IGNORECASE):
        usage = f"Example usage:\n\n{usage}"  # unless its own first comment says so
    return "\n\n".join(part for part in (entry.explanation or "", block, usage) if part)


def _response(final: RunResult, model: str) -> dict:
    """The protocol's chat completion: one choice per answer (copies side by side), best first."""
    choices = [
        {
            "index": index,
            "message": {"role": "assistant", "content": answer_text(entry, final.language.record)},
            "logprobs": None,
            "finish_reason": protocol_finish(entry.finish_reason),
            "ranked_drafts": entry.ranking() | {"code": entry.code, "language": final.language.name},
        }
        for index, entry in enumerate(final.ranked_copies())
    ]
    tokens = final.engine_stats.generated_tokens
    prompt_tokens = final.engine_stats.prompt_tokens
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens},
        "ranked_drafts": final.summary(),
    }


def _events(response: dict) -> Iterator[str]:
    """The ranked answers as chat chunks (each answer whole in one delta, then its finish), then [DONE]."""
    head = {key: response[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    for choice in response["choices"]:
        delta = {"index": choice["index"], "delta": choice["message"], "finish_reason": None}
        yield f"data: {json.dumps(head | {'choices': [delta | {'ranked_drafts': choice['ranked_drafts']}]})}\n\n"
        end = {"index": choice["index"], "delta": {}, "finish_reason": choice["finish_reason"]}
        yield f"data: {json.dumps(head | {'choices': [end]})}\n\n"
    yield "data: [DONE]\n\n"


class Chat(Completions):
    """POST /v1/chat/completions: OpenAI's shapes and errors, as /v1/completions has them."""

    path = "/v1/chat/completions"
    needs = "at least `messages`"

    read = staticmethod(_parse)
    answer = staticmethod(_response)
    events = staticmethod(_events)

    def routes(self, service: Service) -> list:
        return []  # /v1/models is Completions'
