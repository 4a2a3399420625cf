"""Empty implementations: a completion that adds nothing that runs cannot be the answer."""

from __future__ import annotations

from .findings import EMPTY_IMPLEMENTATION, ERROR, Finding
from .syntax import TRIVIAL, AddedCode


def empty_implementation(added: AddedCode) -> Finding | None:
    """An error finding when the completion (or what it gives the prompt's stub function) runs nothing."""
    all_trivial = all(category in TRIVIAL for category in added.categories)
    stub_trivial = added.stub_function is not None and all(c in TRIVIAL for c in added.stub_categories)
    if not (all_trivial or stub_trivial):
        return None
    where = f"function {added.stub_function!r}" if stub_trivial else "the completion"
    return Finding(
        EMPTY_IMPLEMENTATION,
        added.stub_function if stub_trivial else None,
        1,
        0,
        f"{where} has no code that runs (only pass, ..., docstrings, comments or "
        "raise NotImplementedError): write the implementation",
        ERROR,
    )
