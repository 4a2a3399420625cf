"""The chat form of a continuation: an instruct model reads the user's code as the start of its own answer, a code
block (in the code's language) it has already opened in reply to "complete this code", so what it writes next is
still the continuation of the user's text, now in the form it was trained to answer in. The block's closing fence
ends the text. A request in words is read as a conversation in the same template (conversation_parts)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import languages
from engine.settings import PROMPT_FORMS
from engine.types import ChatTurn
from languages import Language

INSTRUCTION = "Complete the following {language} code:\n```{fence}\n{code}\n```"  # the user's turn (the code as given)
OPENING_FENCE = "```{fence}\n"  # the assistant's turn begins with it, then the user's code
CLOSING_FENCE = "\n```"  # where the assistant's code block ends: a stop string of every chat-form row
_SLOT = "\ue000code\ue000"  # stands for the user's turn while the template is rendered (never in a template)
_TURN_SLOT = re.compile("\ue000turn(\\d+)\ue000")  # stands for each turn of a conversation likewise


@dataclass(frozen=True)
class ChatForm:
    """A tokenizer's chat template around one user turn: before + user turn + between + the assistant's code."""

    before: str  # system turn and the user turn's opening (special tokens spelled out)
    between: str  # the user turn's end and the assistant turn's opening

    @staticmethod
    def of(tokenizer, model=None) -> ChatForm | None:
        """The chat form of a model that answers in turns: its tokenizer has a chat template, and (given the model)
        the end-of-sequence token of its generation config closes a turn in that template; a base model whose
        tokenizer merely carries a template ends its texts with another token. None otherwise."""
        template = getattr(tokenizer, "chat_template", None)
        if not isinstance(template, str) or not template:
            return None
        if model is not None and not _ends_turns(model, tokenizer, template):
            return None
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": _SLOT}], tokenize=False, add_generation_prompt=True
            )
        except Exception:  # a template that cannot render a single user turn: no chat form
            return None
        if not isinstance(text, str) or text.count(_SLOT) != 1:
            return None
        before, between = text.split(_SLOT)
        return ChatForm(before, between)

    def parts(self, code: str, language: Language = languages.PYTHON) -> list[tuple[str, bool]]:
        """The prompt as (text, is the template's own) pieces: the template's text, then the user's code twice (as
        the question, and as the answer begun), in the language's words and fence."""
        question = INSTRUCTION.format(language=language.display, fence=language.fence, code=code.rstrip("\n"))
        return [
            (self.before, True),
            (question, False),
            (self.between, True),
            (OPENING_FENCE.format(fence=language.fence) + code, False),
        ]

    def prompt_ids(self, code: str, encode_text, encode_special, language: Language = languages.PYTHON) -> list[int]:
        """The prompt's token ids: the template's own text read with its special tokens, the user's code read as
        text, so a marker typed in the code stays characters."""
        return read_parts(self.parts(code, language), encode_text, encode_special)

    def prompt_text(self, code: str, language: Language = languages.PYTHON) -> str:
        """The prompt as one string (for a server that reads special tokens in its prompt text, as llama-server
        does; a marker typed in the code is then read as the token it spells)."""
        return "".join(text for text, _ in self.parts(code, language))


def read_parts(parts: list[tuple[str, bool]], encode_text, encode_special) -> list[int]:
    """Token ids of (text, is the template's own) pieces: the template's own text with its special tokens, the
    user's text as text."""
    return [i for text, own in parts for i in (encode_special(text) if own else encode_text(text))]


def conversation_parts(tokenizer, turns: tuple[ChatTurn, ...]) -> list[tuple[str, bool]] | None:
    """A conversation in the tokenizer's chat template, the assistant's answer next, as (text, is the template's
    own) pieces (each turn's content the user's text); None when the tokenizer has no template that renders it."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str) or not template:
        return None
    messages = [{"role": t.role, "content": f"\ue000turn{i}\ue000"} for i, t in enumerate(turns)]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:  # a template that cannot render these turns: no chat form for them
        return None
    pieces = _TURN_SLOT.split(text)  # template text, turn number, template text, ...
    if len(pieces) != 2 * len(turns) + 1:
        return None
    parts = [(pieces[0], True)]
    for number, after in zip(pieces[1::2], pieces[2::2]):
        parts += [(turns[int(number)].content, False), (after, True)]
    return [(text, own) for text, own in parts if text]


def answer_enders(tokenizer, eos_ids: frozenset[int]) -> list[int]:
    """The tokens that would end the answer at once if written first: the end-of-text tokens, and those whose text
    (after blanks) begins with a backtick, the closing fence (a row can still end at a fence on a later line). The
    model may believe the user's code is whole (a function with only its docstring, measured: the bundled 0.5B
    closed the block with p=0.64), but a request for a continuation asks for code, so none of these can be a row's
    first token."""
    backticked = [i for token, i in tokenizer.get_vocab().items() if "`" in token]
    texts = tokenizer.batch_decode([[i] for i in backticked]) if backticked else []
    return sorted(set(eos_ids) | {i for i, text in zip(backticked, texts) if text.lstrip().startswith("`")})


def _ends_turns(model, tokenizer, template: str) -> bool:
    config = getattr(model, "generation_config", None) or model.config
    eos = getattr(config, "eos_token_id", None)
    ids = eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else []
    tokens = [tokenizer.convert_ids_to_tokens(i) for i in ids if isinstance(i, int)]
    return any(isinstance(t, str) and t and t in template for t in tokens)


def chat_form_for(choice: str, tokenizer, model) -> ChatForm | None:
    """The chat form an engine uses for continuations, given EngineSettings.prompt_form: 'raw' none, 'chat' the
    tokenizer's (ValueError when it has no usable template), 'auto' the model's when it answers in turns."""
    if choice not in PROMPT_FORMS:
        raise ValueError(f"prompt_form={choice!r} is unknown: choose one of {', '.join(PROMPT_FORMS)}")
    if choice == "raw":
        return None
    form = ChatForm.of(tokenizer, model if choice == "auto" else None)
    if form is None and choice == "chat":
        raise ValueError(
            "prompt_form='chat' needs a tokenizer with a chat template that renders a user turn; "
            "this one has none: choose prompt_form='raw'"
        )
    return form
