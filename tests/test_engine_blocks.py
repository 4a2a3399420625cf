"""The end of the function body (engine/text/blocks.py) and end-of-text tokens: what ends a row besides length."""

import pytest
import torch

from engine import Engine, EngineSettings, GenerationRequest
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.text.blocks import BodyEnd, Resume, scan_lines
from engine.text.prompting import end_of_text_ids
from engine.types import FINISH_STOP

STACK = (
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def pop(self):\n"
    '        """Remove and return the top item."""\n'
)
TOP_LEVEL = 'import math\n\n\ndef area(r):\n    """Area of a circle of radius r."""\n'

CASES = [  # (name, prompt, completion, the kept completion or None when the body goes on)
    (
        "method stops before the next method",
        STACK,
        "        return self.items.pop()\n\n    def push(self, item):\n        self.items.append(item)\n",
        "        return self.items.pop()\n\n",
    ),
    (
        "top-level function stops at an import",
        TOP_LEVEL,
        "    return math.pi * r * r\nimport unittest\n",
        "    return math.pi * r * r\n",
    ),
    (
        "a call at column 0",
        TOP_LEVEL,
        "    return math.pi * r ** 2\n\n\nprint(area(2))",
        "    return math.pi * r ** 2\n\n\n",
    ),
    ("a comment at column 0", TOP_LEVEL, "    return 1\n# Check the function\n", "    return 1\n"),
    ("a multi-line string at column 0 stays inside", TOP_LEVEL, '    text = """\nleft\n"""\n    return 1\n', None),
    ("a bracket continued at column 0 stays inside", TOP_LEVEL, "    values = [1,\n2]\n    return values\n", None),
    ("a backslash continuation stays inside", TOP_LEVEL, "    x = 1 + \\\n2\n    return x\n", None),
    (
        "a quote inside a comment opens no string",
        TOP_LEVEL,
        "    # it's fine\n    return 1\nx = 2\n",
        "    # it's fine\n    return 1\n",
    ),
    (
        "nested def: its parent's next line ends it",
        'def outer():\n    def inner(x):\n        """Twice x."""\n',
        "        return 2 * x\n    return inner\n",
        "        return 2 * x\n",
    ),
    ("blank lines inside the body", TOP_LEVEL, "    a = 1\n\n    return a\n", None),
    ("a prompt ending mid-line", "def f(x):\n    return x +", " 1\n\nf(2)\n", " 1\n\n"),
    (
        "a prompt without a function never ends a body",
        "import os\nfiles = os.listdir('.')\n",
        "print(files)\nimport sys\n",
        None,
    ),
    ("an empty body ends at once", TOP_LEVEL, "\nx = 1\n", "\n"),
    (
        "after a finished function, the next one the model writes",
        "import os\n\ndef f():\n    return 1\n\n",
        "def g():\n    return 2\n\ndef h():\n",
        "def g():\n    return 2\n\n",
    ),
    (
        "after a finished method, the next method",
        "class A:\n    def f(self):\n        return 1\n\n    ",
        "def g(self):\n        return 2\n\n    def h(self):\n",
        "def g(self):\n        return 2\n\n",
    ),
    ("after a finished function, a statement: nothing to end", "def f():\n    return 1\n\n", "print(f())\n", None),
    ("CRLF backslash continuation stays inside", "def f():\r\n", "    x = 1 + \\\r\n2\r\n    return x\r\n", None),
    (
        "a backslash before a quote outside strings escapes it, as Python's tokenizer reads it",
        "def f():\n    ",
        'return \\"""x\\"""\nprint(1)\n',
        'return \\"""x\\"""\n',
    ),
    (
        "CRLF escape inside a string stays inside",
        "def f():\r\n",
        "    s = 'a\\\r\nb'\r\n    return s\r\nx = 1\r\n",
        "    s = 'a\\\r\nb'\r\n    return s\r\n",
    ),
    (
        "tabs count as Python counts them",
        "if True:\n\tdef f():\n\t\tpass\n",
        "\t\treturn 1\n\tdef g():\n",
        "\t\treturn 1\n",
    ),
]


@pytest.mark.parametrize(("name", "prompt", "completion", "kept"), CASES, ids=[c[0] for c in CASES])
def test_body_end(name, prompt, completion, kept):
    cut = BodyEnd.of(prompt).ends_at(completion)
    assert (None if cut is None else completion[:cut]) == kept


@pytest.mark.parametrize(("name", "prompt", "completion", "kept"), CASES, ids=[c[0] for c in CASES])
def test_a_growing_completion_is_cut_where_the_whole_one_is(name, prompt, completion, kept):
    """The engine asks after every step, on a completion that grows a few characters at a time: the first answer
    that is not None is the final one (no line is judged before its first character is known)."""
    rule = BodyEnd.of(prompt)
    for end in range(len(completion) + 1):
        cut = rule.ends_at(completion[:end])
        if cut is not None:
            assert completion[:cut] == kept, f"cut early at {end}: {completion[:end]!r}"
            return
    assert kept is None


def test_scanning_from_a_logical_line_finds_the_same_lines_as_from_the_start():
    text = STACK + '        s = """a\nb"""  # c\n        return (1,\n2)\n    def push(self):\n        pass\n'
    whole, pending = scan_lines(text)
    assert pending == len(text)  # the text ends a line: the next line's first character is still to come
    assert len(whole) > 4
    for index, start in enumerate(whole):
        found, _ = scan_lines(text, Resume(start.line_offset))
        assert found == whole[index:]
    inside, _ = scan_lines(text, Resume(text.index('b"""')))  # not a line's start: the string's end read as code
    assert inside and inside != whole[-len(inside) :]


def test_a_completion_is_read_from_the_prompts_end_not_from_its_last_line():
    """A prompt that ends inside a long statement (an editor's cursor in a big literal) is not read again at every
    step: its completions are scanned from where the prompt's reading cannot change."""
    prompt = "def f():\n    table = {\n" + "".join(f'        "key{i}": "value{i}",  # c\n' for i in range(300))
    rule = BodyEnd.of(prompt)
    assert rule.resume.position == len(prompt) and rule.resume.depth == 1 and not rule.resume.line_start
    assert rule.ends_at("    }\n    return table\nprint(f())\n") == len("    }\n    return table\n")
    docstring = 'def f():\n    """\n' + "".join(f"    line {i}\n" for i in range(300))
    rule = BodyEnd.of(docstring)  # read on inside the docstring, from its last line
    assert (rule.resume.position, rule.resume.inside) == (len(docstring), '"""')
    assert rule.ends_at('    """\n    return 1\nx\n') == len('    """\n    return 1\n')
    for ending, back in (('    s = ""', 2), ("    # note", 6), ("    x = 1 + \\", 1)):
        resume = BodyEnd.of("def f():\n" + ending).resume
        assert resume.position == len("def f():\n" + ending) - back  # the string, comment or escape may go on


def test_the_engine_stops_a_row_at_the_end_of_the_body(make_engine, tokenizer):
    """Tiny random models rarely indent; whatever they write, a row stopped by the body rule holds no logical line at
    or below the def's indentation, and the rule off lets the same samples run to max_new_tokens."""
    prompt = "def f(x):\n   "  # the model writes the rest of the first body line
    on = make_engine("none").generate(GenerationRequest(prompt, k=8, max_new_tokens=40, seed=3, temperature=1.0))
    off = make_engine("none").generate(
        GenerationRequest(prompt, k=8, max_new_tokens=40, seed=3, temperature=1.0, stop_at_body_end=False)
    )
    rule = BodyEnd.of(prompt)
    ended = 0
    for kept, full in zip(on.candidates, off.candidates):
        assert full.token_ids[: len(kept.token_ids)] == kept.token_ids  # the same sample, cut
        assert full.text.startswith(kept.text)
        if rule.ends_at(full.text) is not None and kept.finish_reason == FINISH_STOP and kept.text != full.text:
            assert kept.text == full.text[: rule.ends_at(full.text)]
            ended += 1
    assert ended > 0


def special_token_model():
    """A byte tokenizer with one more special token (id 257, like Qwen's <|endoftext|> beside <|im_end|>) that the
    model's config does not name as EOS, and a tiny model that prefers it after a few tokens."""
    tokenizer = byte_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    model = tiny_model(0, vocab_size=258)
    with torch.no_grad():
        model.lm_head.weight[257] = model.lm_head.weight[ord("a")]  # 257 is as likely as "a"
        model.lm_head.weight[ord("a")] = -model.lm_head.weight[ord("a")]
    return model, tokenizer


def test_every_special_token_ends_a_row():
    """Regression (issue 10): Qwen ends a completion with <|endoftext|>, which its generation config lists only as
    padding; the engine went on, decoding dropped the token and a new text was glued onto the candidate."""
    model, tokenizer = special_token_model()
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 257 and model.config.eos_token_id == 256
    assert {256, 257} <= end_of_text_ids(model, tokenizer)
    engine = Engine(model, tokenizer, settings=EngineSettings(drafter="none"))
    prompt = "aaaa aaaa aaaa "
    result = engine.generate(GenerationRequest(prompt, k=16, max_new_tokens=30, seed=0, temperature=1.0))
    assert all(257 not in c.token_ids and 256 not in c.token_ids for c in result.candidates)
    assert any(c.finish_reason == FINISH_STOP and len(c.token_ids) < 30 for c in result.candidates)
    for candidate in result.candidates:
        assert candidate.text == tokenizer.decode(candidate.token_ids)
