"""The app's engines: the model choices it offers, loaded on first use, kept, and used one generation at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.compute_thread import ComputeThread, OnComputeThread
from app.runs import in_app_terms
from engine import (
    DEFAULT_DRAFT,
    DEFAULT_TARGET,
    CandidateSource,
    EngineSettings,
    InvalidRequest,
    build_engine,
    load_any,
    release_freed_memory,
)
from engine.models.formats import FormatChoice, as_loaded, choose_formats
from engine.quant.weights import apply_weight_format, check_weight_format
from engine.remote import RemoteClient, RemoteSettings

log = logging.getLogger(__name__)

DEFAULT_LABEL = "bundled 1.5B + 0.5B draft (default)"
FAST_LABEL = "bundled 0.5B alone (fast)"


@dataclass(frozen=True)
class ModelChoice:
    """One entry of the model menu."""

    label: str  # what the menu shows and what API callers pass as `model`
    target: str  # model spec of the target (bundled:..., tiny:<seed>, a hub id, a local directory)
    draft: str | None = None  # model spec of the draft model, or None (model-free drafters only)
    remote: RemoteSettings | None = None  # candidates from an OpenAI-compatible server instead (target: its URL)

    def as_dict(self) -> dict:
        return {
            "choice": self.label,
            "target": self.target,
            "draft": self.draft,
            "backend": "openai" if self.remote else "local",
        }


def remote_menu(settings: RemoteSettings) -> list[ModelChoice]:
    """The one choice of an app whose candidates come from a server."""
    return [ModelChoice(f"{settings.model} at {settings.base_url}", settings.base_url, None, settings)]


def menu(model: str | None = None, draft: str | None = None) -> list[ModelChoice]:
    """The model menu: what the command line gave (first, so it is the default), the bundled pair, the bundled 0.5B."""
    choices = [ModelChoice(DEFAULT_LABEL, DEFAULT_TARGET, DEFAULT_DRAFT), ModelChoice(FAST_LABEL, DEFAULT_DRAFT, None)]
    if model is None and draft is None:
        return choices
    target = model or DEFAULT_TARGET
    for choice in choices:
        if (choice.target, choice.draft) == (target, draft):
            return [choice] + [c for c in choices if c is not choice]
    label = f"command line: {target}" + (f" + {draft} draft" if draft else "")
    return [ModelChoice(label, target, draft)] + choices


class EngineHub:
    """Loads each offered engine on first use and keeps it; models shared by two choices are loaded once.

    The engine is not thread-safe, and two engines would share the CPU anyway, so `generation_lock`
    admits one generation at a time across all choices; a hub whose choices are all remote servers admits
    `concurrency` at once (the server batches them). Local models are loaded and run on one thread, the hub's
    ComputeThread, whichever thread asks (app/compute_thread.py: torch's OpenMP workers stay warm there).
    """

    def __init__(
        self,
        choices: list[ModelChoice],
        cache_dir: Path | None = None,
        settings: EngineSettings | None = None,
        loader: Callable = load_any,
        dtype: str = "auto",
        concurrency: int = 1,
        weights: str = "auto",
    ):
        if not choices:
            raise ValueError("choices is empty: offer at least one model")
        if concurrency != 1 and not all(c.remote for c in choices):
            raise ValueError(
                f"concurrency={concurrency} needs remote choices only: the local engine runs one generation at a time"
            )
        if not 1 <= concurrency <= 256:
            raise ValueError(f"concurrency={concurrency} is out of range: it must be in 1..256")
        self.concurrency = concurrency
        self.choices = {c.label: c for c in choices}
        self.default_label = choices[0].label
        self.cache_dir, self.settings, self._loader = cache_dir, settings or EngineSettings(), loader
        self.dtype = dtype  # weights of loaded models: auto (timed fastest here: engine/models/formats.py), float32...
        check_weight_format(weights)  # refused at start-up, not at the first load
        self.weights = weights  # auto, native, int8, int4, w8a8 or int4-w8a8 linear layers (engine/quant/weights.py)
        self.generation_lock = threading.BoundedSemaphore(concurrency)
        self.loading: str | None = None  # the spec being loaded now, for progress messages
        self._load_lock = threading.Lock()
        self._models: dict[str, tuple] = {}  # spec -> (model, tokenizer)
        self._engines: dict[str, CandidateSource] = {}  # label -> its engine (local or remote)
        self._failures: dict[str, str] = {}  # label -> why its last load failed
        self._formats: dict[str, FormatChoice] = {}  # spec -> the dtype and weights it runs in, and why
        self._compute = ComputeThread()  # where local models load and generate

    @property
    def labels(self) -> list[str]:
        return list(self.choices)

    def choice(self, label: str | None) -> ModelChoice:
        """The choice for a menu label (None or "" means the default); InvalidRequest names the offered ones."""
        if label in (None, ""):
            return self.choices[self.default_label]
        if label not in self.choices:
            raise InvalidRequest(f"model={label!r} is not offered: choose one of {', '.join(map(repr, self.choices))}")
        return self.choices[label]

    def engine(self, label: str | None) -> CandidateSource:
        """The engine of a choice, loading its models on first use (minutes for a bundled model's first start)."""
        choice = self.choice(label)
        with self._load_lock:
            if choice.label not in self._engines:
                try:
                    self._engines[choice.label] = self._build(choice)
                except Exception as err:
                    self._failures[choice.label] = in_app_terms(err)
                    raise
                self._failures.pop(choice.label, None)
            return self._engines[choice.label]

    def formats(self, label: str | None = None) -> dict[str, FormatChoice]:
        """{spec: the dtype and weights it runs in, and why} of a choice's loaded local models (none when remote
        or not loaded yet)."""
        choice = self.choice(label)
        found = {spec: self._formats.get(spec) for spec in (choice.target, choice.draft) if spec}
        return {spec: formats for spec, formats in found.items() if formats is not None}

    def preload(self, label: str | None = None) -> threading.Thread:
        """Load a choice's engine in a background thread now (the app does it at start-up for the default), so
        that the first request does not wait for it; `state` tells how it went."""
        choice = self.choice(label)

        def load() -> None:
            try:
                self.engine(choice.label)
            except Exception:  # noqa: BLE001 - logged; state() shows it, and the next request tries again
                log.exception("preparing %r failed", choice.label)

        thread = threading.Thread(target=load, name="ranked-drafts-preload", daemon=True)
        thread.start()
        return thread

    def state(self, label: str | None = None) -> tuple[str, str]:
        """(state, detail) of a choice: "ready" (detail: the formats its models run in, and why), "loading"
        (detail: the spec being loaded), "failed" (detail: the error, which names the fix) or "not loaded" (loads
        on first use)."""
        choice = self.choice(label)
        if choice.label in self._engines:
            formats = self.formats(label).items()
            return "ready", "; ".join(f"{spec} in {f.dtype}/{f.weights}: {f.reason}" for spec, f in formats)
        if choice.label in self._failures:
            return "failed", self._failures[choice.label]
        if self.loading is not None:
            return "loading", self.loading
        return "not loaded", ""

    def close(self) -> None:
        """Drop every loaded engine and model, so that their memory goes back once nothing else holds them (a
        server that is shut down, a test that is over); a later request loads them again."""
        with self._load_lock:
            self._engines.clear()
            self._models.clear()
            self._failures.clear()
            self._formats.clear()
        self._compute.close()
        release_freed_memory()

    def _build(self, choice: ModelChoice) -> CandidateSource:
        """A remote choice's client; a local choice's engine, built on the compute thread, generating there."""
        if choice.remote is not None:
            return RemoteClient(choice.remote)
        return OnComputeThread(self._compute.run(self._local, choice), self._compute)

    def _local(self, choice: ModelChoice) -> CandidateSource:
        """A local choice's engine (run on the compute thread: its models load there)."""
        settings = self.settings
        if settings.drafter == "model" and not choice.draft:  # --drafter model applies where there is a draft
            settings = replace(settings, drafter="auto")  # every other setting (acceptance rule...) stays
        return build_engine(
            self._model(choice.target),
            self._model(choice.draft) if choice.draft else None,
            choice.target,
            choice.draft,
            settings,
        )

    def _model(self, spec: str) -> tuple:
        if spec not in self._models:
            self.loading, started = spec, time.perf_counter()
            log.info("loading %s (the first start of a bundled model prepares it: minutes, once)", spec)
            try:
                formats = choose_formats(spec, self.cache_dir, self.dtype, self.weights)
                model, tokenizer = self._loader(spec, self.cache_dir, dtype=formats.dtype)
                model = apply_weight_format(model, formats.weights)
                self._models[spec] = (model, tokenizer)
                self._formats[spec] = as_loaded(model, formats)
                release_freed_memory()  # what loading and converting freed goes back to the system
            finally:
                self.loading = None
            log.info("loaded %s in %.1f s", spec, time.perf_counter() - started)
        return self._models[spec]
