"""The app's pipeline without a server: input validation, run/stream with a tiny engine, stopping, the model menu."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from app import results
from app.models import DEFAULT_LABEL, FAST_LABEL, EngineHub, ModelChoice, menu
from app.requests import Defaults, Limits, build_request
from app.runs import BusyError, RunControl, RunRegistry
from app.service import Pipeline
from engine import DEFAULT_DRAFT, DEFAULT_TARGET, load_engine
from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = "def double(x):\n    return"
LIMITS = Limits(max_k=8, max_budget_s=30)


@pytest.fixture(scope="module")
def engine():
    return load_engine("tiny:0", "tiny:1")


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as analyzer:
        yield analyzer


def request(**changes):
    fields = dict(prompt=PROMPT, k=3, budget_s=2.0, temperature=0.8, max_new_tokens=8, top_p=0.95, seed=0)
    return build_request(**(fields | changes), limits=LIMITS)


def test_valid_fields_become_a_request():
    made = request(k=4.0, budget_s=3, seed=-1)  # a slider's 4.0 is 4; seed -1 means random
    assert (made.k, made.budget_s, made.seed, made.max_new_tokens) == (4, 3.0, None, 8)
    assert request(seed=7).seed == 7


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"prompt": None}, "prompt must be text"),
        ({"prompt": " \t\n"}, "prompt is empty"),
        ({"prompt": "x = '\udcff'"}, r"not valid UTF-8 text: character 5 is '\\udcff'"),
        ({"k": 0}, r"k=0 is out of range: it must be an integer in 1\.\.8"),
        ({"k": 9}, r"k=9 is out of range"),
        ({"k": True}, r"k=True is out of range"),
        ({"k": "3"}, r"k='3' is out of range"),
        ({"budget_s": 0}, r"budget_s=0 is out of range: it must be a number in 1\.\.30"),
        ({"budget_s": float("nan")}, r"budget_s=nan is out of range"),
        ({"temperature": 2.5}, r"temperature=2\.5 is out of range: it must be a number in 0\.\.2"),
        ({"top_p": 0}, r"top_p=0.0 is out of range: it must be in \(0, 1\]"),  # the engine's check and message
        ({"max_new_tokens": 5000}, r"max_new_tokens=5000 is out of range: it must be an integer in 1\.\.1024"),
        ({"seed": -2}, r"seed=-2 is out of range"),
    ],
)
def test_bad_fields_are_named_with_their_range(changes, message):
    with pytest.raises(ValueError, match=message):
        request(**changes)


def test_defaults_stay_inside_small_limits():
    clipped = Defaults(k=8, budget_s=120).clipped(Limits(max_k=4, max_budget_s=10))
    assert (clipped.k, clipped.budget_s) == (4, 10)


def test_run_ranks_and_reports(engine, analyzer):
    result = Pipeline(analyzer=analyzer).run(engine, request())
    assert result.status == "done" and result.notes == []
    ranks = [c.rank for c in result.candidates]
    assert ranks == list(range(1, len(ranks) + 1))
    assert sum(c.count for c in result.candidates) == 3
    assert all(c.parses is not None and isinstance(c.findings, list) for c in result.candidates)
    assert len(result.similarity) == len(ranks)
    shape = result.as_dict()  # the JSON of /generate
    assert {"generation_s", "analysis_s", "ranking_s", "pipeline_s", "tokens_per_s"} <= set(shape["stats"])
    assert [c["rank"] for c in shape["candidates"]] == ranks and shape["similarity"]["labels"][0] == "#1"


def test_greedy_computes_one_candidate_and_says_why(engine, analyzer):
    made = request(k=6, temperature=0)
    assert made.k == 1  # k greedy rows would be one answer computed k times
    result = Pipeline(analyzer=analyzer).run(engine, made)
    assert result.request.k == 1 and len(result.candidates) == 1
    assert result.notes == [results.GREEDY_NOTE] and "one answer" in results.GREEDY_NOTE


def test_the_heatmap_leaves_the_diagonal_empty_and_scores_name_only_used_parts(engine, analyzer):
    result = Pipeline(analyzer=analyzer).run(engine, request(k=6, max_new_tokens=4))
    matrix = result.similarity
    assert all(matrix[i][i] is None for i in range(len(matrix)))
    assert all(c.score_parts["logprob_term"] is None for c in result.candidates)  # gsc uses none


def test_equal_scores_say_how_the_tie_was_broken(engine, analyzer):
    entries = Pipeline(analyzer=analyzer).run(engine, request()).candidates[:1] * 3
    entries = [replace(entries[0], score=score, tie_break=None) for score in (0.5, 0.5, 0.2)]
    results.mark_ties(entries)
    assert entries[0].tie_break == entries[1].tie_break == results.TIE_RULE
    assert entries[2].tie_break is None


def test_without_an_analyzer_it_says_static_analysis_is_off(engine):
    result = Pipeline(analyzer=None).run(engine, request())
    assert result.notes == ["static analysis is off: no findings are shown"]
    assert result.as_dict()["static_analysis"] == {"available": False}
    assert all(c.findings == [] and c.parses is None for c in result.candidates)


def test_a_consumer_that_stops_reading_stops_the_engine():
    control = RunControl(idle_timeout_s=0.05)
    assert not control.should_stop()
    time.sleep(0.1)
    assert control.should_stop() and control.reason == "the client stopped listening"


def test_closing_the_stream_stops_the_run_and_frees_the_lock(engine):
    lock, control = threading.Lock(), RunControl()
    stream = Pipeline(update_interval_s=0.05).stream(
        request(budget_s=30, max_new_tokens=1024), lambda: engine, lock, control, {"choice": "tiny"}
    )
    for state in stream:
        if state.generated_tokens > 0:
            break
    stream.close()
    assert control.reason == "the request was cancelled"
    assert lock.acquire(timeout=5), "the engine was not freed"
    lock.release()


def test_stream_reports_busy_when_the_engine_stays_taken(engine):
    lock = threading.Lock()
    lock.acquire()
    stream = Pipeline(busy_timeout_s=0.2).stream(request(), lambda: engine, lock, RunControl(), {"choice": "tiny"})
    with pytest.raises(BusyError, match="busy.*retry"):
        list(stream)
    lock.release()


def test_registry_stops_only_the_sessions_own_run():
    runs = RunRegistry()
    mine, theirs = runs.start("a", RunControl()), runs.start("b", RunControl())
    assert runs.stop("a") and mine.stopped and not theirs.stopped
    runs.finish("a", mine)
    assert not runs.stop("a")


def test_menu_puts_the_command_line_choice_first():
    assert [c.label for c in menu()] == [DEFAULT_LABEL, FAST_LABEL]
    given = menu("org/model-7b", "org/model-0.5b")
    assert given[0] == ModelChoice(
        "command line: org/model-7b + org/model-0.5b draft", "org/model-7b", "org/model-0.5b"
    )
    assert [c.label for c in menu(DEFAULT_DRAFT)] == [FAST_LABEL, DEFAULT_LABEL]  # already offered: moved first
    assert menu(None, DEFAULT_DRAFT)[0].target == DEFAULT_TARGET


def test_hub_loads_on_first_use_and_shares_models():
    loads = []

    def counting_loader(spec, cache_dir, dtype="auto"):
        loads.append(spec)
        from engine import load_any

        return load_any(spec, cache_dir)

    hub = EngineHub([ModelChoice("pair", "tiny:0", "tiny:1"), ModelChoice("alone", "tiny:1")], loader=counting_loader)
    assert loads == [] and hub.state("pair") == ("not loaded", "")
    assert hub.engine("pair") is hub.engine(None)
    hub.engine("alone")
    assert loads == ["tiny:0", "tiny:1"]  # tiny:1 serves as draft and as target, loaded once
    with pytest.raises(ValueError, match="model='x' is not offered"):
        hub.engine("x")


def test_hub_loads_int8_weights_when_asked_and_the_command_line_offers_the_engines_formats(entry_point):
    from engine.quant.weights import Int8Linear

    assert entry_point.parse_args([]).prompt_form == "auto"
    assert entry_point.parse_args(["--weights", "int8"]).weights == "int8"
    hub = EngineHub([ModelChoice("pair", "tiny:0", "tiny:1")], weights="int8")
    engine = hub.engine("pair")
    assert isinstance(engine.model.lm_head, Int8Linear) and isinstance(engine.draft_model.lm_head, Int8Linear)
    with pytest.raises(ValueError, match="weights='int2' is unknown: choose one of auto, native, int8, int4, w8a8"):
        EngineHub([ModelChoice("pair", "tiny:0")], weights="int2")


def test_help_reads_the_engines_choices_without_importing_torch():
    """`python app.py --help` answers without torch, transformers or gradio, and lists the engine's own choices."""
    import subprocess
    import sys
    from pathlib import Path

    from engine.settings import DRAFTER_CHOICES, WEIGHT_FORMATS

    root = Path(__file__).resolve().parents[1]
    probe = (
        "import runpy, sys; sys.argv = ['app.py', '--help']\n"
        "try:\n    runpy.run_path('app.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('torch', 'transformers', 'gradio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout
    help_text = " ".join(out.stdout.split())
    assert "{" + ",".join(WEIGHT_FORMATS) + "}" in help_text and "{" + ",".join(DRAFTER_CHOICES) + "}" in help_text


def test_drafter_model_without_a_draft_falls_back_to_auto_and_keeps_the_other_settings():
    from engine import EngineSettings

    hub = EngineHub(
        [ModelChoice("pair", "tiny:0", "tiny:1"), ModelChoice("alone", "tiny:1")],
        settings=EngineSettings(drafter="model", acceptance="residual"),
    )
    assert hub.engine("pair").settings.drafter == "model"
    alone = hub.engine("alone").settings
    assert alone.drafter == "auto" and alone.acceptance == "residual"


def test_a_busy_port_is_refused_in_the_apps_words(entry_point):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=f"--port {port} on 127.0.0.1 is not available.*--port N"):
            entry_point.check_port("127.0.0.1", port)
    entry_point.check_port("127.0.0.1", None)  # no --port: Gradio picks a free one


def test_preload_prepares_the_default_in_the_background_and_says_so():
    hub = EngineHub([ModelChoice("tiny", "tiny:0"), ModelChoice("broken", "tiny:x")])
    assert hub.state() == ("not loaded", "")
    hub.preload().join(timeout=60)
    state, detail = hub.state()
    assert state == "ready" and detail == "tiny:0 in float32/native: a tiny test model: formats are not timed"
    assert (hub.formats("tiny")["tiny:0"].dtype, hub.formats("tiny")["tiny:0"].weights) == ("float32", "native")
    hub.preload("broken").join(timeout=60)
    state, detail = hub.state("broken")
    assert state == "failed" and "tiny:<seed>" in detail  # the loader's message, which names the fix


def test_an_error_names_the_apps_options_for_the_settings_it_names_and_leaves_paths_alone():
    from app.runs import as_reported
    from engine import ModelSetupError

    err = ModelSetupError(
        "not enough disk in /data/cache_dir/gguf: choose another cache directory (cache_dir, or $CACHE)",
        settings={"cache_dir": "cache_dir"},
    )
    shown = as_reported(err)
    assert isinstance(shown, ModelSetupError) and shown.__cause__ is err
    assert (
        str(shown) == "not enough disk in /data/cache_dir/gguf: choose another cache directory (--cache-dir, or $CACHE)"
    )
