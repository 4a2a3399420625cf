"""The languages the app knows, one record each (like Helix's languages.toml), and how a prompt's language is found.

A leaf module: it imports nothing of ours, and engine/, static_eval/ and checks/ all read it. Adding a language is
adding a record to LANGUAGES (and pinning its grammar package in requirements.txt). It does not parse code: it names
the tree-sitter grammar that static_eval loads.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import MappingProxyType

BRACES = "braces"  # `{ ... }` delimits a block
INDENT = "indent"  # indentation delimits a block (a header ends with `:`)
KEYWORDS = "keywords"  # words close a block (`def ... end`, `if ... fi`); braces too where the language has them

# Where a Detection came from, most explicit first.
FIELD = "field"  # the client named the language (a request field)
FILENAME = "filename"  # the file name the client sent
FENCE = "fence"  # a leading Markdown fence: ```rust
PATH_HEADER = "path header"  # a first-line comment naming the file: `// Path: src/a.ts`
TEXT = "text"  # signals in the code (or the words) of the prompt
DEFAULT = "default"  # nothing said which: Python, the app's first language


@dataclass(frozen=True)
class Grammar:
    """A tree-sitter grammar shipped as a Python package (one wheel per language, from the tree-sitter org)."""

    package: str  # the PyPI distribution, pinned in requirements.txt: "tree-sitter-typescript"
    module: str  # the module it installs: "tree_sitter_typescript"
    function: str = "language"  # the module's function that returns the language: "language_typescript"

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.function}"

    def load(self) -> object:
        """The grammar's language pointer, what `tree_sitter.Language(...)` takes. ImportError when the package is
        not installed."""
        return getattr(importlib.import_module(self.module), self.function)()


@dataclass(frozen=True)
class CheckRun:
    """The commands a check needs in this language (names looked up on PATH where it runs)."""

    compiler: str | None  # builds the program first ("g++", "javac", "rustc"); None: nothing is built
    runtime: str | None  # runs the program or what was built ("node", "java"); None: the built binary runs itself


@dataclass(frozen=True)
class Language:
    """One language the app knows: its names, files, comments, grammar, blocks and how a check runs there."""

    name: str  # the id used everywhere: "typescript"
    display: str  # how people write it: "TypeScript"
    aliases: tuple[str, ...]  # other names clients send, lower case: ("ts",)
    extensions: tuple[str, ...]  # file name endings, lower case with the dot: (".ts", ".mts", ".cts")
    fence: str  # the Markdown fence info word this app writes: ```typescript
    line_comments: tuple[str, ...]  # line-comment marks, the usual one first: ("//", "#") for PHP
    block_comment: tuple[str, str] | None  # (opening, closing) marks of a block comment; None: the language has none
    grammar: Grammar  # the tree-sitter grammar static_eval parses it with
    blocks: str  # BRACES, INDENT or KEYWORDS: what ends a block (how a prompt's open blocks are closed)
    check: CheckRun  # how a check of the user's examples runs there
    block_words: tuple[tuple[str, str], ...] = ()  # KEYWORDS: (word that opens a block, the word that closes it)
    filenames: tuple[str, ...] = ()  # whole file names that are this language: "Gemfile"

    @property
    def line_comment(self) -> str | None:
        """The usual line-comment mark, or None."""
        return self.line_comments[0] if self.line_comments else None

    def __str__(self) -> str:
        return self.name


_C_COMMENT = ("/*", "*/")
_RUBY_WORDS = tuple(
    (word, "end") for word in ("def", "class", "module", "if", "unless", "while", "until", "for", "case", "begin", "do")
)

LANGUAGES: tuple[Language, ...] = (
    Language(
        "python",
        "Python",
        ("py", "python3", "py3"),
        (".py", ".pyi", ".pyw"),
        "python",
        ("#",),
        None,
        Grammar("tree-sitter-python", "tree_sitter_python"),
        INDENT,
        CheckRun(None, "python3"),
    ),
    Language(
        "javascript",
        "JavaScript",
        ("js", "node", "nodejs", "jsx", "javascriptreact", "ecmascript"),
        (".js", ".mjs", ".cjs", ".jsx"),
        "javascript",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-javascript", "tree_sitter_javascript"),
        BRACES,
        CheckRun(None, "node"),
    ),
    Language(
        "typescript",
        "TypeScript",
        ("ts",),
        (".ts", ".mts", ".cts"),
        "typescript",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_typescript"),
        BRACES,
        CheckRun("tsc", "node"),
    ),
    Language(
        "tsx",
        "TSX",
        ("typescriptreact",),
        (".tsx",),
        "tsx",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_tsx"),  # TypeScript with JSX
        BRACES,
        CheckRun("tsc", "node"),
    ),
    Language(
        "java",
        "Java",
        (),
        (".java",),
        "java",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-java", "tree_sitter_java"),
        BRACES,
        CheckRun("javac", "java"),
    ),
    Language(
        "c",
        "C",
        (),
        (".c", ".h"),
        "c",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-c", "tree_sitter_c"),
        BRACES,
        CheckRun("gcc", None),
    ),
    Language(
        "cpp",
        "C++",
        ("c++", "cxx", "cc", "hpp"),
        (".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp"),
        "cpp",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-cpp", "tree_sitter_cpp"),
        BRACES,
        CheckRun("g++", None),
    ),
    Language(
        "csharp",
        "C#",
        ("cs", "c#", "c-sharp", "c_sharp"),
        (".cs", ".csx"),
        "csharp",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-c-sharp", "tree_sitter_c_sharp"),
        BRACES,
        CheckRun("mcs", "mono"),  # Mono's compiler and runtime, as MultiPL-E runs C#
    ),
    Language(
        "go",
        "Go",
        ("golang",),
        (".go",),
        "go",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-go", "tree_sitter_go"),
        BRACES,
        CheckRun(None, "go"),  # `go run` builds and runs in one step
    ),
    Language(
        "rust",
        "Rust",
        ("rs",),
        (".rs",),
        "rust",
        ("//",),
        _C_COMMENT,
        Grammar("tree-sitter-rust", "tree_sitter_rust"),
        BRACES,
        CheckRun("rustc", None),
    ),
    Language(
        "php",
        "PHP",
        (),
        (".php", ".phtml"),
        "php",
        ("//", "#"),
        _C_COMMENT,
        Grammar("tree-sitter-php", "tree_sitter_php", "language_php"),  # PHP files with `<?php` tags
        BRACES,
        CheckRun(None, "php"),
    ),
    Language(
        "ruby",
        "Ruby",
        ("rb",),
        (".rb", ".rake", ".gemspec"),
        "ruby",
        ("#",),
        ("=begin", "=end"),
        Grammar("tree-sitter-ruby", "tree_sitter_ruby"),
        KEYWORDS,
        CheckRun(None, "ruby"),
        _RUBY_WORDS,
        ("Rakefile", "Gemfile"),
    ),
    Language(
        "shell",
        "Shell (Bash)",
        ("sh", "bash", "zsh", "shellscript", "shell-script"),
        (".sh", ".bash", ".zsh"),  # zsh is parsed with the Bash grammar: close, not exact
        "bash",
        ("#",),
        None,
        Grammar("tree-sitter-bash", "tree_sitter_bash"),
        KEYWORDS,
        CheckRun(None, "bash"),
        (("if", "fi"), ("case", "esac"), ("do", "done")),
        (".bashrc", ".bash_profile", ".profile", ".zshrc"),
    ),
)

PYTHON = LANGUAGES[0]
_BY_NAME = MappingProxyType({key: lang for lang in LANGUAGES for key in (lang.name, *lang.aliases)})


def names() -> tuple[str, ...]:
    """The ids of every language, in table order."""
    return tuple(lang.name for lang in LANGUAGES)


def by_name(text: str) -> Language:
    """The language with this id or alias (any case, surrounding space ignored); ValueError naming the value and the
    allowed names otherwise."""
    found = _BY_NAME.get(text.strip().lower()) if isinstance(text, str) else None
    if found is None:
        aliases = ", ".join(alias for lang in LANGUAGES for alias in lang.aliases)
        raise ValueError(f"language={text!r} is not known: use one of {', '.join(names())} (or an alias: {aliases})")
    return found


def resolve(value: Language | str | None) -> Language:
    """A Language given one, or its name or alias; None: Python."""
    if value is None:
        return PYTHON
    if isinstance(value, Language):
        return value
    return by_name(value)


def from_filename(path: str) -> Language | None:
    """The language of a file name or path (its extension, or a known whole name such as `Gemfile`), or None."""
    base = re.split(r"[\\/]", path.strip())[-1]
    for lang in LANGUAGES:
        if base in lang.filenames:
            return lang
    lower = base.lower()
    dot = lower.rfind(".")
    if dot <= 0 and not (dot == 0 and lower.count(".") > 1):
        return None
    suffix = lower[dot:]
    return next((lang for lang in LANGUAGES if suffix in lang.extensions), None)


_FENCE = re.compile(r"\A\s*(?:```|~~~)[ \t]*\{?\.?([A-Za-z0-9_+#.-]+)")


def from_fence(text: str) -> Language | None:
    """The language named by a leading Markdown fence (```rust, ~~~ js, ```{.python}), or None."""
    found = _FENCE.match(text)
    if found is None:
        return None
    return _BY_NAME.get(found.group(1).lower()) or from_filename("x." + found.group(1))


_HEADER_KEY = r"(?:(?:file)?path|file(?:[ _-]?name)?|filepath|source)"
_PATH_HEADER = re.compile(
    r"\A[ \t]*(?://+|#+|--|;+|/\*+|<!--)[ \t]*"  # a comment mark
    rf"(?:{_HEADER_KEY}[ \t]*[:=][ \t]*(?P<keyed>\S+)|(?P<bare>[\w./\\-]*\.[A-Za-z0-9+]+))"  # `Path: x` or a bare name
    r"[ \t]*(?:\*+/|-->)?[ \t]*$",
    re.IGNORECASE,
)


def from_path_header(prompt: str) -> Language | None:
    """The language of the file named by the prompt's first line, when that line is a comment holding only a path
    (`// Path: src/a.ts`, `# file: x.py`, `// src/main.rs`), as editor plugins write it; else None."""
    first = prompt.lstrip("\n").split("\n", 1)[0]
    found = _PATH_HEADER.match(first)
    if found is None:
        return None
    return from_filename(found.group("keyed") or found.group("bare"))


@dataclass(frozen=True)
class Detection:
    """Which language a prompt is in, and why."""

    language: Language
    how: str  # FIELD, FILENAME, FENCE, PATH_HEADER, TEXT or DEFAULT
    evidence: str = ""  # what said so, in words: the file name, the fence, or the signals that matched

    def __str__(self) -> str:
        return f"{self.language.display} ({self.how}: {self.evidence})" if self.evidence else self.language.display


def detect(text: str, language: str | None = None, filename: str | None = None) -> Detection:
    """The prompt's language: the field a client sent (`language`, ValueError when unknown), else the file name,
    else a leading fence, else a path header, else signals in the text; Python when nothing says."""
    if language is not None and language.strip():
        return Detection(by_name(language), FIELD, language.strip())
    if filename:
        found = from_filename(filename)
        if found is not None:
            return Detection(found, FILENAME, filename)
    found = from_fence(text)
    if found is not None:
        return Detection(found, FENCE, text.lstrip().split("\n", 1)[0].strip())
    found = from_path_header(text)
    if found is not None:
        return Detection(found, PATH_HEADER, text.lstrip("\n").split("\n", 1)[0].strip())
    return from_text(text)


# Recognition from the text: each signal is a cheap pattern that a language's code (or a request in words) shows,
# with a weight; the language with the highest total wins, ties going to the earlier record. Patterns marked `code`
# look at code lines only (comment lines dropped, so examples in a doc comment do not count).


@dataclass(frozen=True)
class _Signal:
    what: str  # the explanation shown in Detection.evidence
    languages: tuple[str, ...]  # the ids it speaks for
    weight: float
    pattern: re.Pattern
    code: bool = True  # match code lines only (False: the whole text, comments included)


def _signal(what: str, languages: str, weight: float, pattern: str, code: bool = True) -> _Signal:
    return _Signal(what, tuple(languages.split()), weight, re.compile(pattern, re.MULTILINE), code)


_BRACED = "javascript typescript java c cpp csharp go rust php"
# fmt: off
_SIGNALS: tuple[_Signal, ...] = (
    # Python
    _signal("`def f(...):`", "python", 4,
            r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(.*\)[ \t]*(?:->.*)?:[ \t]*$"),
    _signal("`def f(` over lines", "python", 1, r"^[ \t]*def[ \t]+\w+[ \t]*\([^)]*$"),
    _signal("`import x` / `from x import`", "python", 2,
            r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]"
            r"|import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*$)"),
    _signal("`class X:`", "python", 3, r"^[ \t]*class[ \t]+\w+[ \t]*(?:\(.*\))?[ \t]*:[ \t]*$"),
    _signal('`"""` docstring', "python", 1, r'^[ \t]*(?:[rRbBuU]?""")'),
    _signal("`if ...:` / `for ...:`", "python", 1,
            r"^[ \t]*(?:if|elif|else|for|while|try|except|with)\b.*:[ \t]*$"),
    # Ruby
    _signal("`def f(...)` without a colon", "ruby", 4,
            r"^[ \t]*def[ \t]+(?:self\.)?\w+[?!=]?(?:[ \t]*\([^)]*\)|[ \t]+\w[\w, *&=]*)?[ \t]*$"),
    _signal("`end`", "ruby", 2, r"^[ \t]*end[ \t]*$"),
    _signal("`require '...'`", "ruby", 2, r"^[ \t]*require(?:_relative)?[ \t]+['\"]"),
    _signal("`do |x|` / `.each`", "ruby", 1,
            r"\bdo[ \t]*\|[^|]*\||\.each\b|\bputs\b|\battr_(?:reader|accessor)\b"),
    # shell
    _signal("`#!/bin/sh`-style shebang", "shell", 6, r"\A#![^\n]*\b(?:ba|z|k|da)?sh\b", code=False),
    _signal("`name() {` function", "shell", 3, r"^[ \t]*(?:function[ \t]+)?[\w-]+[ \t]*\(\)[ \t]*\{[ \t]*$"),
    _signal("`fi` / `esac` / `done`", "shell", 2, r"^[ \t]*(?:fi|esac|done)\b"),
    _signal("`if [ ... ]` / `echo $x`", "shell", 1,
            r"^[ \t]*(?:if|while)[ \t]+\[|\becho[ \t]|\blocal[ \t]+\w+="),
    # PHP
    _signal("`<?php`", "php", 8, r"<\?php\b", code=False),
    _signal("`function f($x`", "php", 3, r"\bfunction[ \t]+\w+[ \t]*\([ \t]*(?:[\w?|\\]+[ \t]+)?&?\$\w"),
    _signal("`$var`", "php", 1, r"\$[A-Za-z_]\w*[ \t]*(?:=[^=]|->|;)"),
    # Go
    _signal("`package x` (no `;`)", "go", 3, r"^package[ \t]+\w+[ \t]*$"),
    _signal("`func f(`", "go", 4, r"^func[ \t]+(?:\([^)]*\)[ \t]*)?\w+[ \t]*(?:\[[^\]]*\])?\("),
    _signal("`import (`", "go", 2, r"^import[ \t]*\("),
    _signal("`:=` / `[]int`", "go", 1, r":=|\[\](?:int|string|float64|byte|bool|interface)"),
    # Rust
    _signal("`fn f(`", "rust", 4,
            r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?(?:const[ \t]+|async[ \t]+|unsafe[ \t]+)*fn[ \t]+\w+"),
    _signal("`-> T {` / `let mut`", "rust", 1, r"\)[ \t]*->[ \t]*[^{]+\{[ \t]*$|\blet[ \t]+mut\b"),
    _signal("`use std::` / `impl`", "rust", 3, r"^[ \t]*use[ \t]+(?:std|crate|super)::|^[ \t]*impl\b"),
    _signal("`Vec<` / `vec![` / `&str`", "rust", 1,
            r"\bVec<|\bvec!\[|&(?:mut[ \t]+)?str\b|\b[iu]size\b|\bOption<"),
    # C and C++
    _signal("`#include`", "c cpp", 3, r"^[ \t]*#[ \t]*include[ \t]*[<\"]", code=False),
    _signal("`std::` / `template<` / `vector<`", "cpp", 3,
            r"\bstd::|\btemplate[ \t]*<|\bvector[ \t]*<|\bnamespace\b|\busing[ \t]+namespace\b|\bcout\b"
            r"|<bits/stdc\+\+\.h>|#[ \t]*include[ \t]*<(?:iostream|vector|string|map|algorithm|set|unordered_map)>",
            code=False),
    _signal("`long f(long n) {` C-style definition", "c cpp", 2,
            r"^(?:static[ \t]+|inline[ \t]+|const[ \t]+|unsigned[ \t]+|signed[ \t]+)*"
            r"(?:int|long|short|void|char|float|double|bool|size_t|auto|std::[\w:<>, ]+|struct[ \t]+\w+)"
            r"[ \t*&]+\w+[ \t]*\([^)]*\)[ \t]*(?:const[ \t]*)?\{?[ \t]*$"),
    _signal("`printf` / `malloc` / `.h` includes", "c", 1,
            r"\b(?:printf|malloc|free|scanf)\(|#[ \t]*include[ \t]*<\w+\.h>", code=False),
    # Java and C#
    _signal("`public static`", "java csharp", 2, r"\bpublic[ \t]+static\b"),
    _signal("`import java.` / `package x.y;`", "java", 5,
            r"^import[ \t]+(?:static[ \t]+)?(?:java|javax|org|com)\.[\w.*]+;|^package[ \t]+[\w.]+;"),
    _signal("`ArrayList<` / `System.out` / `String x`", "java", 1,
            r"\bArrayList<|\bSystem\.out\.|\bString(?:\[\])?[ \t]+\w|\bHashMap<|\bboolean\b|@Override\b"
            r"|<(?:Long|Integer|Boolean|Double|Character|Float)\b"),
    _signal("a camelCase method", "java", 1,
            r"\b(?:public|private|protected|static)[ \t]+[\w<>\[\], ]+[ \t]+[a-z]\w*[ \t]*\("),
    _signal("`using System;` / `namespace x`", "csharp", 5,
            r"^using[ \t]+System(?:\.[\w.]+)?;|^namespace[ \t]+[\w.]+[ \t]*[{;]?$"),
    _signal("`Console.` / `List<long>` / `string x`", "csharp", 1,
            r"\bConsole\.|\b(?:List|Dictionary|IEnumerable|HashSet)<(?:long|int|string|bool|double|char|float|Tuple)\b"
            r"|\bstring(?:\[\])?[ \t]+\w|\bbool[ \t]+\w|\bvar[ \t]+\w+[ \t]*=[ \t]*new\b"),
    _signal("a PascalCase method", "csharp", 1,
            r"\b(?:public|private|protected|static)[ \t]+[\w<>\[\], ]+[ \t]+[A-Z]\w*[ \t]*\("),
    _signal("`class X {`", "java csharp cpp typescript javascript php", 1, r"^[ \t]*(?:public[ \t]+)?class[ \t]+\w+"),
    # JavaScript and TypeScript (TypeScript's own signals are the types)
    _signal("`function f(`", "javascript typescript", 2, r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?function\b"),
    _signal("`const x =` / `(a) =>`", "javascript typescript", 2,
            r"^[ \t]*(?:export[ \t]+)?(?:const|let)[ \t]+[\w{[][^=]*=[^=]|\)[ \t]*=>"
            r"|^[ \t]*var[ \t]+\w+[ \t]*=[^=>]*;?$"),
    _signal("`console.log` / `require(` / `===`", "javascript typescript", 1,
            r"=>|\bconsole\.log\(|\brequire\(|module\.exports|===|!=="),
    _signal("type annotations `(x: number)`", "typescript", 4,
            r"\b\w+\??[ \t]*:[ \t]*(?:number|string|boolean|any|void|unknown|never|bigint|object|[A-Z]\w*(?:<[^>]*>)?)"
            r"(?:\[\])*[ \t]*[,)=;]"),
    _signal("`): T {` return type", "typescript", 3, r"\)[ \t]*:[ \t]*[\w\[\]<>|, .]+[ \t]*\{[ \t]*$"),
    _signal("`interface X` / `type X =`", "typescript", 3,
            r"^[ \t]*(?:export[ \t]+)?(?:interface[ \t]+\w+|type[ \t]+\w+[ \t]*=)"),
    # one block closer alone on a line: a braced language, not Python or Ruby
    _signal("`}` alone", _BRACED, 0.5, r"^[ \t]*\}[ \t]*;?[ \t]*$"),
)
# fmt: on

# A request in words that names its language ("... in Rust", "a Go function").
_NAMED = {
    "Python": "python",
    "JavaScript": "javascript",
    "Node.js": "javascript",
    "TypeScript": "typescript",
    "Java": "java",
    "C": "c",
    "C++": "cpp",
    "C#": "csharp",
    "Go": "go",
    "Golang": "go",
    "Rust": "rust",
    "PHP": "php",
    "Ruby": "ruby",
    "Bash": "shell",
    "shell": "shell",
}
_NAMED_WORDS = "|".join(re.escape(w) for w in sorted(_NAMED, key=len, reverse=True))
_IN_WORDS = re.compile(
    rf"(?:\b(?:in|using|with|into|to)[ \t]+(?:a[ \t]+|an[ \t]+|the[ \t]+)?(?P<a>{_NAMED_WORDS})(?![\w+#]|\.\w)"
    rf"|(?<![\w+#])(?P<b>{_NAMED_WORDS})[ \t]+(?:function|program|script|code|class|method|snippet|version))"
)
_COMMENT_LINE = re.compile(r"^[ \t]*(?://|/\*|\*|#(?!include|define|!|\[|if|pragma|import)|--|<!--|=begin)")
_MIN_SCORE = 2  # below this the text says too little: Python (DEFAULT)


def from_text(text: str) -> Detection:
    """Recognise the language by cheap, explainable signals (keywords and shapes); Python when none is clear."""
    code = "\n".join(line for line in text.split("\n") if not _COMMENT_LINE.match(line))
    scores = {lang.name: 0.0 for lang in LANGUAGES}
    why: dict[str, list[str]] = {lang.name: [] for lang in LANGUAGES}
    for signal in _SIGNALS:
        if signal.pattern.search(code if signal.code else text):
            for name in signal.languages:
                scores[name] += signal.weight
                why[name].append(signal.what)
    named = _IN_WORDS.search(text)
    if named is not None:
        name = _NAMED[named.group("a") or named.group("b")]
        scores[name] += _MIN_SCORE
        why[name].append(f"named in words: {named.group(0).strip()!r}")
    best = max(scores, key=lambda n: scores[n])  # the first of equals: table order
    if scores[best] < _MIN_SCORE:
        return Detection(PYTHON, DEFAULT, "no clear signal")
    return Detection(_BY_NAME[best], TEXT, ", ".join(why[best]))
