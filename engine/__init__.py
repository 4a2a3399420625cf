"""The engine: k sampled continuations of one prompt, batched and speculative, by a deadline.

Settings and records (engine.settings, engine.types) import no torch; the names that need it (Engine, the loaders)
are imported on first use, so `from engine import EngineSettings` stays cheap.

Wings: the decode loop and its caches at the top (generate, kv_cache, prefix_cache, attention, sampling),
speculation/ (drafters, controller, acceptance, their choices), quant/ (quantized weights), text/ (the prompt a
request is read as, its framing, and where text ends), models/ (loading and building). Read by the wings: types,
settings (which reads speculation/'s choices and controller settings only), converted (the marker of our converted
model directories). No wing imports a module that imports that wing back.
"""

from __future__ import annotations

import importlib

from engine.settings import DRAFTER_CHOICES, DTYPE_CHOICES, PROMPT_FORMS, WEIGHT_FORMATS, EngineSettings
from engine.text.answer import answer_skips, split_answer
from engine.types import (
    CHAT_ROLES,
    EDITOR_DEADLINE,
    Candidate,
    CandidateSource,
    ChatTurn,
    ContextFile,
    Deadline,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    InvalidRequest,
)

_LAZY = {
    "Engine": "engine.generate",
    "DEFAULT_DRAFT": "engine.models.loading",
    "DEFAULT_TARGET": "engine.models.loading",
    "ModelSetupError": "engine.models.loading",
    "load_model": "engine.models.loading",
    "pick_device": "engine.models.loading",
    "TINY_PREFIX": "engine.models.tiny",
    "load_tiny": "engine.models.tiny",
    "apply_weight_format": "engine.quant.weights",
    "build_engine": "engine.models.build",
    "load_engine": "engine.models.build",
    "load_any": "engine.models.build",
    "check_same_vocabulary": "engine.models.build",
    "check_draft_fits": "engine.models.build",
    "release_freed_memory": "engine.models.memory",
}

__all__ = [
    "CHAT_ROLES",
    "EDITOR_DEADLINE",
    "Candidate",
    "CandidateSource",
    "ChatTurn",
    "ContextFile",
    "DRAFTER_CHOICES",
    "Deadline",
    "DTYPE_CHOICES",
    "EngineSettings",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStats",
    "InvalidRequest",
    "PROMPT_FORMS",
    "WEIGHT_FORMATS",
    "answer_skips",
    "split_answer",
    *_LAZY,
]


def __getattr__(name: str):
    """The torch-backed names, imported when first asked for (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
