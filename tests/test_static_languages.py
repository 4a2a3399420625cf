"""Each language analysed as itself (real tree-sitter grammars): a prompt that ends inside an open function body is a
valid prefix, good completions have no findings, broken ones a syntax error, cut-off ones the truncated finding, empty
bodies an empty implementation; pylint and mypy stay Python's, and each report says which analyses ran."""

import pytest

import languages
from static_eval import AnalyzerSettings, StaticAnalyzer
from static_eval.blocks import closing_text, open_blocks

# language -> (prompt in MultiPL-E's shape: a doc comment, then the function with its body open,
#              a good completion that closes the body, one with a syntax error, one cut off mid-statement)
CASES = {
    "javascript": (
        "// Add two numbers.\n// >>> add(2, 3)\n// 5\nfunction add(a, b){\n",
        "  const total = a + b;\n  return total;\n}\n",
        "  const total = a + * b;\n  return total;\n}\n",
        "  const total = a +",
    ),
    "typescript": (
        "//Add two numbers.\nfunction add(a: number, b: number): number {\n",
        "  return a + b;\n}\n",
        "  return a + b as;\n}\n",
        "  let total: number = a",
    ),
    "go": (
        'package add_test\n\nimport (\n    "testing"\n)\n\n// Add two numbers.\nfunc add(a int, b int) int {\n',
        "    total := a + b\n    return total\n}\n",
        "    total := a + + \n    return total\n}\n",
        "    total := 0\n    for i := 0; i < b; i++ {\n        total += a\n",
    ),
    "rust": (
        "/// Add two numbers.\n/// >>> add(2, 3)\n/// 5\nfn add(a: isize, b: isize) -> isize {\n",
        "    let total = a + b;\n    total\n}\n",
        "    let total = ;\n    total\n}\n",
        "    let total = a.checked_add(",
    ),
    "java": (
        "import java.util.*;\nclass Problem {\n    // Add two numbers.\n    public static long add(long a, long b) {\n",
        "        long total = a + b;\n        return total;\n    }\n",
        "        long total = a + b\n        return total;\n    }\n",
        "        long total = a + b;\n        if (total > 0) {\n",
    ),
    "cpp": (
        "#include<assert.h>\n#include<bits/stdc++.h>\n// Add two numbers.\nlong add(long a, long b) {\n",
        "    std::vector<long> parts = {a, b};\n    return parts[0] + parts[1];\n}\n",
        "    std::vector<long> parts = {a, b}\n    return parts[0] + parts[1];\n}\n",
        "    std::vector<long> parts = {a,",
    ),
    "csharp": (
        "using System;\nclass Problem {\n    // Add two numbers.\n    public static long Add(long a, long b) {\n",
        "        return a + b;\n    }\n",
        "        return a + b\n    }\n",
        "        long total = a +",
    ),
    "c": (
        "#include <stdio.h>\n/* Add two numbers. */\nlong add(long a, long b) {\n",
        "    return a + b;\n}\n",
        "    return a + b\n}\n",
        "    long total = a *",
    ),
    "php": (
        "<?php\n// Add two numbers.\nfunction add($a, $b) {\n",
        "  return $a + $b;\n}\n",
        "  return $a + ;\n}\n",
        "  $total = $a +",
    ),
    "ruby": (
        "# Add two numbers.\n# >>> add.call(2, 3)\n# 5\ndef add(a, b)\n",
        "  total = a + b\n  total\nend\n",
        "  total = a + * b\n  total\nend\n",
        "  [a, b].each do |x|\n    puts x\n",
    ),
    "shell": (
        '#!/bin/bash\n# Add two numbers.\n# >>> $(add "2" "3")\n# "5"\nadd() {\n',
        "  echo $(( $1 + $2 ))\n}\n",
        "  if [ $1 ] then\n    echo $1\n  fi fi\n}\n",
        '  if [[ "$1" -gt 0 ]]; then\n    echo "$1"\n',
    ),
}
BRACED_FIVE = ("javascript", "go", "rust", "java", "cpp")


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as built:  # tree-sitter only: no worker needed
        yield built


def one(analyzer, language, completion, cut=False, prompt=None, suffix=""):
    prompt = CASES[language][0] if prompt is None else prompt
    return analyzer.analyze(prompt, [completion], [cut], suffix, language=language)[0]


@pytest.mark.parametrize("language", CASES)
def test_the_open_prompt_is_a_valid_prefix_and_a_good_completion_has_no_findings(analyzer, language):
    report = one(analyzer, language, CASES[language][1])
    assert (report.prompt_parses, report.parses, report.complete) == (True, True, True)
    assert report.kinds == []
    assert (report.language, report.analyses) == (language, ("syntax",))


@pytest.mark.parametrize("language", CASES)
def test_a_broken_completion_gets_a_syntax_error(analyzer, language):
    report = one(analyzer, language, CASES[language][2])
    assert report.prompt_parses and not report.parses
    assert "syntax-error" in report.kinds
    assert all(f.line >= 1 for f in report.findings)


@pytest.mark.parametrize("language", CASES)
def test_a_cut_off_completion_gets_the_truncated_finding(analyzer, language):
    report = one(analyzer, language, CASES[language][3], cut=True)
    assert not report.complete
    assert report.kinds.count("truncated") == 1


@pytest.mark.parametrize("language", BRACED_FIVE)
def test_a_completion_that_leaves_only_the_prompts_blocks_open_is_not_blamed(analyzer, language):
    """MultiPL-E's harnesses stop at the function's last `}` and add it themselves."""
    good = CASES[language][1]
    without_last_brace = good[: good.rstrip().rfind("}")]
    report = one(analyzer, language, without_last_brace)
    assert (report.parses, report.complete, report.kinds) == (True, True, [])


@pytest.mark.parametrize("language", BRACED_FIVE)
def test_the_same_text_cut_off_inside_the_body_is_truncated(analyzer, language):
    good = CASES[language][1]
    report = one(analyzer, language, good[: good.rstrip().rfind("}")], cut=True)
    assert report.parses and not report.complete and "truncated" in report.kinds


@pytest.mark.parametrize("language", BRACED_FIVE)
def test_a_completion_cut_off_after_closing_the_function_is_complete(analyzer, language):
    report = one(analyzer, language, CASES[language][1], cut=True)
    assert report.complete and report.kinds == []


def test_a_block_the_completion_opens_and_leaves_open_is_unfinished(analyzer):
    report = one(analyzer, "javascript", "  if (a > b) {\n    return a;\n")
    assert report.parses and not report.complete and report.kinds == ["truncated"]


def test_a_stray_closing_brace_is_a_syntax_error_not_a_cut(analyzer):
    report = one(analyzer, "javascript", "  return a + b;\n}\n}\n")
    assert not report.parses and report.complete and report.kinds == ["syntax-error"]
    assert report.findings[0].line == 3


@pytest.mark.parametrize(
    ("language", "completion"),
    [
        ("javascript", "  // TODO: write this\n}\n"),
        ("javascript", "}\n"),
        ("go", "    // later\n}\n"),
        ("rust", "    /* nothing yet */\n}\n"),
        ("java", "        // TODO\n    }\n"),
        ("cpp", "}\n"),
        ("ruby", "  # nothing\nend\n"),
        ("shell", "  # nothing\n}\n"),
    ],
)
def test_a_body_of_only_comments_is_an_empty_implementation(analyzer, language, completion):
    report = one(analyzer, language, completion)
    assert report.kinds == ["empty-implementation"]
    assert report.errors[0].symbol in ("add", "Add")


def test_a_prompt_that_does_not_parse_is_not_blamed_on_the_candidate(analyzer):
    report = one(analyzer, "javascript", "  return a;\n}\n", prompt="function add(a, b {\n  const x = ;\n")
    assert not report.prompt_parses
    assert "syntax-error" not in report.kinds and "prompt-syntax-error" in report.kinds
    assert "JavaScript" in report.findings[0].message


def test_a_middle_is_judged_between_the_prompt_and_the_suffix(analyzer):
    prompt, suffix = "function add(a, b) {\n  const total = ", ";\n  return total;\n}\n"
    good = analyzer.analyze(prompt, ["a + b"], [False], suffix, language="javascript")[0]
    bad = analyzer.analyze(prompt, ["a + * b"], [False], suffix, language="javascript")[0]
    assert good.kinds == [] and good.prompt_parses
    assert "syntax-error" in bad.kinds


def test_the_language_is_a_record_an_id_or_an_alias(analyzer):
    prompt, completion = CASES["rust"][0], CASES["rust"][1]
    by_record = analyzer.analyze(prompt, [completion], language=languages.by_name("rust"))[0]
    by_alias = analyzer.analyze(prompt, [completion], language="rs")[0]
    assert by_record.kinds == by_alias.kinds == [] and by_alias.language == "rust"
    with pytest.raises(ValueError, match="'cobol' is not known"):
        analyzer.analyze(prompt, [completion], language="cobol")


def test_without_a_language_the_prompt_is_python_as_before(analyzer):
    report = analyzer.analyze(CASES["javascript"][0], [CASES["javascript"][1]])[0]
    assert report.language == "python" and not report.prompt_parses
    assert report.kinds == ["prompt-syntax-error"]


def test_the_report_carries_its_language_and_analyses_as_data(analyzer):
    data = one(analyzer, "go", CASES["go"][1]).as_dict()
    assert data["language"] == "go" and data["analyses"] == ["syntax"]


def test_lint_and_types_run_for_python_only():
    with StaticAnalyzer() as linting:  # pylint and mypy on
        python = linting.analyze("def add(a, b):\n", ["    total = a\n    return a + b\n"], [False])[0]
        js = linting.analyze(CASES["javascript"][0], ["  var unused = 1;\n  return a + b;\n}\n"], language="js")[0]
    assert python.analyses == ("syntax", "lint", "types") and "unused-variable" in python.kinds
    assert js.analyses == ("syntax",) and js.kinds == []


@pytest.mark.parametrize(("language", "case"), [(name, case) for name, case in CASES.items()])
def test_closing_the_prompts_blocks_makes_it_parse(language, case):
    lang = languages.by_name(language)
    closers = open_blocks(case[0], lang)
    assert closers and closing_text(closers).strip()
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as analyzer:
        assert analyzer.analyze(case[0], [""], language=lang)[0].prompt_parses


@pytest.mark.parametrize(
    ("language", "code", "closers"),
    [
        ("javascript", "function f(a) {\n  const s = '}';  // }\n  /* { */\n  if (a) {\n", ["}", "}"]),
        ("javascript", "const t = `${a} {`;\nfoo(", [")"]),
        ("rust", "fn f<'a>(x: &'a str) -> char {\n    let c = '{';\n", ["}"]),
        ("java", "class A {\n  void f() {\n  }\n", ["}"]),
        ("ruby", "class A\n  def f(x)\n    return 1 if x\n    [1].each do |y|\n", ["end", "end", "end"]),
        ("ruby", "def f(x)\n  y = if x then 1 else 2 end\n", ["end"]),
        ("shell", 'f() {\n  echo "${#1} }"  # }\n  for i in 1 2; do\n    if [ $i ]; then\n', ["}", "done", "fi"]),
        ("shell", "f() {\n  case $1 in\n    a) echo a;;\n", ["}", "esac"]),
        ("php", '<?php\nfunction f($a) {\n  # {\n  $s = "{$a}";\n', ["}"]),
    ],
)
def test_open_blocks_skips_comments_and_strings(language, code, closers):
    assert open_blocks(code, languages.by_name(language)) == closers
