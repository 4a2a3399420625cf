"""Lua, the language added as one record in languages.py (and its grammar pinned in requirements.txt): recognised
from its code, its file name and in words; its blocks end at their `end` (not at one in a string or comment);
tree-sitter finds its syntax errors and empty functions; its checks say why they do not run; and the bundled model's
Lua continuation stops after the function it was asked for."""

import pytest

import engine
import languages
from checks import CheckRunner
from engine import EngineSettings, GenerationRequest
from engine.text.stopping import block_end
from engine.types import FINISH_STOP
from static_eval import StaticAnalyzer
from static_eval.analyzer import AnalyzerSettings
from static_eval.findings import EMPTY_IMPLEMENTATION

LUA = languages.by_name("lua")
FIB = "-- the n-th Fibonacci number\nlocal function fib(n)\n"


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("local function add(a, b)\n  return a + b\nend\n", languages.TEXT),
        (
            "function fib(n)\n  if n < 2 then\n    return n\n  end\n  return fib(n - 1) + fib(n - 2)\nend\n",
            languages.TEXT,
        ),
        ("Write a function in Lua that reverses a table.", languages.TEXT),
        ("-- Path: src/init.lua\nreturn {}\n", languages.PATH_HEADER),
        ("```lua\nprint(1)\n```", languages.FENCE),
    ],
)
def test_lua_is_recognised(text, how):
    found = languages.detect(text)
    assert (found.language, found.how) == (LUA, how)
    assert languages.detect("x", filename="init.lua").language is LUA


def test_a_lua_block_ends_at_its_end_not_at_one_in_a_string_or_comment():
    rule = block_end(GenerationRequest(FIB, language=languages.by_name("lua")))
    body = "  if n < 2 then return n end -- end\n  local s = 'end'\n  return fib(n - 1) + fib(n - 2)\nend\n"
    body += "\nprint(fib(9))\n"
    assert body[: rule.ends_at(body)] == body[: body.index("end\n\nprint") + 3]
    loop = "  for _, x in ipairs(xs) do\n    out[#out + 1] = f(x)\n  end\n  return out\nend\nreturn M\n"
    rule = block_end(GenerationRequest("function M.map(xs, f)\n  local out = {}\n", language=languages.by_name("lua")))
    assert loop[: rule.ends_at(loop)] == loop[: loop.index("end\nreturn M") + 3]
    assert rule.ends_at("  return function(x)\n    return x\n  end\n") is None  # `return function` opens a block


def test_tree_sitter_reads_lua_completions():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as analyzer:
        good, broken, empty = analyzer.analyze(
            "local function add(a, b)\n",
            ["  return a + b\nend\n", "  return a +\nend\n", "  -- later\nend\n"],
            [False] * 3,
            "",
            LUA,
        )
    assert good.parses and not good.findings
    assert not broken.parses
    assert [f.kind for f in empty.findings] == [EMPTY_IMPLEMENTATION]


def test_lua_checks_say_why_they_do_not_run():
    reason = CheckRunner.create().reason_for(LUA)
    assert reason is not None and "Lua" in reason


@pytest.mark.bundled
def test_the_bundled_model_writes_a_lua_function_and_stops_at_its_end():
    model, tokenizer = engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False)
    made = engine.Engine(model, tokenizer, settings=EngineSettings(drafter="none"))
    prompt = "-- Return the sum of the numbers in the table xs.\nlocal function sum(xs)\n"
    result = made.generate(
        GenerationRequest(
            prompt, k=1, temperature=0.0, max_new_tokens=96, budget_s=300, language=languages.by_name("lua")
        )
    )
    row = result.candidates[0]
    assert row.finish_reason == FINISH_STOP, row.text
    assert row.text.rstrip().endswith("end") and "\nprint" not in row.text
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as analyzer:
        (report,) = analyzer.analyze(prompt, [row.text], [False], "", LUA)
    assert report.parses, row.text
