"""The table of languages: its records, its grammars (real tree-sitter), names, file names, fences, path headers and
recognition from the text (>= 95% per language on the labelled MultiPL-E sample)."""

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from tree_sitter import Language as TreeSitterLanguage
from tree_sitter import Parser

import languages
from languages import DEFAULT, FENCE, FIELD, FILENAME, PATH_HEADER, TEXT

SAMPLE = Path(__file__).parent.parent / "benchmarks" / "data" / "multipl_e_humaneval_sample.jsonl"
REQUIRED = ("python", "javascript", "typescript", "java", "c", "cpp", "csharp", "go", "rust", "php", "ruby", "shell")
SNIPPETS = {  # one small valid program per language
    "python": "def f(a):\n    return a + 1\n",
    "javascript": "function f(a) { return a + 1; }\n",
    "typescript": "function f(a: number): number { return a + 1; }\n",
    "tsx": "const x = <div>{1}</div>;\n",
    "java": "class A { static int f(int a) { return a + 1; } }\n",
    "c": "int f(int a) { return a + 1; }\n",
    "cpp": "#include <vector>\nlong f(std::vector<long> a) { return a.size(); }\n",
    "csharp": "class P { static long F(long a) { return a + 1; } }\n",
    "go": "package main\n\nfunc f(a int) int { return a + 1 }\n",
    "rust": "fn f(a: isize) -> isize { a + 1 }\n",
    "php": "<?php\nfunction f($a) { return $a + 1; }\n",
    "ruby": "def f(a)\n  a + 1\nend\n",
    "shell": "f() {\n  echo $(( $1 + 1 ))\n}\n",
    "lua": "local function f(a)\n  return a + 1\nend\n",
}


def test_the_table_has_every_required_language_once():
    names = languages.names()
    assert set(REQUIRED) <= set(names) and len(names) == len(set(names))
    keys = [key for lang in languages.LANGUAGES for key in (lang.name, *lang.aliases)]
    assert len(keys) == len(set(keys)), Counter(keys).most_common(3)
    extensions = [ext for lang in languages.LANGUAGES for ext in lang.extensions]
    assert len(extensions) == len(set(extensions)) and all(e.startswith(".") and e == e.lower() for e in extensions)
    assert languages.PYTHON.name == "python"


def test_records_are_frozen_and_complete():
    rust = languages.by_name("rust")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rust.name = "other"
    for lang in languages.LANGUAGES:
        assert lang.blocks in (languages.BRACES, languages.INDENT, languages.KEYWORDS)
        assert lang.fence and lang.extensions and lang.line_comment
        assert lang.check is None or lang.check.compiler or lang.check.runtime
        assert (lang.blocks == languages.KEYWORDS) == bool(lang.block_words)
    assert languages.by_name("java").check == languages.CheckRun("javac", "java")
    assert languages.by_name("javascript").check.runtime == "node"
    assert languages.by_name("cpp").check == languages.CheckRun("g++", None)
    assert languages.by_name("typescript").grammar.qualified_name == "tree_sitter_typescript.language_typescript"


@pytest.mark.parametrize("lang", languages.LANGUAGES, ids=lambda lang: lang.name)
def test_every_grammar_loads_and_parses_with_the_installed_tree_sitter(lang):
    parser = Parser(TreeSitterLanguage(lang.grammar.load()))
    tree = parser.parse(SNIPPETS[lang.name].encode())
    assert not tree.root_node.has_error
    assert parser.parse((SNIPPETS[lang.name] + "\n)))\n").encode()).root_node.has_error


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("js", "javascript"),
        ("Node", "javascript"),
        ("ts", "typescript"),
        ("C++", "cpp"),
        ("cs", "csharp"),
        ("C#", "csharp"),
        ("golang", "go"),
        ("rs", "rust"),
        ("sh", "shell"),
        ("bash", "shell"),
        ("py", "python"),
        (" Ruby ", "ruby"),
        ("RB", "ruby"),
    ],
)
def test_by_name_takes_ids_and_aliases_in_any_case(text, name):
    assert languages.by_name(text).name == name


@pytest.mark.parametrize("bad", ["cobol", "", "java script", None, 3])
def test_by_name_names_the_bad_value_and_the_allowed_ones(bad):
    with pytest.raises(ValueError, match=r"is not known: use one of python, javascript") as error:
        languages.by_name(bad)
    assert repr(bad) in str(error.value)


def test_resolve_takes_a_record_a_name_or_none():
    go = languages.by_name("go")
    assert languages.resolve(go) is go and languages.resolve("golang") is go
    assert languages.resolve(None) is languages.PYTHON


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("src/a.ts", "typescript"),
        ("C:\\work\\Main.java", "java"),
        ("lib/x.RS", "rust"),
        ("a/b.hpp", "cpp"),
        ("a.h", "c"),
        ("Program.cs", "csharp"),
        ("main.go", "go"),
        ("index.php", "php"),
        ("Gemfile", "ruby"),
        ("tasks.rake", "ruby"),
        ("run.sh", "shell"),
        ("~/.bashrc", "shell"),
        ("app.jsx", "javascript"),
        ("view.tsx", "tsx"),
        ("x.py", "python"),
    ],
)
def test_from_filename(path, name):
    assert languages.from_filename(path).name == name


@pytest.mark.parametrize("path", ["README", "notes.txt", ".hidden", "a.", ""])
def test_from_filename_unknown_is_none(path):
    assert languages.from_filename(path) is None


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("```rust\nfn main() {}\n```", "rust"),
        ("\n```js\nx\n```", "javascript"),
        ("~~~ c++\n", "cpp"),
        ("```cs\n", "csharp"),
        ("```py title='a'\n", "python"),
        ("```{.ruby}\n", "ruby"),
        ("```bash\n", "shell"),
    ],
)
def test_from_fence(text, name):
    assert languages.from_fence(text).name == name


@pytest.mark.parametrize("text", ["```\ncode\n```", "```cobol\n", "text before\n```rust\n", "fn main() {}"])
def test_from_fence_needs_a_leading_known_fence(text):
    assert languages.from_fence(text) is None


@pytest.mark.parametrize(
    ("prompt", "name"),
    [
        ("// Path: src/a.ts\nfunction f() {\n", "typescript"),
        ("# file: x.py\ndef f():\n", "python"),
        ("# Filename: lib/tool.rb\n", "ruby"),
        ("// src/main.rs\n", "rust"),
        ("/* File: a.c */\nint x;\n", "c"),
        ("<!-- path: index.php -->\n", "php"),
        ("-- path: q.go\n", "go"),
    ],
)
def test_from_path_header(prompt, name):
    assert languages.from_path_header(prompt).name == name


@pytest.mark.parametrize(
    "prompt",
    ["// See foo.bar for details\n", "# file: notes.txt\n", "x = 1\n# Path: a.ts\n", "// Path: a.ts and more words\n"],
)
def test_from_path_header_is_the_first_line_holding_only_a_path(prompt):
    assert languages.from_path_header(prompt) is None


def test_detect_prefers_the_field_then_the_file_name_then_fence_then_header_then_text():
    rust_text = "fn main() {\n    let mut x = 1;\n"
    assert languages.detect(rust_text, language="go").how == FIELD
    assert languages.detect(rust_text, language="go").language.name == "go"
    assert languages.detect(rust_text, filename="a.rb").how == FILENAME
    found = languages.detect(rust_text, filename="a.unknown")
    assert (found.language.name, found.how) == ("rust", TEXT)
    assert languages.detect("```go\n" + rust_text).how == FENCE
    assert languages.detect("// Path: a.ts\n" + rust_text).how == PATH_HEADER
    assert languages.detect("Reverse a string.").how == DEFAULT
    assert languages.detect("Reverse a string.").language is languages.PYTHON
    with pytest.raises(ValueError, match="'klingon'"):
        languages.detect(rust_text, language="klingon")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("def f(x):\n    return x\n", "python"),
        ("def f(x)\n  x\nend\n", "ruby"),
        ("fn add(a: i32) -> i32 {\n", "rust"),
        ("package main\n\nfunc main() {\n", "go"),
        ("const add = (a, b) => a + b;\n", "javascript"),
        ("function f(a: number): number {\n", "typescript"),
        ("interface P { x: number }\n", "typescript"),
        ("public class A {\n    public static void main(String[] args) {\n", "java"),
        ("using System;\nclass P {\n    public static void Main() {\n", "csharp"),
        ('#include <stdio.h>\nint main(void) {\n    printf("hi");\n', "c"),
        ("#include <vector>\nstd::vector<int> f() {\n", "cpp"),
        ("<?php\nfunction f($x) {\n", "php"),
        ("#!/bin/bash\nif [ -f x ]; then\n  echo hi\nfi\n", "shell"),
        ("Write a function in Rust that reverses a string.", "rust"),
        ("Write a Go function that sums a list.", "go"),
        ("Implement quicksort in C#.", "csharp"),
    ],
)
def test_detect_from_the_text(text, name):
    found = languages.detect(text)
    assert (found.language.name, found.how) == (name, TEXT)
    assert found.evidence  # it says which signals matched


def test_recognition_is_at_least_95_percent_per_language_on_the_multipl_e_sample():
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    totals, right = Counter(), Counter()
    for row in rows:
        totals[row["language"]] += 1
        right[row["language"]] += languages.detect(row["prompt"]).language.name == row["language"]
    assert set(totals) == {"python", *REQUIRED} - {"c"} and min(totals.values()) >= 20
    rates = {name: right[name] / totals[name] for name in totals}
    assert min(rates.values()) >= 0.95, rates


# Every language's capabilities, or why it has none: a prompt that opens a function (its end rule), a line with a
# comment and a string holding a brace (its lexis), and why it has no checks or no highlighting where it has none.
OPENS_A_FUNCTION = {
    "python": "def f(a):\n",
    "javascript": "function f(a) {\n",
    "typescript": "function f(a: number): number {\n",
    "tsx": "function F(a: number) {\n",
    "java": "class A {\n    static long f(long a) {\n",
    "c": "long f(long a) {\n",
    "cpp": "long f(std::vector<long> a) {\n",
    "csharp": "class P {\n    static long F(long a) {\n",
    "go": "func f(a int) int {\n",
    "rust": "fn f(a: isize) -> isize {\n",
    "php": "<?php\nfunction f($a) {\n",
    "ruby": "def f(a)\n",
    "shell": "f() {\n",
    "lua": "local function f(a)\n",
}
COMMENT_AND_STRING = {
    "python": ' "{" # {',
    "ruby": ' "{" # {',
    "shell": ' "{" # {',
    "php": ' "{" // {',
    "lua": ' "{" -- {',
}
NO_CHECKS = {"lua": "no Lua interpreter in the sandbox's image, and no harness for its asserts"}
NO_HIGHLIGHT = {
    "ruby": "gr.Code has no Ruby mode, and the C family's misreads `#` comments and `end`",
    "lua": "gr.Code has no Lua mode, and the C family's misreads `--` comments and `end`",
}


@pytest.mark.parametrize("lang", languages.LANGUAGES, ids=lambda lang: lang.name)
def test_every_language_states_each_capability_or_why_it_has_none(lang):
    from engine import GenerationRequest
    from engine.text.stopping import block_end

    assert lang.name in OPENS_A_FUNCTION, "give a prompt that opens a function in it"
    rule = block_end(GenerationRequest(OPENS_A_FUNCTION[lang.name], language=lang))
    assert rule is not None and rule.ends_at(" x\n") is None  # a function left open: its body goes on
    line = COMMENT_AND_STRING.get(lang.name, ' "{" // {')
    masked = languages.mask(line, lang.lexis)
    assert len(masked) == len(line) and "{" not in masked, masked  # the string's brace and the comment skipped
    assert (lang.check is not None) != (lang.name in NO_CHECKS)
    assert (lang.highlight is not None) != (lang.name in NO_HIGHLIGHT)
    assert lang.named or lang.name == "tsx"  # TSX is asked for as TypeScript in words


def test_a_table_record_copies_and_pickles_as_itself_and_reads_short():
    import copy
    import pickle

    for lang in languages.LANGUAGES:
        assert copy.copy(lang) is lang and copy.deepcopy(lang) is lang
        assert pickle.loads(pickle.dumps(lang)) is lang
        assert repr(lang) == f"languages.by_name({lang.name!r})"
    other = dataclasses.replace(languages.PYTHON, name="python-like")
    assert copy.deepcopy(other) == other and copy.deepcopy(other) is not other
