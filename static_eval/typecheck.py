"""Mypy adapter: type-checks files in-process (mypy's API) with an incremental cache private to the worker, and
returns its errors as plain dicts shaped like the pylint adapter's (lint.py), so one context diff serves both.

Runs inside the worker process (see worker.py); mypy reads the files and never imports or runs them.
"""

from __future__ import annotations

import os
import re
import sys

TYPE_PREFIX = "type-"  # a type finding's kind: "type-" + mypy's error code, e.g. "type-return-value"
# mypy codes left out: what pylint or tree-sitter reports already (a name, a syntax error, a redefinition), so a
# candidate is not charged twice; and notes about mypy itself rather than the code.
SKIPPED_CODES = frozenset(
    {
        "name-defined",
        "syntax",
        "no-redef",
        "used-before-def",
        "possibly-undefined",
        "import",
        "import-not-found",
        "import-untyped",
        "empty-body",
        "annotation-unchecked",
    }
)
_LINE = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+):(?P<column>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$"
)
_QUOTED = re.compile(r'"([^"]*)"')
OPTIONS = (
    "--ignore-missing-imports",
    "--follow-imports=skip",  # an imported package is Any: checking torch or numpy
    # (they ship their types) would take longer than the batch's time limit; the standard library's stubs still count
    "--check-untyped-defs",
    "--show-column-numbers",
    "--show-error-codes",
    "--no-error-summary",
    "--no-color-output",
    "--hide-error-context",
    "--no-pretty",
    "--no-warn-no-return",
    "--allow-redefinition",
    "--python-version",
    f"{sys.version_info.major}.{sys.version_info.minor}",  # the grammar pylint parses with
)


class MypyChecker:
    """mypy's API with fixed options (no config file, no plugins), its cache in `cache_dir` across batches: the
    standard library's stubs are read once, then each batch checks only its own files."""

    def __init__(self, cache_dir: str):
        from mypy import api

        self._run = api.run
        self._options = ["--cache-dir", cache_dir, "--config-file", os.devnull, *OPTIONS]

    def check(self, paths: list[str]) -> dict[str, list[dict]]:
        """Type-check the files in one run; errors per path, each a plain dict (the codes in SKIPPED_CODES left out).
        The files must parse: mypy stops checking every file at one file's syntax error (worker._check_all gives it
        only those pylint parsed)."""
        given = {os.path.abspath(p): p for p in paths}  # mypy writes paths from its cwd: matched as absolute
        limit = sys.getrecursionlimit()  # mypy raises it for itself; pylint relies on the default to give up on
        try:  # code nested too deep (measured: 44 s on 3000 unary minus signs otherwise)
            report, _, _ = self._run(self._options + list(given))
        except Exception as error:  # mypy crashed on hostile input: each file gets the failure, the worker serves on
            failure = {
                "symbol": "type-check-error",
                "message": f"mypy failed: {type(error).__name__}",
                "obj": "",
                "line": 1,
                "column": 0,
                "category": "fatal",
                "name": None,
            }
            return {p: [dict(failure)] for p in paths}
        finally:
            sys.setrecursionlimit(limit)
        results: dict[str, list[dict]] = {p: [] for p in paths}  # keyed by the paths as given
        for line in report.splitlines():
            found = _LINE.match(line)
            path = given.get(os.path.abspath(found["path"])) if found is not None else None
            if path is None:
                continue
            code = found["code"] or "misc"
            if code not in SKIPPED_CODES:
                results[path].append(_as_dict(found, code, os.path.splitext(os.path.basename(path))[0]))
        return results


def _as_dict(found: re.Match, code: str, module: str) -> dict:
    text = found["message"].replace(module, "<candidate>")
    quoted = _QUOTED.search(text)
    return {
        "symbol": TYPE_PREFIX + code,
        "message": text,
        "obj": "",
        "line": int(found["line"]),
        "column": max(int(found["column"]) - 1, 0),  # mypy counts columns from 1, pylint (and we) from 0
        "category": "type",
        "name": quoted.group(1) if quoted else text,  # what the message is about, so the context diff can match it
    }
