"""Language recognition benchmark: how often languages.detect() names the right language of a prompt, per language.

Run from the repository root: `python -m benchmarks.lang_detect` (the labelled sample in benchmarks/data, see
MULTIPL_E.md), or give other JSON Lines files with `language` and `prompt` fields (MultiPL-E's own files: their
language labels js, rs, cs, ..., go_test.go are aliases or file names languages.py knows). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import languages

SAMPLE = Path(__file__).parent / "data" / "multipl_e_humaneval_sample.jsonl"
TARGET = 0.95  # the recognition rate each language must reach


def read_rows(paths: list[Path], language: str | None = None) -> list[tuple[str, str]]:
    """(language id, prompt) for every row of the files; `language` overrides the rows' own field."""
    rows = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    row = json.loads(line)
                    rows.append((_language_of(language or row["language"]).name, row["prompt"]))
    return rows


def _language_of(label: str) -> languages.Language:
    """A row's language label: an id or alias, or a file name (MultiPL-E labels Go "go_test.go")."""
    return languages.from_filename(label) or languages.by_name(label)


def recognition(rows: list[tuple[str, str]]) -> dict[str, dict]:
    """Per language: how many prompts, how many recognised, the rate, and what the others were taken for."""
    results: dict[str, dict] = {}
    for want, prompt in rows:
        got = languages.detect(prompt).language.name
        entry = results.setdefault(want, {"n": 0, "right": 0, "taken_for": Counter()})
        entry["n"] += 1
        entry["right"] += got == want
        if got != want:
            entry["taken_for"][got] += 1
    for entry in results.values():
        entry["rate"] = entry["right"] / entry["n"]
        entry["taken_for"] = dict(entry["taken_for"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help=f"JSON Lines files (default: {SAMPLE.name})")
    parser.add_argument("--language", help="the language of every row (for files without a language field)")
    args = parser.parse_args()
    results = recognition(read_rows(args.files or [SAMPLE], args.language))
    print(f"{'language':<12} {'prompts':>7} {'right':>6} {'rate':>7}  taken for")
    for name, entry in results.items():
        wrong = ", ".join(f"{k} {v}" for k, v in entry["taken_for"].items()) or "-"
        print(f"{name:<12} {entry['n']:>7} {entry['right']:>6} {entry['rate']:>7.1%}  {wrong}")
    lowest = min(entry["rate"] for entry in results.values())
    print(
        json.dumps(
            {
                "rates": {name: round(entry["rate"], 4) for name, entry in results.items()},
                "prompts": sum(entry["n"] for entry in results.values()),
                "min_rate": round(lowest, 4),
                "target": TARGET,
                "meets_target": lowest >= TARGET,
            }
        )
    )


if __name__ == "__main__":
    main()
