"""Pylint adapter: one configured, reusable linter that checks files and returns its messages as plain dicts.

Runs inside the worker process (see worker.py); it parses the files with astroid and never imports them.
"""

from __future__ import annotations

import os
import re

ERROR_CATEGORIES = ("error", "fatal")
ANALYSIS_FAILURES = ("fatal", "astroid-error", "parse-error", "type-check-error")  # a checker failed, not the code
_QUOTED = re.compile(r"'([^']*)'")

# Linted once when a worker starts (off the request path): typical candidate code, so that pylint, astroid
# and the stdlib modules candidates use most are parsed and cached before the first real batch.
WARM_UP_SOURCE = '''import collections
import functools
import hashlib
import heapq
import itertools
import math
import re
import string
from typing import Dict, List, Optional, Tuple


def words(text: str, counts: Optional[Dict[str, int]] = None) -> List[Tuple[str, int]]:
    """Word counts, most common first."""
    found = re.findall(r"[a-z]+", re.sub(r"[^a-z ]", "", text.lower()))
    counter = collections.Counter(found)
    queue = collections.deque(counter.most_common())
    table = collections.defaultdict(int, counts or {})
    pairs = list(itertools.combinations(sorted(counter), 2)) + list(itertools.permutations(found[:2]))
    total = functools.reduce(lambda a, b: a + b, counter.values(), 0)
    heap = [(-n, w) for w, n in counter.items()]
    heapq.heapify(heap)
    digest = hashlib.md5(text.encode()).hexdigest()
    letters = [c for c in string.ascii_lowercase if c in digest]
    return [(w, n + table[w]) for w, n in queue] + [(str(math.floor(math.sqrt(total))), len(pairs + letters))]


def unused(x: int) -> int:
    y = x
    return z
'''


class PylintChecker:
    """A PyLinter configured once (no plugins, no extension loading), reused for every batch of files."""

    def __init__(self, messages: tuple[str, ...]):
        from pylint.config.config_initialization import _config_initialization
        from pylint.lint import PyLinter
        from pylint.reporters import CollectingReporter

        self._reporter_class = CollectingReporter
        self._linter = PyLinter(reporter=CollectingReporter())
        self._linter.load_default_plugins()
        options = [
            "--disable=all",
            "--enable=" + ",".join(messages),
            "--load-plugins=",
            "--unsafe-load-any-extension=no",
            "--extension-pkg-allow-list=",
            "--persistent=no",
            "--jobs=1",
            "--score=no",
            "--reports=no",
        ]
        # An empty config file, so that no pylintrc or pyproject.toml (and no plugin they name) is read.
        _config_initialization(self._linter, options, reporter=self._linter.reporter, config_file=os.devnull)

    def check(self, paths: list[str]) -> dict[str, list[dict]]:
        """Lint the files in one run; messages per path, each a plain dict."""
        reporter = self._reporter_class()
        self._linter.set_reporter(reporter)
        modules = {os.path.splitext(os.path.basename(p))[0]: p for p in paths}
        try:
            self._linter.check(paths)
        finally:
            _forget_modules(modules)
        results: dict[str, list[dict]] = {p: [] for p in paths}
        for message in reporter.messages:
            path = modules.get(message.module)
            if path is not None:
                results[path].append(_as_dict(message, path))
        return results


def _forget_modules(modules: dict[str, str]) -> None:
    """Drop the checked modules from astroid's cache (it caches by module name), keep the stdlib warm."""
    from astroid import MANAGER

    for name in modules:
        MANAGER.astroid_cache.pop(name, None)


def _as_dict(message, path: str) -> dict:
    text = message.msg.replace(path, "<candidate>").replace(message.module, "<candidate>")
    return {
        "symbol": message.symbol,
        "msg_id": message.msg_id,
        "message": text,
        "obj": message.obj,
        "line": message.line,
        "column": message.column,
        "category": message.category,
        "name": message_name(message.symbol, text),
    }


def message_name(symbol: str, text: str) -> str | None:
    """The name a pylint message is about (the variable, import, argument...), or None."""
    if (
        symbol == "unused-import"
    ):  # "Unused import os", "Unused path imported from os as p", "Unused numpy imported as np"
        rest = text.removeprefix("Unused ").removeprefix("import ")
        if " imported" in rest:
            head, _, tail = rest.partition(" imported")
            return tail.rpartition(" as ")[2] if " as " in tail else head
        return rest.split()[0] if rest.split() else None
    found = _QUOTED.search(text)
    return found.group(1) if found else None
