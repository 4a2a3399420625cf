"""The languages the app knows, one record each (like Helix's languages.toml), and how a prompt's language is found.

A leaf module: it imports nothing of ours, and engine/, static_eval/ and checks/ all read it. Adding a language is
adding a record to LANGUAGES, built by keyword in parts (its names and files; its lexis, what the one scanner of
strings and comments, `pieces`, finds; its grammar; its blocks; how its checks run, or None; its recognition signals;
its highlighting), and pinning its grammar package in requirements.txt. It does not parse code: it names the
tree-sitter grammar that static_eval loads.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
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


# ---------------------------------------------------------------- lexis: the one scanner of strings and comments


@dataclass(frozen=True)
class Lexis:
    """How a language writes comments and strings: what `pieces`, the one scanner of them, finds."""

    line_comments: tuple[str, ...] = ()  # line-comment marks, the usual one first: ("//", "#") for PHP
    block_comment: tuple[str, str] | None = None  # (opening, closing) marks of a block comment; None: none
    strings: tuple[str, ...] = ('"',)  # marks of strings closed by the same mark on their line (backslash escapes)
    long_strings: tuple[str, ...] = ()  # marks of strings that may span lines (backslash escapes): ``` ` ```, `"""`
    raw_strings: tuple[str, ...] = ()  # marks of strings that may span lines, without escapes: Go's `, the shell's '
    char_literals: bool = False  # `'` opens a character literal ('a', '\n'); a `'` that opens none is code (a Rust
    # lifetime), or where `'` is also in `strings`, a string that closes on its line
    line_comment_pattern: str | None = None  # a regular expression for the line comments where their marks alone
    # mislead (the shell's `#` only at a word's start, PHP's `#[` an attribute)
    block_comment_at_line_start: bool = False  # the block comment's marks count only at a line's start (Ruby)


C_COMMENT = ("/*", "*/")
# C-like code whose language is not known (the lexing of checks/clike.py): `'` a character or else a one-line string
C_LIKE = Lexis(("//",), C_COMMENT, strings=('"', "'"), long_strings=("`",), char_literals=True)
_CHAR = r"'(?:\\.[^'\n]{0,8}|[^\\'\n])'"  # a whole character literal: 'a', '\n', '\u00e9'
_ESCAPE = r"\\(?:\r\n|.)"  # a backslash and what it escapes (a line's end in either form)


@dataclass(frozen=True)
class _Token:
    """What one alternative of a lexer finds: a comment or a string, opened by `mark`."""

    comment: bool
    mark: str  # the opening mark
    one_line: bool  # it ends at its line's end when it does not close before


@cache
def _lexer(lexis: Lexis) -> tuple[re.Pattern, tuple[_Token, ...]]:
    """One regular expression whose alternatives t0, t1, ... find the comments and strings (each alternative's group
    c0, c1, ... matches where it closes), and what each alternative is."""
    parts: list[tuple[str, _Token]] = []
    if lexis.block_comment is not None:
        opening, closing = (re.escape(mark) for mark in lexis.block_comment)
        at = "^" if lexis.block_comment_at_line_start else ""
        parts.append(
            (rf"{at}{opening}(?:.*?(?P<c{{i}}>{at}{closing})|.*)", _Token(True, lexis.block_comment[0], False))
        )
    if lexis.line_comment_pattern is not None:
        parts.append((lexis.line_comment_pattern, _Token(True, lexis.line_comments[0], True)))
    else:
        parts += [(rf"{re.escape(m)}[^\n]*", _Token(True, m, True)) for m in lexis.line_comments]
    for mark in sorted(lexis.long_strings, key=len, reverse=True):
        quoted = re.escape(mark)
        parts.append((rf"{quoted}(?:{_ESCAPE}|[^\\])*?(?:(?P<c{{i}}>{quoted})|\\?\Z)", _Token(False, mark, False)))
    for mark in lexis.raw_strings:
        quoted = re.escape(mark)
        parts.append((rf"{quoted}.*?(?:(?P<c{{i}}>{quoted})|\Z)", _Token(False, mark, False)))
    if lexis.char_literals:
        parts.append((rf"{_CHAR[:-1]}(?P<c{{i}}>')", _Token(False, "'", True)))
    for mark in lexis.strings:
        quoted = re.escape(mark)
        body = rf"(?:{_ESCAPE}|[^{quoted}\\\n])*"
        if mark == "'" and lexis.char_literals:  # not a character: a string only where it closes on its line
            parts.append((rf"{quoted}{body}(?P<c{{i}}>{quoted})", _Token(False, mark, True)))
        else:
            parts.append((rf"{quoted}{body}(?:(?P<c{{i}}>{quoted})|\\?\Z)?", _Token(False, mark, True)))
    pattern = "|".join(f"(?P<t{i}>{text.replace('{i}', str(i))})" for i, (text, _) in enumerate(parts))
    return re.compile(pattern, re.DOTALL | re.MULTILINE), tuple(token for _, token in parts)


def mask(text: str, lexis: Lexis, comments: bool = True) -> str:
    """`text` with the inside of every string and character literal replaced by `_` and (when `comments`) every
    comment by blanks; the same length, newlines kept, so offsets and lines carry over."""
    return scan(text, lexis, comments)[0]


@dataclass(frozen=True)
class Piece:
    """One string or comment that the scanner found."""

    start: int
    end: int
    comment: bool
    mark: str  # its opening mark
    closed: bool  # its closing mark is in the text (a line comment: it ends before the text's end)
    goes_on: bool  # the text ends inside it: a text that follows is its continuation


def pieces(text: str, lexis: Lexis) -> Iterator[Piece]:
    """The strings, character literals and comments of `text`, in order (the one scanner of them)."""
    pattern, tokens = _lexer(lexis)
    for found in pattern.finditer(text):
        index = int(found.lastgroup[1:])
        token, end, closing = tokens[index], found.end(), f"c{index}"
        closed = found.group(closing) is not None if closing in pattern.groupindex else end < len(text)
        goes_on = not closed and not (token.one_line and end < len(text))
        yield Piece(found.start(), end, token.comment, token.mark, closed, goes_on)


def scan(text: str, lexis: Lexis, comments: bool = True) -> tuple[str, str | None]:
    """(`mask(text, lexis, comments)`, the opening mark of the string or comment that `text` ends inside, or None).
    A text that goes on from there is scanned right when that mark is put before it (but for an escape left pending
    at the very end)."""
    out, at, inside = [], 0, None
    for piece in pieces(text, lexis):
        inside = piece.mark if piece.goes_on else None
        chunk = text[piece.start : piece.end]
        if piece.comment:
            chunk = _blanked(chunk, " ") if comments else chunk
        else:
            inner_end = len(chunk) - (len(piece.mark) if piece.closed else 0)
            chunk = chunk[: len(piece.mark)] + _blanked(chunk[len(piece.mark) : inner_end], "_") + chunk[inner_end:]
        out += [text[at : piece.start], chunk]
        at = piece.end
    out.append(text[at:])
    return "".join(out), inside


def _blanked(text: str, fill: str) -> str:
    """`text` with every character but a newline replaced by `fill`."""
    return re.sub(r"[^\n]", fill, text)


# ---------------------------------------------------------------- the records


@dataclass(frozen=True)
class Signal:
    """A cheap pattern that a language's code (or a request in words) shows, with a weight (see `from_text`)."""

    what: str  # the explanation shown in Detection.evidence
    weight: float
    pattern: re.Pattern
    code: bool = True  # match code lines only (False: the whole text, comments included)


def signal(what: str, weight: float, pattern: str, code: bool = True) -> Signal:
    return Signal(what, weight, re.compile(pattern, re.MULTILINE), code)


@dataclass(frozen=True)
class Language:
    """One language the app knows: its names, files, lexis, grammar, blocks, checks and how it is recognised."""

    name: str  # the id used everywhere: "typescript"
    display: str  # how people write it: "TypeScript"
    extensions: tuple[str, ...]  # file name endings, lower case with the dot: (".ts", ".mts", ".cts")
    lexis: Lexis  # its comments and strings
    grammar: Grammar  # the tree-sitter grammar static_eval parses it with
    blocks: str  # BRACES, INDENT or KEYWORDS: what ends a block (how a prompt's open blocks are closed)
    check: CheckRun | None  # how a check of the user's examples runs there; None: checks are not run in it
    aliases: tuple[str, ...] = ()  # other names clients send, lower case: ("ts",)
    fence: str = ""  # the Markdown fence info word this app writes (```typescript); "": the name
    block_words: tuple[tuple[str, str], ...] = ()  # KEYWORDS: (word that opens a block, the word that closes it)
    anywhere_words: tuple[str, ...] = ()  # of those opening words, the ones that open a block wherever they stand
    # (Lua's `function` in `return function() ... end`); the others only where a statement starts
    filenames: tuple[str, ...] = ()  # whole file names that are this language: "Gemfile"
    signals: tuple[Signal, ...] = ()  # what its code shows (signals shared with other languages: _SHARED_SIGNALS)
    named: tuple[str, ...] | None = None  # how a request in words names it: ("Go", "Golang"); None: its display
    highlight: str | None = None  # the page's highlighting for it (a gr.Code language); None: plain text

    def __post_init__(self):
        if not self.fence:
            object.__setattr__(self, "fence", self.name)
        if self.named is None:
            object.__setattr__(self, "named", (self.display,))

    @property
    def line_comments(self) -> tuple[str, ...]:
        """Its line-comment marks, the usual one first."""
        return self.lexis.line_comments

    @property
    def block_comment(self) -> tuple[str, str] | None:
        """(opening, closing) marks of its block comment, or None."""
        return self.lexis.block_comment

    @property
    def line_comment(self) -> str | None:
        """The usual line-comment mark, or None."""
        return self.line_comments[0] if self.line_comments else None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"languages.by_name({self.name!r})"

    def __reduce_ex__(self, protocol):
        """A table's record copies and pickles as itself (code compares records by identity); another as its fields."""
        if any(lang is self for lang in LANGUAGES):
            return by_name, (self.name,)
        return super().__reduce_ex__(protocol)


_C_FAMILY = Lexis(("//",), C_COMMENT, char_literals=True)  # C, C++, Java, C#: `'` a character literal
_SCRIPT = Lexis(("//",), C_COMMENT, strings=('"', "'"), long_strings=("`",))  # JavaScript and TypeScript
_RUBY_WORDS = tuple(
    (word, "end") for word in ("def", "class", "module", "if", "unless", "while", "until", "for", "case", "begin", "do")
)

# fmt: off
LANGUAGES: tuple[Language, ...] = (
    Language(
        name="python", display="Python", aliases=("py", "python3", "py3"), extensions=(".py", ".pyi", ".pyw"),
        lexis=Lexis(("#",), strings=('"', "'"), long_strings=('"""', "'''")),
        grammar=Grammar("tree-sitter-python", "tree_sitter_python"), blocks=INDENT, check=CheckRun(None, "python3"),
        highlight="python",
        signals=(
            signal("`def f(...):`", 4, r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(.*\)[ \t]*(?:->.*)?:[ \t]*$"),
            signal("`def f(` over lines", 1, r"^[ \t]*def[ \t]+\w+[ \t]*\([^)]*$"),
            signal("`import x` / `from x import`", 2,
                   r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]"
                   r"|import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*$)"),
            signal("`class X:`", 3, r"^[ \t]*class[ \t]+\w+[ \t]*(?:\(.*\))?[ \t]*:[ \t]*$"),
            signal('`"""` docstring', 1, r'^[ \t]*(?:[rRbBuU]?""")'),
            signal("`if ...:` / `for ...:`", 1, r"^[ \t]*(?:if|elif|else|for|while|try|except|with)\b.*:[ \t]*$"),
        ),
    ),
    Language(
        name="javascript", display="JavaScript",
        aliases=("js", "node", "nodejs", "jsx", "javascriptreact", "ecmascript"),
        extensions=(".js", ".mjs", ".cjs", ".jsx"), lexis=_SCRIPT,
        grammar=Grammar("tree-sitter-javascript", "tree_sitter_javascript"), blocks=BRACES,
        check=CheckRun(None, "node"), named=("JavaScript", "Node.js"), highlight="javascript",
    ),
    Language(
        name="typescript", display="TypeScript", aliases=("ts",), extensions=(".ts", ".mts", ".cts"), lexis=_SCRIPT,
        grammar=Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_typescript"), blocks=BRACES,
        check=CheckRun("tsc", "node"), highlight="typescript",
        signals=(  # TypeScript's own signals are the types
            signal("type annotations `(x: number)`", 4,
                   r"\b\w+\??[ \t]*:[ \t]*(?:number|string|boolean|any|void|unknown|never|bigint|object"
                   r"|[A-Z]\w*(?:<[^>]*>)?)(?:\[\])*[ \t]*[,)=;]"),
            signal("`): T {` return type", 3, r"\)[ \t]*:[ \t]*[\w\[\]<>|, .]+[ \t]*\{[ \t]*$"),
            signal("`interface X` / `type X =`", 3,
                   r"^[ \t]*(?:export[ \t]+)?(?:interface[ \t]+\w+|type[ \t]+\w+[ \t]*=)"),
        ),
    ),
    Language(
        name="tsx", display="TSX", aliases=("typescriptreact",), extensions=(".tsx",), lexis=_SCRIPT,
        grammar=Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_tsx"),  # TypeScript with JSX
        blocks=BRACES, check=CheckRun("tsc", "node"), named=(), highlight="typescript",
    ),
    Language(
        name="java", display="Java", extensions=(".java",),
        lexis=Lexis(("//",), C_COMMENT, long_strings=('"""',), char_literals=True),
        grammar=Grammar("tree-sitter-java", "tree_sitter_java"), blocks=BRACES, check=CheckRun("javac", "java"),
        highlight="cpp",  # the C family's braces, strings and comments suit it well enough
        signals=(
            signal("`import java.` / `package x.y;`", 5,
                   r"^import[ \t]+(?:static[ \t]+)?(?:java|javax|org|com)\.[\w.*]+;|^package[ \t]+[\w.]+;"),
            signal("`ArrayList<` / `System.out` / `String x`", 1,
                   r"\bArrayList<|\bSystem\.out\.|\bString(?:\[\])?[ \t]+\w|\bHashMap<|\bboolean\b|@Override\b"
                   r"|<(?:Long|Integer|Boolean|Double|Character|Float)\b"),
            signal("a camelCase method", 1,
                   r"\b(?:public|private|protected|static)[ \t]+[\w<>\[\], ]+[ \t]+[a-z]\w*[ \t]*\("),
        ),
    ),
    Language(
        name="c", display="C", extensions=(".c", ".h"), lexis=_C_FAMILY,
        grammar=Grammar("tree-sitter-c", "tree_sitter_c"), blocks=BRACES, check=CheckRun("gcc", None), highlight="c",
        signals=(
            signal("`printf` / `malloc` / `.h` includes", 1,
                   r"\b(?:printf|malloc|free|scanf)\(|#[ \t]*include[ \t]*<\w+\.h>", code=False),
        ),
    ),
    Language(
        name="cpp", display="C++", aliases=("c++", "cxx", "cc", "hpp"),
        extensions=(".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp"), lexis=_C_FAMILY,
        grammar=Grammar("tree-sitter-cpp", "tree_sitter_cpp"), blocks=BRACES, check=CheckRun("g++", None),
        highlight="cpp",
        signals=(
            signal("`std::` / `template<` / `vector<`", 3,
                   r"\bstd::|\btemplate[ \t]*<|\bvector[ \t]*<|\bnamespace\b|\busing[ \t]+namespace\b|\bcout\b"
                   r"|<bits/stdc\+\+\.h>|#[ \t]*include[ \t]*<(?:iostream|vector|string|map|algorithm|set"
                   r"|unordered_map)>",
                   code=False),
        ),
    ),
    Language(
        name="csharp", display="C#", aliases=("cs", "c#", "c-sharp", "c_sharp"), extensions=(".cs", ".csx"),
        lexis=_C_FAMILY, grammar=Grammar("tree-sitter-c-sharp", "tree_sitter_c_sharp"), blocks=BRACES,
        check=CheckRun("mcs", "mono"),  # Mono's compiler and runtime, as MultiPL-E runs C#
        highlight="cpp",
        signals=(
            signal("`using System;` / `namespace x`", 5,
                   r"^using[ \t]+System(?:\.[\w.]+)?;|^namespace[ \t]+[\w.]+[ \t]*[{;]?$"),
            signal("`Console.` / `List<long>` / `string x`", 1,
                   r"\bConsole\.|\b(?:List|Dictionary|IEnumerable|HashSet)<(?:long|int|string|bool|double|char"
                   r"|float|Tuple)\b|\bstring(?:\[\])?[ \t]+\w|\bbool[ \t]+\w|\bvar[ \t]+\w+[ \t]*=[ \t]*new\b"),
            signal("a PascalCase method", 1,
                   r"\b(?:public|private|protected|static)[ \t]+[\w<>\[\], ]+[ \t]+[A-Z]\w*[ \t]*\("),
        ),
    ),
    Language(
        name="go", display="Go", aliases=("golang",), extensions=(".go",),
        lexis=Lexis(("//",), C_COMMENT, raw_strings=("`",), char_literals=True),
        grammar=Grammar("tree-sitter-go", "tree_sitter_go"), blocks=BRACES,
        check=CheckRun(None, "go"),  # `go run` builds and runs in one step
        named=("Go", "Golang"), highlight="cpp",
        signals=(
            signal("`package x` (no `;`)", 3, r"^package[ \t]+\w+[ \t]*$"),
            signal("`func f(`", 4, r"^func[ \t]+(?:\([^)]*\)[ \t]*)?\w+[ \t]*(?:\[[^\]]*\])?\("),
            signal("`import (`", 2, r"^import[ \t]*\("),
            signal("`:=` / `[]int`", 1, r":=|\[\](?:int|string|float64|byte|bool|interface)"),
        ),
    ),
    Language(
        name="rust", display="Rust", aliases=("rs",), extensions=(".rs",),
        lexis=Lexis(("//",), C_COMMENT, strings=(), long_strings=('"',), char_literals=True),  # else a lifetime
        grammar=Grammar("tree-sitter-rust", "tree_sitter_rust"), blocks=BRACES, check=CheckRun("rustc", None),
        highlight="cpp",
        signals=(
            signal("`fn f(`", 4,
                   r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?(?:const[ \t]+|async[ \t]+|unsafe[ \t]+)*fn[ \t]+\w+"),
            signal("`-> T {` / `let mut`", 1, r"\)[ \t]*->[ \t]*[^{]+\{[ \t]*$|\blet[ \t]+mut\b"),
            signal("`use std::` / `impl`", 3, r"^[ \t]*use[ \t]+(?:std|crate|super)::|^[ \t]*impl\b"),
            signal("`Vec<` / `vec![` / `&str`", 1, r"\bVec<|\bvec!\[|&(?:mut[ \t]+)?str\b|\b[iu]size\b|\bOption<"),
        ),
    ),
    Language(
        name="php", display="PHP", extensions=(".php", ".phtml"),
        lexis=Lexis(("//", "#"), C_COMMENT, strings=(), long_strings=('"', "'"),
                    line_comment_pattern=r"//[^\n]*|#(?!\[)[^\n]*"),  # `#[` opens an attribute
        grammar=Grammar("tree-sitter-php", "tree_sitter_php", "language_php"),  # PHP files with `<?php` tags
        blocks=BRACES, check=CheckRun(None, "php"), highlight="cpp",
        signals=(
            signal("`<?php`", 8, r"<\?php\b", code=False),
            signal("`function f($x`", 3, r"\bfunction[ \t]+\w+[ \t]*\([ \t]*(?:[\w?|\\]+[ \t]+)?&?\$\w"),
            signal("`$var`", 1, r"\$[A-Za-z_]\w*[ \t]*(?:=[^=]|->|;)"),
        ),
    ),
    Language(
        name="ruby", display="Ruby", aliases=("rb",), extensions=(".rb", ".rake", ".gemspec"),
        lexis=Lexis(("#",), ("=begin", "=end"), strings=(), long_strings=('"', "'"), block_comment_at_line_start=True),
        grammar=Grammar("tree-sitter-ruby", "tree_sitter_ruby"), blocks=KEYWORDS, check=CheckRun(None, "ruby"),
        block_words=_RUBY_WORDS, filenames=("Rakefile", "Gemfile"),
        signals=(
            signal("`def f(...)` without a colon", 4,
                   r"^[ \t]*def[ \t]+(?:self\.)?\w+[?!=]?(?:[ \t]*\([^)]*\)|[ \t]+\w[\w, *&=]*)?[ \t]*$"),
            signal("`end`", 2, r"^[ \t]*end[ \t]*$"),
            signal("`require '...'`", 2, r"^[ \t]*require(?:_relative)?[ \t]+['\"]"),
            signal("`do |x|` / `.each`", 1, r"\bdo[ \t]*\|[^|]*\||\.each\b|\bputs\b|\battr_(?:reader|accessor)\b"),
        ),
    ),
    Language(
        name="shell", display="Shell (Bash)", aliases=("sh", "bash", "zsh", "shellscript", "shell-script"),
        extensions=(".sh", ".bash", ".zsh"),  # zsh is parsed with the Bash grammar: close, not exact
        fence="bash",
        lexis=Lexis(("#",), strings=(), long_strings=('"', "`"), raw_strings=("'",),
                    line_comment_pattern=r"(?<![^\s;&|(])#[^\n]*"),  # `$#` and `${#x}` are no comments
        grammar=Grammar("tree-sitter-bash", "tree_sitter_bash"), blocks=KEYWORDS, check=CheckRun(None, "bash"),
        block_words=(("if", "fi"), ("case", "esac"), ("do", "done")),
        filenames=(".bashrc", ".bash_profile", ".profile", ".zshrc"), named=("Bash", "shell"), highlight="shell",
        signals=(
            signal("`#!/bin/sh`-style shebang", 6, r"\A#![^\n]*\b(?:ba|z|k|da)?sh\b", code=False),
            signal("`name() {` function", 3, r"^[ \t]*(?:function[ \t]+)?[\w-]+[ \t]*\(\)[ \t]*\{[ \t]*$"),
            signal("`fi` / `esac` / `done`", 2, r"^[ \t]*(?:fi|esac|done)\b"),
            signal("`if [ ... ]` / `echo $x`", 1, r"^[ \t]*(?:if|while)[ \t]+\[|\becho[ \t]|\blocal[ \t]+\w+="),
        ),
    ),
    Language(
        name="lua", display="Lua", extensions=(".lua",),
        lexis=Lexis(("--",), ("--[[", "]]"), strings=('"', "'")),  # `--[[` before `--`: block comments come first
        grammar=Grammar("tree-sitter-lua", "tree_sitter_lua"), blocks=KEYWORDS,
        check=None,  # no Lua interpreter in the sandbox's image (Debian's lua5.4 is not installed there)
        block_words=(("function", "end"), ("if", "end"), ("for", "end"), ("while", "end"), ("do", "end"),
                     ("repeat", "until")),
        anywhere_words=("function", "if", "for", "while", "repeat"),  # Lua has no statement modifiers
        signals=(
            signal("`local x =` / `local function`", 3,  # not the shell's `local x=1`
                   r"^[ \t]*local[ \t]+(?:function[ \t]+\w+|\w+(?:[ \t]*,[ \t]*\w+)*(?:[ \t]+=|[ \t]*$))"),
            signal("`function f(...)` without a brace", 2,
                   r"^[ \t]*(?:local[ \t]+)?function[ \t]+[\w.:]+[ \t]*\([^)]*\)[ \t]*$"),
            signal("`end`", 2, r"^[ \t]*end[ \t]*$"),
            signal("`then` / `elseif` / `~=` / `..`", 1, r"\bthen[ \t]*$|^[ \t]*elseif\b|~=|\.\.[ \t]*['\"\w]"),
        ),
    ),
)
# fmt: on

PYTHON = LANGUAGES[0]
_BY_NAME = MappingProxyType({key: lang for lang in LANGUAGES for key in (lang.name, *lang.aliases)})


# ---------------------------------------------------------------- blocks: what a piece of code still owes

_PAIRS = {"{": "}", "(": ")", "[": "]"}
# Ruby, Lua: the `do` of a loop earlier on its line (not yet given its `do`) opens no second block
_LOOP_BEFORE = re.compile(r"\b(?:while|until|for)\b(?!.*\b(?:do|end)\b)")
_STATEMENT_BEFORE = ";=(|&{!"  # a block word right after one of these starts a statement (`x = if ...`, `a; if`)
_WORD_BEFORE = re.compile(r"\b(?:then|else|do|elif|begin)$")  # ... or right after one of these words


def open_blocks(code: str, language: Language) -> list[str]:
    """The closers the code still owes, outermost first: ["}", "}"] for a Java method left open in its class, ["end"]
    for a Ruby `def` (its brackets, and its block words where words close its blocks; strings and comments skipped)."""
    return walk_blocks(mask(code, language.lexis), language, [])[0]


def walk_blocks(
    masked: str, language: Language, stack: list[str], floor: int = -1, start: int = 0
) -> tuple[list[str], int | None]:
    """Follow the brackets and block words of masked code (see `mask`) from index `start` (what is before it is only
    read as what precedes a block word on its line) and `stack`, the closers owed before it: (the closers owed at its
    end, None), or where fewer than `floor` are first owed, (those, the index just after the closer that did it)."""
    stack = list(stack)
    pattern, words = _block_pattern(language)
    for token in pattern.finditer(masked, start):
        text = token.group()
        if token.lastgroup == "bracket":
            if text in _PAIRS:
                stack.append(_PAIRS[text])
            elif stack and stack[-1] == text:
                stack.pop()
        else:
            _block_word(masked, token.start(), text, words, stack, language.anywhere_words)
        if len(stack) < floor:
            return stack, token.end()
    return stack, None


def _block_word(code: str, start: int, word: str, words: dict[str, str], stack: list[str], anywhere=()) -> None:
    """Opening words count where a statement starts (`x = 1 if y` opens nothing), those `anywhere` wherever they
    stand; where `do` is closed by `end` (Ruby, Lua), `do` opens and `end` closes wherever they stand
    (`xs.each do |x|`, `if a then b else c end`)."""
    line_start = code.rfind("\n", 0, start) + 1
    before = code[line_start:start].rstrip()
    at_statement = not before or before[-1] in _STATEMENT_BEFORE or _WORD_BEFORE.search(before) is not None
    end_style = words.get("do") == "end"
    if word in words:
        if at_statement or word in anywhere or (word == "do" and end_style and not _LOOP_BEFORE.search(before)):
            stack.append(words[word])
    elif (at_statement or end_style) and stack and stack[-1] == word:
        stack.pop()


@cache
def _block_pattern(language: Language) -> tuple[re.Pattern, dict[str, str]]:
    """One regular expression that finds, left to right, the brackets and (where words close blocks) block words."""
    words = dict(language.block_words) if language.blocks == KEYWORDS else {}
    parts = [r"(?P<bracket>[{}()\[\]])"]
    if words:
        every = sorted(set(words) | set(words.values()), key=len, reverse=True)
        parts.append(rf"(?<![\w$.:@])(?P<word>{'|'.join(every)})(?![\w?!:])")
    return re.compile("|".join(parts)), words


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
# look at code lines only (comment lines dropped, so examples in a doc comment do not count). A language's own
# signals are in its record; these speak for several.

_BRACED = tuple(lang.name for lang in LANGUAGES if lang.blocks == BRACES and lang.name != "tsx")
# fmt: off
_SHARED_SIGNALS: tuple[tuple[tuple[str, ...], Signal], ...] = (
    (("c", "cpp"), signal("`#include`", 3, r"^[ \t]*#[ \t]*include[ \t]*[<\"]", code=False)),
    (("c", "cpp"), signal("`long f(long n) {` C-style definition", 2,
                          r"^(?:static[ \t]+|inline[ \t]+|const[ \t]+|unsigned[ \t]+|signed[ \t]+)*"
                          r"(?:int|long|short|void|char|float|double|bool|size_t|auto|std::[\w:<>, ]+|struct[ \t]+\w+)"
                          r"[ \t*&]+\w+[ \t]*\([^)]*\)[ \t]*(?:const[ \t]*)?\{?[ \t]*$")),
    (("java", "csharp"), signal("`public static`", 2, r"\bpublic[ \t]+static\b")),
    (("java", "csharp", "cpp", "typescript", "javascript", "php"),
     signal("`class X {`", 1, r"^[ \t]*(?:public[ \t]+)?class[ \t]+\w+")),
    (("javascript", "typescript"),
     signal("`function f(`", 2, r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?function\b")),
    (("javascript", "typescript"),
     signal("`const x =` / `(a) =>`", 2,
            r"^[ \t]*(?:export[ \t]+)?(?:const|let)[ \t]+[\w{[][^=]*=[^=]|\)[ \t]*=>"
            r"|^[ \t]*var[ \t]+\w+[ \t]*=[^=>]*;?$")),
    (("javascript", "typescript"),
     signal("`console.log` / `require(` / `===`", 1, r"=>|\bconsole\.log\(|\brequire\(|module\.exports|===|!==")),
    # one block closer alone on a line: a braced language, not Python or Ruby
    (_BRACED, signal("`}` alone", 0.5, r"^[ \t]*\}[ \t]*;?[ \t]*$")),
)
# fmt: on
_SIGNALS: tuple[tuple[str, Signal], ...] = tuple(
    [(lang.name, s) for lang in LANGUAGES for s in lang.signals]
    + [(name, s) for names_, s in _SHARED_SIGNALS for name in names_]
)

# A request in words that names its language ("... in Rust", "a Go function").
_NAMED = {word: lang.name for lang in LANGUAGES for word in lang.named}
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
    matched: dict[Signal, bool] = {}
    for name, found in _SIGNALS:
        if found not in matched:
            matched[found] = found.pattern.search(code if found.code else text) is not None
        if matched[found]:
            scores[name] += found.weight
            why[name].append(found.what)
    named = _IN_WORDS.search(text)
    if named is not None:
        name = _NAMED[named.group("a") or named.group("b")]
        scores[name] += _MIN_SCORE
        why[name].append(f"named in words: {named.group(0).strip()!r}")
    best = max(scores, key=lambda n: scores[n])  # the first of equals: table order
    if scores[best] < _MIN_SCORE:
        return Detection(PYTHON, DEFAULT, "no clear signal")
    return Detection(_BY_NAME[best], TEXT, ", ".join(why[best]))
