"""The engine's settings and the choices each accepts: importable without torch, so the app's command line and its
`--help` name the engine's own lists instead of copies."""

from __future__ import annotations

from dataclasses import dataclass, field

# the drafters and acceptance rules are the speculation wing's choices, named here too for the app's command line
from engine.speculation.choices import ACCEPTANCE_CHOICES as ACCEPTANCE_CHOICES
from engine.speculation.choices import DRAFTER_CHOICES as DRAFTER_CHOICES
from engine.speculation.controller import ControllerSettings

PROMPT_FORMS = ("auto", "raw", "chat")  # auto: chat for a model that answers in turns (ChatForm.of), raw otherwise
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
WEIGHT_FORMATS = ("auto", "native", "int8", "int4", "w8a8", "int4-w8a8", "int4-dyn")
# native: as loaded (--dtype); int8: Int8Linear layers; int4: Int4Linear where the weights are 4-bit already,
# Int8Linear elsewhere; w8a8: DynamicInt8Linear layers; int4-w8a8: the same, reading the 4-bit codes for one-row
# calls where the weights are 4-bit already; int4-dyn: Int4DynLinear (ARM's KleidiAI kernel) where 4-bit, else
# Int8Linear; auto: timed at a model's first start (engine/models/formats.py), else auto_weight_format


@dataclass
class EngineSettings:
    """How the engine drafts; the request says what to generate."""

    drafter: str = "auto"  # one of DRAFTER_CHOICES: "none" (regular decoding), "model", "prompt", "sibling", or
    # "auto" (a cost model picks per step)
    # How a draft model's tokens are sampled and verified (ACCEPTANCE_CHOICES, both exact):
    # "coupled":  each draft token is drawn with the number the target will use at that position, and kept
    #             while it equals the target's own draw: a seed gives regular decoding's tokens, whatever the
    #             drafter and draft lengths (at a slightly lower acceptance than the residual rule's: docs/ENGINE.md);
    # "residual": the classic min(1, p/q) test with resampling from max(p - q, 0) (acceptance 1 - TV, the
    #             highest possible); the same seed may then give other tokens when the plan differs.
    acceptance: str = "coupled"
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    check_cache: bool = False  # the draft model checks its cache against the rows' histories at every proposal
    # KV of recent prompts kept per model (target, draft), least recently used out; 0: off
    prefix_cache_mb: float = 512.0
    prefill_chunk: int = 512  # prompt tokens per forward while a prompt is read (progress and cancels in between)
    # an editor's window (a request with context_tokens) reuses the cached lines it kept where they land, keys
    # re-rotated (attention.key_shifter), as llama-server's --cache-reuse: close to a cold read, not equal
    moved_reuse: bool = True
    token_healing: bool = True  # a middle typed into a word: back over its last token(s), the first one finishes it
    prompt_form: str = "auto"  # continuations, one of PROMPT_FORMS: "raw" text, "chat" (engine/text/chat.py),
    # "auto": chat for an instruct model
