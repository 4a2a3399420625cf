"""Tree-sitter adapter: syntax errors (ERROR and MISSING nodes), cut-off code and what a completion adds, in any
language of languages.py (its grammar package loaded on first use)."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Language, Node, Parser

import languages

STATEMENT_PARENTS = ("module", "block")  # Python: nodes whose children are statements
DEFINITIONS = ("function_definition", "class_definition", "decorated_definition")
TRIVIAL = ("pass", "ellipsis", "string", "raise-not-implemented", "empty-definition")  # statements that run nothing
MAX_DEFINITION_DEPTH = 50  # deeper nesting of definitions is not looked into (counted as code)
# Other languages: the nodes that are a function or method with a body, in the grammars of languages.py.
FUNCTION_NODES = frozenset(
    {
        "function_declaration",  # JavaScript, TypeScript, Go
        "generator_function_declaration",
        "function_expression",
        "arrow_function",
        "method_definition",
        "function_definition",  # C, C++, PHP, Bash
        "method_declaration",  # Java, C#, Go, PHP
        "constructor_declaration",
        "local_function_statement",  # C#
        "func_literal",  # Go
        "function_item",  # Rust
        "closure_expression",
        "method",  # Ruby
        "singleton_method",
    }
)


@dataclass(frozen=True)
class SyntaxProblem:
    """One ERROR or MISSING node of the full code."""

    row: int  # 0-based row in the full code
    byte_col: int  # UTF-8 byte column in that row
    missing: bool  # True for a MISSING node (something expected that is not there)
    text: str  # the unexpected text (ERROR) or the missing node's type (MISSING)
    start_byte: int = 0  # where it starts in the full code (UTF-8 bytes)


@dataclass(frozen=True)
class AddedCode:
    """The statements a completion adds, each as a category (one of TRIVIAL, or "code")."""

    categories: tuple[str, ...]  # every statement that starts in the completion (or straddles into it)
    stub_function: str | None  # the prompt's still-empty function that the completion continues
    stub_categories: tuple[str, ...]  # what the completion adds to that function's body


@dataclass(frozen=True)
class OpenFunction:
    """The function a prompt leaves open for the completion to write (languages other than Python)."""

    name: str | None  # None for an anonymous function
    empty: bool  # its body, completion included, holds nothing but comments


class TreeSitterSyntax:
    """A reusable tree-sitter parser for one language (Python by default). ImportError when its grammar package is
    not installed, ValueError when tree-sitter cannot load that grammar."""

    def __init__(self, language: languages.Language = languages.PYTHON):
        self.language = language
        self._parser = Parser(Language(language.grammar.load()))

    def parse(self, source: bytes) -> ParsedCode:
        return ParsedCode(self._parser.parse(source), source)


class ParsedCode:
    """A parsed source: its syntax problems and the statements that start after a given byte."""

    def __init__(self, tree, source: bytes):
        self._root = tree.root_node
        self._source = source

    @property
    def has_error(self) -> bool:
        return self._root.has_error

    def problems(self) -> list[SyntaxProblem]:
        """Outermost ERROR nodes and all MISSING nodes, in source order."""
        found: list[SyntaxProblem] = []
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.is_missing or node.type == "ERROR":
                found.append(self._problem(node))
                if node.type == "ERROR":
                    continue
            stack.extend(reversed([child for child in node.children if child.has_error]))
        return found

    def _problem(self, node: Node) -> SyntaxProblem:
        row, byte_col = node.start_point
        if node.is_missing:
            return SyntaxProblem(row, byte_col, True, node.type, node.start_byte)
        text = self._source[node.start_byte : min(node.end_byte, node.start_byte + 40)]
        return SyntaxProblem(row, byte_col, False, text.decode("utf-8", "replace"), node.start_byte)

    def error_at_end(self, end: int | None = None) -> bool:
        """Whether a syntax problem reaches the end of the code (an unfinished statement); end: where the code ends,
        in bytes (None: the source's end, trailing space left out)."""
        end = len(self._source.rstrip()) if end is None else end
        stack = [self._root]
        while stack:
            node = stack.pop()
            if (node.is_missing or node.type == "ERROR") and node.end_byte >= end:
                return True
            stack.extend(child for child in node.children if child.has_error and child.end_byte >= end)
        return False

    def added_code(self, boundary: int, end: int | None = None) -> AddedCode:
        """Classify the statements that start at or after byte `boundary` (where the completion begins) and before
        byte `end` (where the code after the cursor begins, for a middle; None: the end of the source)."""
        end = len(self._source) if end is None else end
        prompt_end = len(self._source[:boundary].rstrip())
        stub = self._stub_function(boundary, prompt_end, end)
        categories: list[str] = []
        stub_categories: list[str] = []
        stack: list[tuple[Node, Node | None]] = [(self._root, None)]  # (node, innermost enclosing function)
        while stack:
            node, function = stack.pop()
            if node.type == "function_definition":
                function = node
            for child in reversed(node.children):
                if child.end_byte <= boundary or child.start_byte >= end or child.type == "comment":
                    continue
                is_statement = child.is_named and node.type in STATEMENT_PARENTS
                if is_statement and (child.start_byte >= boundary or not _is_compound(child)):
                    category = _category(child) if child.start_byte >= boundary else "code"
                    categories.append(category)
                    if stub is not None and function is not None and function.id == stub.id:
                        stub_categories.append(category)
                else:
                    stack.append((child, function))
        name = _name(stub) if stub is not None else None
        return AddedCode(tuple(categories), name, tuple(stub_categories))

    def _stub_function(self, boundary: int, prompt_end: int, end: int) -> Node | None:
        """The innermost function still open at the prompt's end whose body outside the completion (before it, and
        after it for a middle) runs nothing."""
        if prompt_end == 0:
            return None
        node = self._root.descendant_for_byte_range(prompt_end - 1, prompt_end)
        while node is not None:
            if node.type == "function_definition" and node.start_byte < boundary and node.end_byte >= prompt_end:
                body = node.child_by_field_name("body")
                around = [
                    c
                    for c in (body.named_children if body else [])
                    if (c.end_byte <= boundary or c.start_byte >= end) and c.type != "comment"
                ]
                return node if all(_category(c) in TRIVIAL for c in around) else None
            node = node.parent
        return None

    def open_function(self, boundary: int) -> OpenFunction | None:
        """Languages other than Python: the innermost function still open where the prompt ends (the prompt ends in
        its `{` or its `def` header) and whether its whole body holds nothing but comments; None if there is none."""
        prompt_end = len(self._source[:boundary].rstrip())
        if prompt_end == 0:
            return None
        node = self._root.descendant_for_byte_range(prompt_end - 1, prompt_end)
        while node is not None and not (node.type in FUNCTION_NODES and node.start_byte < boundary):
            node = node.parent
        if node is None or node.end_byte <= prompt_end:  # closed within the prompt
            return None
        body = node.child_by_field_name("body")
        if body is None:  # Ruby: a method's statements sit beside its name and parameters
            header = {c.id for c in (node.child_by_field_name("name"), node.child_by_field_name("parameters")) if c}
            statements = [c for c in node.named_children if c.id not in header]
        else:
            statements = body.named_children
        return OpenFunction(_function_name(node), all("comment" in c.type for c in statements))


def _is_compound(node: Node) -> bool:
    return node.child_by_field_name("body") is not None or node.type in DEFINITIONS


def _name(node: Node) -> str | None:
    name = node.child_by_field_name("name")
    return name.text.decode("utf-8", "replace") if name is not None and name.text is not None else None


def _function_name(node: Node) -> str | None:
    """A function's name, also where C and C++ nest it in declarators (`long *add(long a)`)."""
    for _ in range(MAX_DEFINITION_DEPTH):
        if node.child_by_field_name("name") is not None:
            return _name(node)
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        if inner.child_by_field_name("declarator") is None and inner.child_by_field_name("name") is None:
            return inner.text.decode("utf-8", "replace") if inner.text is not None else None
        node = inner
    return None


def _category(node: Node, depth: int = 0) -> str:
    """What one statement does: one of TRIVIAL, or "code"."""
    if node.type == "pass_statement":
        return "pass"
    if node.type == "expression_statement" and node.named_child_count == 1:
        value = node.named_children[0]
        if value.type == "ellipsis":
            return "ellipsis"
        if value.type in ("string", "concatenated_string"):
            return "string"
    if node.type == "raise_statement" and node.named_child_count == 1:
        raised = node.named_children[0]
        if raised.type == "call":
            raised = raised.child_by_field_name("function")
        if raised is not None and raised.type == "identifier" and raised.text == b"NotImplementedError":
            return "raise-not-implemented"
    if node.type in DEFINITIONS and depth < MAX_DEFINITION_DEPTH:
        if node.type == "decorated_definition":
            inner = node.child_by_field_name("definition")
            return _category(inner, depth + 1) if inner is not None else "code"
        body = node.child_by_field_name("body")
        statements = [c for c in (body.named_children if body else []) if c.type != "comment"]
        if all(_category(c, depth + 1) in TRIVIAL for c in statements):
            return "empty-definition"
    return "code"
