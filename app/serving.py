"""The service every entry point runs its requests through: the models (the hub, with its generation lock), the
pipeline, and the app's limits and defaults. The page and each protocol parse a request in their own terms and hand
it here with the model it names: every run goes through it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.models import EngineHub, ModelChoice
from app.requests import CheckRequest, Defaults, Limits
from app.results import Progress, RunResult
from app.runs import RunControl
from app.service import Pipeline
from engine import GenerationRequest


@dataclass(frozen=True)
class Service:
    """The models, the lock that admits one generation at a time, the pipeline, and what a request may ask for
    (`limits`) and gets when it does not say (`defaults`, clipped to the limits)."""

    hub: EngineHub
    pipeline: Pipeline
    limits: Limits = Limits()
    defaults: Defaults = Defaults()

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", self.defaults.clipped(self.limits))

    def served(self, name: str | None) -> ModelChoice:
        """The model a protocol's request names: any name the app serves, any other (an editor's own model name)
        the default."""
        return self.hub.choice(name if name in self.hub.choices else None)

    def load(self, choice: ModelChoice) -> None:
        """Load a choice's models now (a client's load-only request), without running anything."""
        self.hub.engine(choice.label)

    def final(
        self, choice: ModelChoice, request: GenerationRequest, control: RunControl, checks: CheckRequest
    ) -> RunResult:
        """The run's RunResult, in the caller's thread (the protocols: the caller stops `control` when its client
        goes); errors raised as the pipeline reports them."""
        return self.pipeline.final(
            request, self._engine_for(choice), self.hub.generation_lock, control, choice.as_dict(), checks=checks
        )

    def stream(
        self, choice: ModelChoice, request: GenerationRequest, control: RunControl, checks: CheckRequest
    ) -> Iterator[Progress | RunResult]:
        """The run's Progress states, then its RunResult (the page)."""
        return self.pipeline.stream(
            request,
            self._engine_for(choice),
            self.hub.generation_lock,
            control,
            choice.as_dict(),
            loading=lambda: self.hub.loading,
            checks=checks,
        )

    def _engine_for(self, choice: ModelChoice) -> Callable:
        return lambda: self.hub.engine(choice.label)
