"""/generate with the bundled 0.5B through the real client (marked: prepares the bundled model on first use)."""
from __future__ import annotations

import pytest
from gradio_client import Client

from app.local import launch_local
from app.models import FAST_LABEL, EngineHub, menu
from app.service import Pipeline
from app.ui import build_demo
from static_eval import AnalyzerSettings, StaticAnalyzer

pytestmark = pytest.mark.bundled

PROMPT = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b."""\n'


@pytest.fixture(scope="module")
def client():
    analyzer = StaticAnalyzer(AnalyzerSettings())
    demo = build_demo(EngineHub(menu()), Pipeline(analyzer=analyzer))
    yield Client(launch_local(demo), verbose=False)
    demo.close()
    analyzer.close()


def test_bundled_fast_model_completes_a_function(client):
    result = client.predict(prompt=PROMPT, k=2, budget_s=90, temperature=0.0, max_new_tokens=48, seed=0,
                            model=FAST_LABEL, api_name="/generate")
    assert result["status"] == "done" and result["model"]["target"] == "bundled:qwen2.5-coder-0.5b"
    best = result["candidates"][0]
    assert len(result["candidates"]) == 1 and best["count"] == 1  # greedy: one answer, computed once
    assert result["request"]["k"] == 1 and any("greedy" in note for note in result["notes"])
    assert best["finish_reason"] == "stop" and best["parses"] is True
    assert "return" in best["code"] and "a + b" in best["code"].replace("b + a", "a + b")
    assert result["stats"]["load_s"] >= 0 and result["stats"]["tokens_per_s"] > 0
