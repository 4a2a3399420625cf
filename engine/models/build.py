"""Building an Engine from loaded models: any model spec loaded, the draft checked against the target."""

from __future__ import annotations

from pathlib import Path

from engine.generate import Engine
from engine.models.formats import FormatChoice, choose_formats
from engine.models.loading import DEFAULT_TARGET, ModelSetupError, load_model
from engine.models.memory import release_freed_memory
from engine.models.tiny import TINY_PREFIX, load_tiny
from engine.quant.weights import apply_weight_format
from engine.settings import EngineSettings


def load_any(spec: str, cache_dir: Path | None = None, progress: bool = True, dtype: str = "auto"):
    """(model, tokenizer) for any spec: bundled:..., tiny:<seed>, a Hugging Face id or a local directory.

    dtype: "auto" (here: bf16 on a GPU or a CPU with native bf16, else fp32; load_engine and the app time the
    formats first, engine/models/formats.py), "float32", "bfloat16" or "float16".
    Tiny test models stay fp32.
    """
    if spec.startswith(TINY_PREFIX):
        return load_tiny(spec)
    return load_model(spec, cache_dir, progress=progress, dtype=dtype)


def _formats(spec: str, cache_dir: Path | None, dtype: str, weights: str, progress: bool) -> FormatChoice:
    """Formats timed when the weights are `auto`; a weight format asked for keeps the CPU-flag dtype policy, so
    that a benchmark's `--weights X` measures the dtype it always did."""
    if weights == "auto":
        return choose_formats(spec, cache_dir, dtype, weights, progress)
    return FormatChoice(dtype, weights, "as asked")


def check_same_vocabulary(target_tokenizer, draft_tokenizer, target_spec: str, draft_spec: str) -> None:
    """Refuse a draft model whose tokenizer does not map text to the same ids as the target's."""
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        raise ModelSetupError(
            f"draft {draft_spec!r} cannot draft for {target_spec!r}: their tokenizers differ "
            f"(vocabularies of {len(target_tokenizer)} and {len(draft_tokenizer)} tokens). "
            "Choose a draft model of the same family, or draft without one (drafter='sibling')",
            settings={"drafter=sibling": "drafter='sibling'"},
        )


def check_draft_fits(target: tuple, draft: tuple, target_spec: str, draft_spec: str) -> None:
    """Refuse a (draft model, tokenizer) that cannot draft for the (target model, tokenizer)."""
    (model, tokenizer), (draft_model, draft_tokenizer) = target, draft
    check_same_vocabulary(tokenizer, draft_tokenizer, target_spec, draft_spec)
    if draft_model.config.vocab_size != model.config.vocab_size:
        raise ModelSetupError(
            f"draft {draft_spec!r} has {draft_model.config.vocab_size} output tokens, target "
            f"{target_spec!r} has {model.config.vocab_size}: they cannot share drafts"
        )


def build_engine(
    target: tuple,
    draft: tuple | None,
    target_spec: str,
    draft_spec: str | None = None,
    settings: EngineSettings | None = None,
) -> Engine:
    """The one way to make an Engine from loaded (model, tokenizer) pairs: the draft is checked against the target."""
    model, tokenizer = target
    if draft is not None:
        check_draft_fits(target, draft, target_spec, draft_spec or "the draft model")
    return Engine(model, tokenizer, draft[0] if draft is not None else None, settings)


def load_engine(
    model_spec: str = DEFAULT_TARGET,
    draft_spec: str | None = None,
    cache_dir: Path | None = None,
    settings: EngineSettings | None = None,
    progress: bool = True,
    dtype: str = "auto",
    weights: str = "native",
) -> Engine:
    """Load the target (and draft) model and build an Engine around them (weights: one of WEIGHT_FORMATS; `auto`
    weights: the formats timed fastest here, engine/models/formats.py)."""
    formats = _formats(model_spec, cache_dir, dtype, weights, progress)
    model, tokenizer = load_any(model_spec, cache_dir, progress, formats.dtype)
    draft = None
    if draft_spec:  # checked before any weight is converted (int4's first fit takes minutes)
        draft_formats = _formats(draft_spec, cache_dir, dtype, weights, progress)
        draft = load_any(draft_spec, cache_dir, progress, draft_formats.dtype)
        check_draft_fits((model, tokenizer), draft, model_spec, draft_spec)
        draft = (apply_weight_format(draft[0], draft_formats.weights), draft[1])
    model = apply_weight_format(model, formats.weights)
    engine = build_engine((model, tokenizer), draft, model_spec, draft_spec, settings)
    release_freed_memory()  # what loading and converting freed goes back to the system
    return engine
