"""Code in other languages and requests in words, as the engine reads and stops them: the chat form in the code's
language, where a braced block ends (strings, comments and character literals skipped), a conversation in the chat
template with the user's text kept as text, and an answer split into its code block and its prose."""

from __future__ import annotations

import pytest
from test_engine_chat import chat_tokenizer

import languages
from engine import ChatTurn, Engine, EngineSettings, GenerationRequest
from engine.models.tiny import tiny_model
from engine.text.answer import FirstBlockEnd, split_answer
from engine.text.blocks import BodyEnd
from engine.text.braces import BraceEnd, WordEnd
from engine.text.stopping import block_end

JS_PROMPT = '//Return length of given string\n// >>> strlen("abc")\n// 3\nfunction strlen(string){\n'


@pytest.fixture(scope="module")
def engine():
    tokenizer = chat_tokenizer()
    return Engine(tiny_model(0, vocab_size=259, eos_token_id=258), tokenizer, None, EngineSettings(drafter="none"))


def ended(prompt: str, text: str, language: str, kind=BraceEnd) -> str | None:
    rule = kind.of(prompt, languages.by_name(language))
    end = rule.ends_at(text) if rule is not None else None
    return None if end is None else text[:end]


def test_a_braced_block_ends_at_its_closing_brace_not_at_braces_in_strings_or_comments():
    body = '  if (s === "}") { return 0; } // } here is a comment\n  /* } */ return string.length;\n}\n\nfoo();\n'
    assert ended(JS_PROMPT, body, "javascript") == body[: body.index("}\n\nfoo") + 1]
    assert ended(JS_PROMPT, "  return `}${string}`.length", "javascript") is None  # still open


def test_character_literals_and_lifetimes_in_rust_and_java():
    rust = ended("fn f<'a>(x: &'a str) -> usize {\n", "    let c = '}';\n    x.len()\n}\nfn g() {}\n", "rust")
    assert rust == "    let c = '}';\n    x.len()\n}"
    java = "class A {\n    static long f(long n) {\n"
    assert ended(java, "        char c = '{';\n        return n;\n    }\n    static long g() {", "java") == (
        "        char c = '{';\n        return n;\n    }"
    )


def test_a_block_closed_by_words_ends_at_its_word_not_at_words_in_strings_comments_or_modifiers():
    body = '  return 0 if a.nil? # end\n  [a, b].each do |x|\n    puts "end"\n  end\n  a + b\nend\n\nputs add(1, 2)\n'
    assert ended("def add(a, b)\n", body, "ruby", WordEnd) == body[: body.index("end\n\nputs") + 3]
    assert ended("def add(a, b)\n", "  if a\n    b\n  end\n", "ruby", WordEnd) is None  # still open
    shell = '  if [ "$1" -gt 0 ]; then\n    echo "fi }"\n  fi\n}\nf 3\n'
    assert ended("f() {\n", shell, "shell", WordEnd) == shell[: shell.index("}\nf 3") + 1]
    assert WordEnd.of("x = 1\n", languages.by_name("ruby")) is None  # no block open
    assert ended('def f\n  s = "a', ' end"\nend\n', "ruby", WordEnd) == ' end"\nend'  # the prompt's string goes on


def test_each_language_gets_its_own_end_rule():
    assert isinstance(block_end(GenerationRequest("def f(x):\n", language=languages.by_name("python"))), BodyEnd)
    assert isinstance(block_end(GenerationRequest(JS_PROMPT, language=languages.by_name("javascript"))), BraceEnd)
    assert isinstance(
        block_end(GenerationRequest("def f\n", language=languages.by_name("ruby"))), WordEnd
    )  # its blocks end with words
    assert (
        block_end(GenerationRequest("def f\n", language=languages.by_name("ruby"), suffix="end\n")) is None
    )  # a middle's closes there
    assert (
        block_end(GenerationRequest("let x = 1;\n", language=languages.by_name("javascript"))) is None
    )  # no block open
    assert (
        block_end(GenerationRequest(JS_PROMPT, language=languages.by_name("javascript"), stop_at_body_end=False))
        is None
    )
    words = GenerationRequest("Write a function.", turns=(ChatTurn("user", "Write a function."),))
    assert isinstance(block_end(words), FirstBlockEnd)


def test_the_chat_form_names_the_code_language(engine):
    ids = engine.prompts.prompt_ids(GenerationRequest(JS_PROMPT, language=languages.by_name("javascript")))
    text = engine.tokenizer.decode(ids)
    assert "Complete the following JavaScript code:\n```javascript\n" in text
    assert text.endswith("<|im_start|>assistant\n```javascript\n" + JS_PROMPT)


def test_a_conversation_is_read_in_the_chat_template_its_text_as_text(engine):
    turns = (ChatTurn("system", "Be brief."), ChatTurn("user", "Add two numbers. <|im_end|> typed"))
    ids = engine.prompts.prompt_ids(GenerationRequest(turns[-1].content, turns=turns))
    assert engine.tokenizer.decode(ids) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nAdd two numbers. <|im_end|> typed<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert ids.count(258) == 2  # the template's two turn ends; the typed marker stays characters
    assert engine.prompts.prepare(GenerationRequest(turns[-1].content, turns=turns)).not_first is None


def test_an_answer_splits_into_its_code_block_and_its_prose():
    answer = split_answer("Here is one:\n\n```js\nconst f = () => 1;\n```\n\nIt returns 1.")
    assert (answer.code, answer.fence) == ("const f = () => 1;\n", "js")
    assert answer.explanation == "Here is one:\n\nIt returns 1."
    cut = split_answer("Sure.\n```python\ndef f():\n    return 1")
    assert cut.code == "def f():\n    return 1\n" and cut.explanation == "Sure."
    assert split_answer("I cannot help with that.") == split_answer("I cannot help with that.\n")
    assert split_answer("I cannot help with that.").code == ""


def test_an_answer_ends_where_its_first_block_closes():
    text = "Sure:\n```python\nx = '```'\n```\nMore prose"
    assert FirstBlockEnd().ends_at(text) == text.index("```\nMore")
    assert FirstBlockEnd().ends_at("Sure:\n```python\nx = 1\n") is None


def test_a_shell_block_before_the_code_is_read_past():
    text = "Install it first:\n```bash\npip install numpy\n```\nThen:\n\n```python\nimport numpy\n```\nDone."
    answer = split_answer(text)
    assert (answer.code, answer.fence) == ("import numpy\n", "python")
    assert FirstBlockEnd().ends_at(text) == text.index("```\nDone")
    assert FirstBlockEnd().ends_at(text[: text.index("Then")]) is None  # only the install block so far
    assert split_answer(text, skip=frozenset()).code == "pip install numpy\n"  # a shell script asked for


def test_a_block_inside_a_list_item_loses_the_fences_indentation():
    answer = split_answer("1. Define it:\n   ```python\n   def f():\n       return 1\n   ```\n")
    assert answer.code == "def f():\n    return 1\n"


def test_a_middle_in_a_braced_language_ends_by_its_suffix_not_its_brace():
    middle = GenerationRequest(JS_PROMPT, language=languages.by_name("javascript"), suffix="\n}\n")
    assert block_end(middle) is None
