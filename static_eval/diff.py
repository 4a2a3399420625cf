"""Context diff (Ding et al., 2023): a candidate's lint messages minus those the prompt alone already has.

Messages are matched by (message symbol, name involved, enclosing object), never by line number,
so the prompt's own problems are removed wherever the completion shifts them.
"""

from __future__ import annotations

from collections import Counter


def message_key(message: dict) -> tuple[str, str | None, str]:
    return message["symbol"], message.get("name"), message.get("obj") or ""


def baseline(messages: list[dict]) -> Counter:
    """The prompt's own messages, counted by key."""
    return Counter(message_key(m) for m in messages)


def new_messages(messages: list[dict], prompt_baseline: Counter) -> list[dict]:
    """Messages of prompt + completion that the prompt alone does not have (as a multiset)."""
    remaining = Counter(prompt_baseline)
    fresh = []
    for message in messages:
        key = message_key(message)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            fresh.append(message)
    return fresh
