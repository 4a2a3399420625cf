"""Converted model directories the engine owns (a bundled GGUF saved once in transformers' format): the marker that
says a directory is one, complete, in the current layout. A leaf importing nothing of ours, so that the loaders
(engine/models, which write it) and the weight formats (engine/quant, which keep derived files there) both read it."""

from __future__ import annotations

import json
from pathlib import Path

CONVERTED_FORMAT = 1  # bump when the layout of a converted directory changes
MARKER = "ranked_drafts.json"  # written last into a converted directory: its format, files and source


def write_marker(directory: Path, source: str) -> None:
    """Mark `directory` as converted from the GGUF file `source`, listing the files it holds now."""
    files = sorted(p.name for p in directory.iterdir())
    (directory / MARKER).write_text(json.dumps({"format": CONVERTED_FORMAT, "files": files, "source": source}))


def converted_is_valid(directory: Path) -> bool:
    """Whether `directory` holds a complete conversion in the current layout (its marker and every file it lists)."""
    marker = directory / MARKER
    if not marker.exists():
        return False
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return info.get("format") == CONVERTED_FORMAT and all((directory / f).exists() for f in info.get("files", []))


def owned_model_dir(model) -> Path | None:
    """The directory a model was loaded from when it is one of ours (a bundled model's converted copy, where the
    engine may keep derived files such as int4 grids); None for a hub id or a user's directory."""
    source = getattr(model.config, "_name_or_path", "") or ""
    directory = Path(source) if source else None
    return directory if directory is not None and converted_is_valid(directory) else None
