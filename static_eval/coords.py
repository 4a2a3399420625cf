"""Maps positions in prompt + completion to the completion's own coordinates (line 1 = its first line)."""

from __future__ import annotations


class CandidateCoordinates:
    """Converts (row, column) of the full code into (line, column) of the completion alone."""

    def __init__(self, prompt: str, code: str):
        self._code = code
        self._lines: list[str] | None = None  # full-code lines, split on first use
        self.first_row = prompt.count("\n")  # 0-based row of the full code where the completion starts
        self.first_col = len(prompt) - (prompt.rfind("\n") + 1)  # prompt characters before it on that row

    def from_chars(self, row: int, col: int) -> tuple[int, int]:
        """0-based row and character column of the full code -> 1-based line, 0-based column of the completion.

        Positions inside the prompt are clamped to the completion's start (line 1, column 0).
        """
        line = row - self.first_row + 1
        if line < 1:
            return 1, 0
        if line == 1:
            return 1, max(col - self.first_col, 0)
        return line, max(col, 0)

    def from_bytes(self, row: int, byte_col: int) -> tuple[int, int]:
        """Like from_chars, for a UTF-8 byte column (tree-sitter points, Python AST offsets)."""
        return self.from_chars(row, self._char_col(row, byte_col))

    def _char_col(self, row: int, byte_col: int) -> int:
        if self._lines is None:
            self._lines = self._code.split("\n")
        if not 0 <= row < len(self._lines):
            return byte_col
        prefix = self._lines[row].encode("utf-8", "surrogatepass")[:byte_col]
        return len(prefix.decode("utf-8", "ignore"))
