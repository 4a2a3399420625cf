"""Tree-sitter adapter: syntax errors (ERROR and MISSING nodes), cut-off code and what a completion adds."""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter_python
from tree_sitter import Language, Node, Parser

STATEMENT_PARENTS = ("module", "block")
DEFINITIONS = ("function_definition", "class_definition", "decorated_definition")
TRIVIAL = ("pass", "ellipsis", "string", "raise-not-implemented", "empty-definition")  # statements that run nothing
MAX_DEFINITION_DEPTH = 50  # deeper nesting of definitions is not looked into (counted as code)


@dataclass(frozen=True)
class SyntaxProblem:
    """One ERROR or MISSING node of the full code."""

    row: int  # 0-based row in the full code
    byte_col: int  # UTF-8 byte column in that row
    missing: bool  # True for a MISSING node (something expected that is not there)
    text: str  # the unexpected text (ERROR) or the missing node's type (MISSING)


@dataclass(frozen=True)
class AddedCode:
    """The statements a completion adds, each as a category (one of TRIVIAL, or "code")."""

    categories: tuple[str, ...]  # every statement that starts in the completion (or straddles into it)
    stub_function: str | None  # the prompt's still-empty function that the completion continues
    stub_categories: tuple[str, ...]  # what the completion adds to that function's body


class PythonSyntax:
    """A reusable tree-sitter parser for Python source."""

    def __init__(self):
        self._parser = Parser(Language(tree_sitter_python.language()))

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
            return SyntaxProblem(row, byte_col, True, node.type)
        text = self._source[node.start_byte : min(node.end_byte, node.start_byte + 40)]
        return SyntaxProblem(row, byte_col, False, text.decode("utf-8", "replace"))

    def error_at_end(self) -> bool:
        """Whether a syntax problem reaches the end of the code (an unfinished statement)."""
        end = len(self._source.rstrip())
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


def _is_compound(node: Node) -> bool:
    return node.child_by_field_name("body") is not None or node.type in DEFINITIONS


def _name(node: Node) -> str | None:
    name = node.child_by_field_name("name")
    return name.text.decode("utf-8", "replace") if name is not None and name.text is not None else None


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
