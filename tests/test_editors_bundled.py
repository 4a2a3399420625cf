"""The three editors' default requests, as their sources write them, against the real app with the bundled 0.5B:
llama.vim (its ring warm-up, then its suggestion request), llama.vscode (three alternatives) and Continue (Ollama's
API through the official client). A word has been begun on the cursor line; each must get a suggestion that
finishes it (marked: prepares the bundled model on first use)."""

from __future__ import annotations

import httpx
import ollama
import pytest
from local_app import launch_local

from app.infill_api import Infill
from app.models import DEFAULT_DRAFT, FAST_LABEL, EngineHub, ModelChoice
from app.ollama_api import Ollama
from app.routes import mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from benchmarks.editor_requests import Step, llama_vim_body, llama_vscode_body, ring_warmup_body
from static_eval import AnalyzerSettings, StaticAnalyzer

pytestmark = pytest.mark.bundled

PREFIX = 'import json\n\n\ndef load_settings(path):\n    """Read the settings saved at path."""\n'
TYPED = "    with op"  # the cursor line so far
SUFFIX = (
    "\n        return json.load(handle)\n\n\ndef save_settings(path, settings):\n"
    '    with open(path, "w") as handle:\n        json.dump(settings, handle)\n'
)
RING = (
    {
        "filename": "store.py",
        "text": "import json\n\n\ndef read_json(path):\n"
        "    with open(path) as handle:\n        return json.load(handle)\n",
    },
)
STEP = Step("lines", "settings.py", 6, PREFIX, TYPED, SUFFIX, "    with open(path) as handle:", RING)


@pytest.fixture(scope="module")
def url():
    analyzer = StaticAnalyzer(AnalyzerSettings())
    hub = EngineHub([ModelChoice(FAST_LABEL, DEFAULT_DRAFT, None)])
    pipeline = Pipeline(analyzer=analyzer)
    service = Service(hub, pipeline)
    demo = build_demo(service)
    address = launch_local(demo)
    mount_protocols(demo, service, [Infill(), Ollama()])
    yield address
    demo.close()
    hub.close()
    analyzer.close()


def finishes_the_word(first_line: str) -> bool:
    """The suggestion's first line, after what was typed, opens the file: `with open(...)`."""
    return (TYPED + first_line).strip().startswith("with open(")


def test_llama_vim_reads_its_ring_once_and_gets_the_line_finished(url):
    warm = httpx.post(url + "infill", json=ring_warmup_body(RING), timeout=300)
    assert warm.status_code == 200
    ring_tokens = warm.json()["timings/prompt_n"] + warm.json()["timings/cache_n"]
    reply = httpx.post(url + "infill", json=llama_vim_body(STEP), timeout=120)
    assert reply.status_code == 200
    answer = reply.json()
    assert isinstance(answer, dict)  # no n_cmpl: one object, as llama.cpp answers
    assert finishes_the_word(answer["content"].split("\n")[0]), answer["content"]
    assert answer["timings/cache_n"] >= ring_tokens - 3  # the ring came from the cache (not the warm-up's 3 markers)


def test_llama_vscode_gets_three_alternatives_the_first_finishing_the_word(url):
    reply = httpx.post(url + "infill", json=llama_vscode_body(STEP), timeout=120)
    assert reply.status_code == 200
    answers = reply.json()
    assert isinstance(answers, list) and len(answers) == 3
    ranks = [a["ranked_drafts"]["rank"] for a in answers]  # identical middles are copies side by side, one rank
    assert ranks[0] == 1 and ranks == sorted(ranks) and len(set(a["content"] for a in answers)) == ranks[-1]
    assert finishes_the_word(answers[0]["content"].split("\n")[0]), answers[0]["content"]


def test_continue_through_ollamas_api_gets_the_line_finished(url):
    """Continue's autocomplete request (core/llm/llms/Ollama.ts): raw, prefix and suffix, its options, streamed."""
    parts = ollama.Client(host=url.rstrip("/")).generate(
        model="qwen2.5-coder:1.5b",
        prompt=PREFIX + TYPED,
        suffix=SUFFIX,
        raw=True,
        stream=True,
        keep_alive=1800,
        options={"temperature": 0.01, "num_predict": 4096, "num_ctx": 8096, "stop": ["<|endoftext|>", "\n\n\n"]},
    )
    text = "".join(part.response for part in parts)
    assert finishes_the_word(text.split("\n")[0]), text
