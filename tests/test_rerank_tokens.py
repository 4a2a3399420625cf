"""Code-aware tokenization: what counts as a token, and that broken code never raises."""

import pytest

from rerank import code_token_spans, code_tokens, regex_tokens

WELL_FORMED = '''def f(numbers: list[int], k=0x1F) -> int:
    """Docstring."""
    total = 0  # a comment
    for n in numbers:
        total += n ** 2 // 3 if n != 1.5e3 else -n
    return f"{total}" + 'x'
'''


def test_comments_and_whitespace_do_not_count():
    assert code_tokens("x = 1  # one\n") == code_tokens("x=1\n\n\n") == ["x", "=", "1"]


def test_regex_fallback_agrees_with_tokenize_on_well_formed_code():
    assert code_tokens(WELL_FORMED) == regex_tokens(WELL_FORMED)
    assert "**" in code_tokens(WELL_FORMED) and "//" in code_tokens(WELL_FORMED)


@pytest.mark.parametrize(
    "broken",
    [
        "def f(x):\n    return (x +",  # cut off inside brackets
        'x = """unterminated\n  doc',  # cut off inside a docstring
        "    a\n  b\n",  # inconsistent dedent
        "x = 'abc\ny = 1",  # unterminated string
        "\x00 $ ? `",  # garbage
        "",
    ],
)
def test_broken_code_never_raises_and_spans_match_the_text(broken):
    spans = code_token_spans(broken)
    assert all(broken[start:end] == token for token, start, end in spans)


def test_cut_off_code_keeps_every_token():
    assert code_tokens("def f(x):\n    return (x +") == ["def", "f", "(", "x", ")", ":", "return", "(", "x", "+"]
