"""The Gradio Blocks UI and the named API endpoints, built from the objects it is given (no globals).

Endpoints: `/generate` (JSON in the shape of app.results: Progress while it runs, then RunResult) and
`/stop` (stops the caller's running generation; the run still returns what was produced).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import gradio as gr

import languages
from app import render
from app.models import EngineHub
from app.requests import MODES, Defaults, Limits, build_checks, build_request
from app.results import Progress, RunResult
from app.runs import USER_ERRORS, InternalError, RunControl, RunRegistry, as_reported
from app.service import Pipeline
from app.serving import Service

EXAMPLES = [
    'def is_palindrome(text: str) -> bool:\n    """Return True if text reads the same forwards and backwards,\n'
    '    ignoring case and non-alphanumeric characters.\n    >>> is_palindrome("A man, a plan, a canal: Panama")\n'
    '    True\n    """\n',
    'from typing import List\n\n\ndef running_max(numbers: List[int]) -> List[int]:\n    """Return the list of running'
    ' maxima of numbers.\n    >>> running_max([1, 3, 2, 5, 4])\n    [1, 3, 3, 5, 5]\n    """\n',
    'def fizzbuzz(n: int) -> list[str]:\n    """Return the FizzBuzz strings for 1..n: "Fizz" for multiples of 3,\n'
    '    "Buzz" for multiples of 5, "FizzBuzz" for both, the number otherwise."""\n',
    "Write a Python function is_ipv4(text) that checks whether a string is a valid IPv4 address.\n"
    'It must satisfy assert is_ipv4("192.168.0.1") and not is_ipv4("256.1.1.1")\n',
    "// Return a function that calls fn only after wait milliseconds have passed without another call.\n"
    "function debounce(fn, wait) {\n",
]


EXAMPLE_LABELS = ["is_palindrome", "running_max", "fizzbuzz", "in words: IPv4", "JavaScript: debounce"]


class IntactCode(gr.Code):
    """gr.Code that shows its value as given: gr.Code strips leading whitespace, which took the indentation of a
    completion's first line (on screen and in the copy button), so pasted code did not run."""

    def postprocess(self, value: str | None) -> str | None:
        return value

    def get_block_name(self) -> str:
        return "code"  # the same Svelte component in the page


log = logging.getLogger(__name__)

QUEUE_SIZE = 8  # requests that may wait for the engine; one more is refused ("queue is full, try again")
# how often Gradio's queue looks for work while it has none, and for progress to send: its Windows values. Its
# defaults elsewhere (1 ms and 10 ms) woke the server's event loop about 1,200 times a second, idle or not (4% of a
# core at idle), and preempted the engine's two busy threads as often during a step (2 cores, AMD EPYC Zen 5); with
# these about 60 and 100 times a second, under 1% of a core at idle (docs/CPU.md; a step's time did not change
# measurably). A page's event starts up to 50 ms later and its progress is sent at most every 100 ms.
QUEUE_POLL_S = 0.05
PROGRESS_POLL_S = 0.1
ENGINE_CONCURRENCY = "engine"  # one concurrency group for every event that uses the engine


@dataclass(frozen=True)
class FormValues:
    """What one Generate asks for: the page's form and /generate's fields, by the same names."""

    prompt: str
    k: int
    budget_s: float
    temperature: float
    max_new_tokens: int
    top_p: float
    seed: int  # -1: a fresh random seed
    model: str  # a model choice's label
    suffix: str = ""  # the code after the cursor: candidates are then middles
    checks: str = ""  # the user's assert lines
    run_checks: bool = True
    mode: str = "auto"  # app.requests.MODES: recognised, code, or a request in words
    language: str = "auto"  # a languages.py name, or "auto": recognised from the prompt
    search: bool = True  # no candidate passes every check: more rounds while the budget lasts (app/search.py)


@dataclass
class Page:
    """The page's components that events read or write."""

    form: dict[str, gr.components.Component]  # one per FormValues field, by its name
    generate: gr.Button
    stop: gr.Button
    model_state: gr.HTML
    state_timer: gr.Timer
    status: gr.HTML
    notes: gr.HTML
    heatmap: gr.HTML
    stats: gr.HTML
    prompt_echo: gr.Code
    raw: gr.JSON
    slots: list[tuple]  # (group, header, code, whole code) per candidate shown

    def outputs(self) -> list:
        """What one pipeline state updates, in the order of `_ui_updates`."""
        fixed = [self.status, self.notes, self.heatmap, self.stats, self.prompt_echo, self.raw]
        return fixed + [component for slot in self.slots for component in slot]


def build_demo(service: Service, runs: RunRegistry | None = None, queue_size: int = QUEUE_SIZE) -> gr.Blocks:
    """The Blocks app: the form, Generate/Stop, live candidates, ranked results, heatmap, stats, and the API."""
    runs = runs or RunRegistry()
    run = _Runner(service, runs)
    with gr.Blocks(title="Ranked code drafts") as demo:
        page = _layout(service)
        _page_events(page, service.hub, run, runs)
        _api(service.hub, run, runs, service.defaults)
    demo.queue(max_size=queue_size, default_concurrency_limit=1)
    _calm(demo)
    return demo


def _calm(demo: gr.Blocks) -> None:
    """Gradio's queue polls at QUEUE_POLL_S and PROGRESS_POLL_S (attributes of its Queue, not options of queue())."""
    queue = getattr(demo, "_queue", None)
    if queue is None or not hasattr(queue, "sleep_when_free"):
        log.warning("Gradio's queue has no polling interval to set: it polls at its own pace")
        return
    queue.sleep_when_free = QUEUE_POLL_S
    queue.progress_update_sleep_when_free = PROGRESS_POLL_S


@dataclass
class _Runner:
    """Validates one request's FormValues and streams the pipeline's states; errors for people and programs are
    gr.Error."""

    service: Service
    runs: RunRegistry

    def stream(self, form: FormValues, session: str) -> Iterator[Progress | RunResult]:
        try:
            request = build_request(
                form.prompt,
                k=form.k,
                budget_s=form.budget_s,
                temperature=form.temperature,
                max_new_tokens=form.max_new_tokens,
                top_p=form.top_p,
                seed=form.seed,
                limits=self.service.limits,
                suffix=form.suffix,
                mode=form.mode,
                language=form.language,
            )
            checks = build_checks(form.checks, form.run_checks, request.language, form.search)
            choice = self.service.hub.choice(form.model)
        except USER_ERRORS as err:
            raise gr.Error(str(err), print_exception=False) from None
        control = self.runs.start(session, RunControl(self.service.pipeline.idle_timeout_s))
        try:
            yield from self.service.stream(choice, request, control, checks)
        except USER_ERRORS as err:
            raise gr.Error(str(err), print_exception=False) from None
        except Exception as err:  # noqa: BLE001 - ours, not the user's: logged, then said so
            reported = as_reported(err)
            title = "Internal error" if isinstance(reported, InternalError) else "Error"
            raise gr.Error(str(reported), title=title, print_exception=False) from None
        finally:
            self.runs.finish(session, control)


def _layout(service: Service) -> Page:
    """The page's components, in their places."""
    hub, pipeline, limits = service.hub, service.pipeline, service.limits
    gr.Markdown(
        "# Ranked code drafts\nk sampled completions of your prompt, checked statically, run against "
        "the examples your docstring gives (and the checks you add) in a sandbox, and ranked: checks "
        "passed first, then by how much they agree with each other."
    )
    with gr.Row():
        with gr.Column(scale=3):
            form = _code_inputs()
        with gr.Column(scale=2):
            form.update(_settings_inputs(hub, pipeline, limits, service.defaults))
            with gr.Row():
                generate_btn = gr.Button("Generate", variant="primary", elem_id="generate")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
    model_state = gr.HTML(render.model_state_html(hub.default_label, *hub.state()), elem_id="model-state")
    state_timer = gr.Timer(1.0, active=hub.state()[0] != "ready")
    status = gr.HTML(render.status_html(None), elem_id="status")
    notes = gr.HTML(render.notes_html(pipeline.notes), elem_id="notes")
    with gr.Row():
        with gr.Column(scale=3):
            gr.Markdown("## Candidates (best first)")
            slots = [_candidate_slot(index) for index in range(limits.max_k)]
        with gr.Column(scale=2):
            gr.Markdown("## Agreement")
            heatmap = gr.HTML(elem_id="heatmap")
            gr.Markdown("## Run statistics")
            stats = gr.HTML(elem_id="stats")
            with gr.Accordion("Prompt as run", open=False):
                prompt_echo = gr.Code(language="python", interactive=False, show_label=False, elem_id="prompt-echo")
            with gr.Accordion("Raw JSON (what /generate returns)", open=False):
                raw = gr.JSON(elem_id="raw-json")
    return Page(
        form, generate_btn, stop_btn, model_state, state_timer, status, notes, heatmap, stats, prompt_echo, raw, slots
    )


def _code_inputs() -> dict:
    """The prompt (code or words) and what it is, the code after the cursor and the checks, with the example prompts."""
    prompt = gr.Code(
        value=EXAMPLES[0],
        language="python",
        label="Prompt: code to complete, or a request in words",
        lines=12,
        interactive=True,
        elem_id="prompt",
    )
    with gr.Row():
        mode = gr.Radio(
            list(MODES),
            value="auto",
            label="The prompt is",
            elem_id="mode",
            info="auto: a prompt that begins with a sentence is a request in words",
        )
        language = gr.Dropdown(
            ["auto", *languages.names()],
            value="auto",
            label="Language",
            elem_id="language",
            info="auto: from the prompt (a fence, a path comment, its code)",
        )
    suffix = gr.Code(
        value="",
        language="python",
        lines=3,
        interactive=True,
        elem_id="suffix",
        label="Code after the cursor (optional: then each candidate is a middle between the "
        "prompt and this code, checked in place)",
    )
    checks = gr.Code(
        value="",
        language="python",
        lines=2,
        interactive=True,
        elem_id="checks",
        label="Checks (optional: assert lines such as assert add(2, 3) == 5, run with the examples in your docstring)",
    )
    gr.Examples(EXAMPLES, inputs=[prompt], label="Example prompts", example_labels=EXAMPLE_LABELS)
    return {"prompt": prompt, "suffix": suffix, "checks": checks, "mode": mode, "language": language}


def _settings_inputs(hub: EngineHub, pipeline: Pipeline, limits: Limits, defaults: Defaults) -> dict:
    """Model, k and budget, then the advanced settings."""
    model = gr.Dropdown(hub.labels, value=hub.default_label, label="Model", elem_id="model")
    k = gr.Slider(1, limits.max_k, value=defaults.k, step=1, precision=0, label="Candidates (k)", elem_id="k")
    budget = gr.Slider(
        limits.min_budget_s,
        limits.max_budget_s,
        value=defaults.budget_s,
        step=1,
        label="Time budget (s)",
        elem_id="budget",
    )
    with gr.Accordion("Advanced settings", open=False):
        temperature = gr.Slider(
            0, limits.max_temperature, value=defaults.temperature, step=0.05, label="Temperature (0 = greedy)"
        )
        max_new_tokens = gr.Slider(
            1,
            limits.max_new_tokens,
            value=defaults.max_new_tokens,
            step=1,
            precision=0,
            label="Max new tokens per candidate",
        )
        top_p = gr.Slider(0.05, 1.0, value=defaults.top_p, step=0.05, label="Top-p")
        seed = gr.Number(value=defaults.seed, precision=0, label="Seed (-1 = random)")
        run_checks = gr.Checkbox(
            value=pipeline.checker is not None,
            elem_id="run-checks",
            label="Run the examples and checks on every candidate (sandboxed: no "
            "network, no files of yours) and rank by them",
        )
        search = gr.Checkbox(
            value=True,
            elem_id="search",
            label="If no candidate passes every check, draw more while the budget lasts (k are shown)",
        )
    return {
        "model": model,
        "k": k,
        "budget_s": budget,
        "temperature": temperature,
        "max_new_tokens": max_new_tokens,
        "top_p": top_p,
        "seed": seed,
        "run_checks": run_checks,
        "search": search,
    }


def _candidate_slot(index: int) -> tuple:
    """One candidate's place on the page: (group, header, code, whole code), hidden until used."""
    with gr.Group(visible=False, elem_classes=["rd-slot"]) as group:
        header = gr.HTML(elem_classes=["rd-header"])
        code = IntactCode(
            language="python",
            interactive=False,
            label="completion",
            elem_classes=["rd-code"],
            elem_id=f"candidate-{index}",
        )
        with gr.Accordion("Whole code (prompt + candidate + code after the cursor), to copy", open=False):
            whole = IntactCode(
                language="python",
                interactive=False,
                show_label=False,
                elem_classes=["rd-whole"],
                elem_id=f"whole-{index}",
            )
    return group, header, code, whole


def _page_events(page: Page, hub: EngineHub, run: _Runner, runs: RunRegistry) -> None:
    """Generate, Stop, and the model's state while it loads."""
    form_names = {component: name for name, component in page.form.items()}

    def on_generate(values: dict, request: gr.Request):
        form = FormValues(**{form_names[component]: value for component, value in values.items()})
        form = replace(
            form,
            suffix=form.suffix or "",
            checks=form.checks or "",
            run_checks=bool(form.run_checks),
            search=bool(form.search),
        )
        for state in run.stream(form, _session(request)):
            yield _ui_updates(state, form.prompt, form.suffix, len(page.slots))

    page.generate.click(
        on_generate,
        inputs=set(page.form.values()),
        outputs=page.outputs(),
        api_name="generate_ui",
        api_visibility="private",
        concurrency_limit=hub.concurrency,
        concurrency_id=ENGINE_CONCURRENCY,
        show_progress="hidden",
    )

    def on_stop(request: gr.Request):
        stopped = runs.stop(_session(request))
        return '<div class="rd-status">Stopping…</div>' if stopped else gr.skip()

    page.stop.click(
        on_stop, inputs=None, outputs=[page.status], queue=False, api_name="stop_ui", api_visibility="private"
    )

    def on_model_state(label: str):
        state, detail = hub.state(label)
        return render.model_state_html(label, state, detail), gr.Timer(active=state in ("loading", "not loaded"))

    state_update = {
        "inputs": [page.form["model"]],
        "outputs": [page.model_state, page.state_timer],
        "queue": False,
        "show_progress": "hidden",
        "api_visibility": "private",
    }
    page.state_timer.tick(on_model_state, **state_update)  # the model's state, polled while it loads
    page.form["model"].change(on_model_state, **state_update)  # and at once when another model is picked


def _api(hub: EngineHub, run: _Runner, runs: RunRegistry, defaults: Defaults) -> None:
    """The named endpoints /generate and /stop (their parameters are /generate's documented fields)."""

    def generate(
        prompt: str,
        k: int = defaults.k,
        budget_s: float = defaults.budget_s,
        temperature: float = defaults.temperature,
        max_new_tokens: int = defaults.max_new_tokens,
        top_p: float = defaults.top_p,
        seed: int = defaults.seed,
        model: str = hub.default_label,
        suffix: str = "",
        checks: str = "",
        run_checks: bool = True,
        mode: str = "auto",
        language: str = "auto",
        search: bool = True,
        request: gr.Request = None,
    ) -> Iterator[dict]:
        """k ranked completions of `prompt` as JSON (middles between `prompt` and `suffix`, the code after the
        cursor, when it is given; answers with their code blocks ranked when the prompt is a request in words,
        `mode` "words", or "auto" and it begins with a sentence); `language` names the code's language ("auto":
        recognised); `checks` are assert lines run on every candidate with the prompt's own examples (sandboxed;
        `run_checks` false runs nothing; `search`: where no candidate passes every check, more are drawn while the
        budget lasts, k shown); streams partial results (status != "done") first."""
        form = FormValues(
            prompt,
            k,
            budget_s,
            temperature,
            max_new_tokens,
            top_p,
            seed,
            model,
            suffix or "",
            checks or "",
            run_checks,
            mode,
            language,
            search,
        )
        for state in run.stream(form, _session(request)):
            yield state.as_dict()

    def stop(request: gr.Request = None) -> bool:
        """Stop this client's running /generate; it then returns the ranking of what was produced."""
        return runs.stop(_session(request))

    gr.api(generate, api_name="generate", concurrency_limit=hub.concurrency, concurrency_id=ENGINE_CONCURRENCY)
    gr.api(stop, api_name="stop", queue=False)


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "anonymous"


def _ui_updates(state: Progress | RunResult, prompt_text: str, suffix_text: str, n_slots: int) -> list:
    """Component values for one pipeline state, in the order of Page.outputs."""
    done = isinstance(state, RunResult)
    values = [  # while a run goes on, the last run's notes, heatmap, statistics and JSON are cleared, not kept
        render.status_html(state),
        render.notes_html(state.notes) if done else "",
        render.heatmap_html(state.labels, state.similarity) if done else "",
        render.stats_html(state.stats()) if done else "",
        prompt_text,
        state.as_dict() if done else None,
    ]
    items = list(state.checks.items) if done else []
    highlight = state.language.record.highlight if done else None
    around = ("", "") if done and state.language.in_words else (prompt_text, suffix_text)
    # a search shows its new round (the last round's rows until the new one's first arrive)
    shown = state.candidates if done else (state.candidates[state.drawn_before :] or state.candidates[-state.k :])
    leader = None if done else state.leader
    if leader is not None:  # the best so far first, the others in their order
        shown = sorted(shown, key=lambda entry: entry.index != leader)
    for index in range(n_slots):
        if index < len(shown):
            entry = shown[index]
            values += [
                gr.Group(visible=True),
                render.candidate_header_html(entry, items, leading=leader is not None and entry.index == leader),
                gr.update(value=entry.code, language=highlight) if done else entry.code,
                gr.update(value=around[0] + entry.code + around[1], language=highlight)
                if done
                else prompt_text + entry.code + suffix_text,
            ]
        else:
            values += [gr.Group(visible=False), "", "", ""]
    return values
