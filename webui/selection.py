"""The sidebar every page shares and the selection it makes: model (registry, own config.json,
Hub id), GPU, parallelism, formats; and the "does it fit?" checks that come before any speed."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import streamlit as st

from kvcalc import KV_DTYPES, WEIGHT_DTYPES, registry, spec_from_config
from kvcalc.cache.deployment import CacheFormat, Deployment
from kvcalc.cache.weight_bytes import Weights, weights_given, weights_in
from kvcalc.config.catalog import GPU
from kvcalc.config.hfconfig import UNMODELLED, UnknownFields, checkpoint_format, parse_config_text
from kvcalc.core.model import ModelSpec
from kvcalc.core.units import GiB
from kvcalc.engines.vllm import DEFAULT_BLOCK_SIZE
from kvcalc.perf.calibration import (
    BW_SHARE,
    STEP_OVERHEAD_S,
    StepModel,
    error_band_text,
    step_model,
)

from . import hub
from .hosted import MAX_PASTE_CHARS, hosted, plain, verify_caps
from .memo import memo
from .prose import prose
from .render import live_missing, show_error, stop, stop_on_error
from .urlstate import bound, number, select, slider
from .visitor import visitor_id

T = prose("sidebar")
CUSTOM = "my-config"  # "my own config.json" (upload or paste)
HUB = "hub"  # a Hugging Face Hub model id
CUSTOM_GPU = "custom"
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_GPU = "h100-sxm-80gb"
TP_CHOICES = [1, 2, 4, 8, 16, 32]
PP_CHOICES = [1, 2, 4, 8]


@dataclass(frozen=True)
class Selection:
    """The sidebar's choice: a Deployment (kvcalc.cache.deployment) plus how to name it, and the
    speed model the Engineer pages estimate with."""

    label: str
    source: str  # where the model came from, for captions
    deployment: Deployment
    # What a real engine adds (kvcalc.perf.calibration): the share of the peak bandwidth a decode
    # step achieves and a fixed cost per engine step; the sidebar's defaults are the fit's.
    bw_share: float = BW_SHARE
    step_overhead_s: float = STEP_OVERHEAD_S
    # An engine profile (kvcalc.perf.engines, "vllm@0.18.0"); None: the pooled estimate
    engine: str | None = None
    # that profile calibrated from the user's own benchmark (webui.own_benchmark); None: as fitted
    calibrated: Any = None

    @property
    def profile(self):
        """The chosen engine profile (calibrated from the user's benchmark where they gave
        one), or None for the pooled estimate."""
        if not self.engine:
            return None
        from kvcalc.perf.engines import PROFILES

        return self.calibrated or PROFILES[self.engine]

    @property
    def spec(self) -> ModelSpec:
        return self.deployment.spec

    @property
    def weights(self) -> Weights:
        assert self.deployment.weights is not None  # the sidebar always sets them
        return self.deployment.weights

    @property
    def gpu(self) -> GPU:
        assert self.deployment.gpu is not None  # the sidebar always sets one
        return self.deployment.gpu

    @property
    def kv_dtype(self) -> str:
        return self.deployment.cache.kv_dtype

    @property
    def tp(self) -> int:
        return self.deployment.tp

    @property
    def pp(self) -> int:
        return self.deployment.pp

    @property
    def bandwidth_gbs(self) -> float:
        """The ideal bound's bandwidth, the GPU's peak (a real engine's share is in ``speed``)."""
        return self.gpu.bandwidth_gbs

    @property
    def speed(self) -> StepModel:
        """The real-engine estimate: the calibrated one, or the user's own share and overhead
        ("your step model"), or the chosen engine profile's."""
        if self.engine:
            return self.profile.step_model()
        return step_model(bw_share=self.bw_share, step_overhead_s=self.step_overhead_s)

    @property
    def num_gpus(self) -> int:
        return self.deployment.num_gpus


def sidebar(uses_selection: bool = True, engine_controls: bool = False) -> None:
    """The controls every page shares, in the sidebar, each bound to the URL. On a page that
    runs its own model (``uses_selection=False``) they stay, so the choice is kept for the next
    page, under a line that says this page does not use them."""
    reg = registry()
    with st.sidebar:
        st.markdown("### Model and hardware")
        if not uses_selection:
            st.info(
                "This page runs its own model and ignores the choices below; they apply "
                "to the other pages.",
                icon=":material/info:",
            )
        # The default model first: a selectbox whose default is not its first option warns
        # when a link's old registry key sets it (upgrade_link).
        options = [DEFAULT_MODEL, *(k for k in reg.models if k != DEFAULT_MODEL), CUSTOM, HUB]
        key = select(
            st.selectbox,
            "Model",
            options,
            "model",
            _model_label,
            help="From the registry (models.yaml), your own config.json, or a Hugging Face Hub id.",
        )
        if key == CUSTOM:
            _custom_config_inputs()
        elif key == HUB:
            _hub_inputs()
        else:
            m = reg.models[key]
            st.caption(f"[{m.hf_id}]({m.sources['config']})")
        _model_summary(key)
        gpus = [DEFAULT_GPU, *(k for k in reg.gpus if k != DEFAULT_GPU), CUSTOM_GPU]
        gpu = select(st.selectbox, "GPU", gpus, "gpu", _gpu_label)
        if gpu == CUSTOM_GPU:
            base = reg.gpus[DEFAULT_GPU]  # the defaults start from the default GPU's figures
            if base.bf16_tflops is None:
                raise ValueError(
                    f"models.yaml: the default GPU '{DEFAULT_GPU}' needs its "
                    "bf16_tflops (the custom GPU starts from it)"
                )
            for label, top, value, step, k in (
                ("GPU memory (GiB)", 4096.0, 80.0, 1.0, "gpu_gib"),
                ("Memory bandwidth (GB/s)", 100_000.0, base.bandwidth_gbs, 50.0, "gpu_gbs"),
                ("Dense 16-bit TFLOPS", 100_000.0, base.bf16_tflops, 10.0, "gpu_tflops"),
            ):
                number(st, label, 1.0, top, float(value), step, k)
        else:
            g = reg.gpus[gpu]
            st.caption(
                f"{g.memory_gb:g} GB sold, {g.memory_bytes / GiB:,.2f} GiB as the driver "
                f"reports it · {g.bandwidth_gbs:,.0f} GB/s"
            )
        for col, label, choices, k, says in zip(
            st.columns(2),
            ("Tensor parallel", "Pipeline parallel"),
            (TP_CHOICES, PP_CHOICES),
            ("tp", "pp"),
            ("GPUs that split each layer's heads", "GPUs that split the layers"),
            strict=False,
        ):
            select(col.selectbox, label, choices, k, help=says)
        c1, c2 = st.columns(2)
        select(
            c1.selectbox,
            "Weights",
            ["auto", *WEIGHT_DTYPES],
            "wdtype",
            help="auto: the checkpoint as vLLM loads it (its own format, except an FP32 "
            "checkpoint, which vLLM serves in 16 bits)",
        )
        select(c2.selectbox, "KV cache", list(KV_DTYPES), "kvdtype", index=KV_DTYPES.index("bf16"))
        if gpu != CUSTOM_GPU and not reg.gpus[gpu].has_bf16:
            st.caption(
                f"{reg.gpus[gpu].name} has no BF16: vLLM computes in FP16 on it, so a "
                "BF16 cache or checkpoint is held in FP16 here (the same bytes)."
            )
        if engine_controls:
            _engine_inputs()
        else:
            _keep_engine_inputs()
        from webui import glossary

        # Built only when opened (issue 42): forty terms of Markdown on every page's every rerun
        # and first render otherwise, for a fold most visits never open.
        fold = st.expander(
            "Glossary: MHA, GQA, MLA, TP, FP8 ...",
            icon=":material/menu_book:",
            key=GLOSSARY_KEY,
            on_change="rerun",
        )
        with fold:
            if fold.open:
                st.markdown(glossary.markdown(learn=not engine_controls))


GLOSSARY_KEY = "glossary_open"  # the sidebar's glossary fold, open or not


# The engine-aware estimate's two inputs, drawn on the Engineer pages only: the Learn pages
# teach the chapter's formula alone (docs/design.md principle 7).
ENGINE_KEYS = ("bw_share", "step_ms", "engine_profile")
POOLED = "pooled calibrated estimate"


def _keep_engine_inputs() -> None:
    """On a page that does not draw them, keep the engine inputs a user set for the next
    Engineer page: Streamlit drops a widget's value after a run that does not draw it, so the
    first such run copies it aside, and it is the widget's default when drawn again."""
    for k in ENGINE_KEYS:
        if k in st.session_state:
            st.session_state[f"_kept_{k}"] = st.session_state[k]


def _kept(key: str, fitted: float) -> float:
    return float(st.session_state.get(f"_kept_{key}", fitted))


def _engine_label(key: str) -> str:
    from kvcalc.perf.engines import PROFILES

    return key if key == POOLED else f"{PROFILES[key].label} profile"


def _engine_inputs() -> None:
    from kvcalc.perf.engines import PROFILES, engine_band_text

    st.markdown("**A real engine** (the calibrated estimate)")
    options = [POOLED] + sorted(PROFILES)
    kept = st.session_state.get("_kept_engine_profile", POOLED)
    select(
        st.selectbox,
        "Engine and version",
        options,
        "engine_profile",
        fmt=_engine_label,
        index=options.index(kept) if kept in options else 0,
        help=T("profile_help"),
    )
    # Under a profile its own coefficients time every step: the pooled estimate's two inputs
    # would change nothing, so they are drawn greyed out (their values kept, in the link too)
    profile = PROFILES.get(st.session_state.get("engine_profile", POOLED))
    off = dict(disabled=profile is not None)
    slider(
        st,
        "Achieved share of peak bandwidth",
        0.3,
        1.0,
        _kept("bw_share", BW_SHARE),
        0.001,
        "bw_share",
        format="%.3f",
        help=T("share_help", BW_SHARE=BW_SHARE),
        **off,
    )
    number(
        st,
        "Fixed cost per engine step (ms)",
        0.0,
        50.0,
        _kept("step_ms", round(STEP_OVERHEAD_S * 1e3, 3)),
        0.5,
        "step_ms",
        help="Kernel launches, sampling and scheduling: what a measured step "
        f"takes beyond its bytes. Fitted: {STEP_OVERHEAD_S * 1e3:g} ms.",
        **off,
    )
    if profile is not None:
        band = engine_band_text(profile)
        st.caption(T("profile_defaults", rows=profile.fitted_rows, band=band))
    else:
        st.caption(T("defaults", band=error_band_text("tpot_itl")))


def _model_label(key: str) -> str:
    """The name people read ("Llama 3.1 8B"), which is also what the link carries."""
    m = registry().models.get(key)
    return {CUSTOM: "my own config.json", HUB: "a Hugging Face Hub id"}.get(
        key, m.name if m else key
    )


def _gpu_label(key: str) -> str:
    g = registry().gpus.get(key)
    return "custom GPU" if key == CUSTOM_GPU else g.name if g else key


def upgrade_link() -> None:
    """Links made before the sidebar showed names carry registry keys (``model=llama-2-7b``,
    ``gpu=h200-141gb``): on a session's first run, before any widget reads the link, such a
    value becomes the name the selectbox now writes, so an old link opens the same view and
    the link check does not call it ignored. Call it right after ``url_guard_begin``."""
    initial = st.session_state.get("_url_initial")
    if initial is None or st.session_state.get("_url_upgraded"):
        return
    st.session_state["_url_upgraded"] = True
    reg = registry()
    for key, table in (("model", reg.models), ("gpu", reg.gpus)):
        values = initial.get(key)
        if values and len(values) == 1 and values[0] in table:
            # Through the session state: Streamlit seeds a bound widget from the opening link.
            st.session_state[key] = values[0]
            initial[key] = [table[values[0]].name]


def _custom_config_inputs() -> None:
    up = st.file_uploader("Upload config.json", type=["json"], key="cfg_upload")
    if up is not None:
        # An upload obeys the paste's cap: it lands in the same text box.
        if up.size > MAX_PASTE_CHARS:
            show_error(
                f"The uploaded file is {up.size:,} bytes; a config.json here is at most "
                f"{MAX_PASTE_CHARS:,}. Upload the model's config.json itself."
            )
        else:
            st.session_state["cfg_text"] = up.getvalue().decode("utf-8", "replace")
    st.text_area(
        "...or paste config.json",
        key="cfg_text",
        height=140,
        max_chars=MAX_PASTE_CHARS,
        placeholder='{"hidden_size": 4096, "num_hidden_layers": 32, ...}',
    )
    st.caption(
        "A pasted or uploaded config stays in this browser session; it is not part of a "
        "shared link."
    )


def _hub_inputs() -> None:
    st.text_input(
        "Hub model id", placeholder="Qwen/Qwen2.5-0.5B-Instruct", **bound("hub_id", "str")
    )
    if st.button("Fetch config.json", key="hub_fetch"):
        repo = st.session_state.get("hub_id", "")
        try:
            st.session_state["hub_config"] = (repo, hub.fetch_config(repo, visitor_id()))
        except ValueError as exc:
            st.session_state["hub_config"] = None
            st.session_state["hub_error"] = str(exc)
        else:
            st.session_state["hub_error"] = None
    if st.session_state.get("hub_error"):
        show_error(st.session_state["hub_error"])


class ConfigRejected(ValueError):
    """A config.json that was given but cannot be used: the page keeps the last good model.
    ``unknown`` is set when the reason is fields kvcalc does not understand (the user may then
    ask for the unverified estimate)."""

    def __init__(self, message: str, unknown: bool = False):
        super().__init__(message)
        self.unknown = unknown


@st.cache_data(max_entries=32, show_spinner=False)
def _spec_from_text(
    text: str, name: str, unverified: bool = False
) -> tuple[ModelSpec, tuple[str, str | None], dict]:
    """(spec, checkpoint format, parsed config) of a pasted, uploaded or fetched config.json,
    computed once per text."""
    try:
        cfg = parse_config_text(text, source="your config.json")
        spec = spec_from_config(cfg, name=name, unverified=unverified)
        return spec, checkpoint_format(cfg), cfg
    except UnknownFields as exc:
        raise ConfigRejected(str(exc), unknown=True) from None
    except ValueError as exc:
        raise ConfigRejected(str(exc)) from None


def _unverified_asked() -> bool:
    return bool(st.session_state.get("cfg_unverified", False))


def _config_text() -> str | None:
    """The text of the config the sidebar points at (custom or Hub), or None."""
    key = st.session_state.get("model") or DEFAULT_MODEL
    if key == CUSTOM:
        return (st.session_state.get("cfg_text") or "").strip() or None
    if key == HUB:
        got = st.session_state.get("hub_config")
        if got and got[0] == st.session_state.get("hub_id", ""):
            return json.dumps(got[1])
    return None


def _model_from_selection() -> tuple[ModelSpec, str, tuple[str, str | None], str]:
    key = st.session_state.get("model") or DEFAULT_MODEL
    if key == CUSTOM:
        text = _config_text()
        if not text:
            raise ValueError("Upload or paste a config.json in the sidebar to use your own model.")
        spec, fmt, _ = _spec_from_text(text, "my config", _unverified_asked())
        return spec, "my config.json", fmt, "your config.json"
    if key == HUB:
        text = _config_text()
        repo = st.session_state.get("hub_id", "")
        if not text:
            raise ValueError("Type a Hub model id in the sidebar and press 'Fetch config.json'.")
        spec, fmt, _ = _spec_from_text(text, repo, _unverified_asked())
        return spec, repo, fmt, f"config.json of {repo} from the Hugging Face Hub"
    m = registry().model(key)
    return m.spec, m.name, (m.weight_dtype, m.expert_weight_dtype), f"models.yaml ({m.hf_id})"


def _model_summary(key: str) -> None:
    """Under the model choice: its layers, what kvcalc assumed, weights it cannot count, and (for a
    config of the user's) a check against transformers."""
    try:
        spec = _model_from_selection()[0]
    except ValueError as exc:
        if isinstance(exc, ConfigRejected):
            show_error(exc)
            if exc.unknown:
                st.checkbox(
                    "Read it anyway as a standard decoder (an unverified estimate)",
                    key="cfg_unverified",
                    help="The fields named above are left out of the reading; every "
                    "figure is then labelled unverified.",
                )
        return
    if spec.unverified:
        st.checkbox(
            "Read it anyway as a standard decoder (an unverified estimate)", key="cfg_unverified"
        )
    counts = Counter(layer.label for layer in spec.layers)
    st.caption(
        f"{spec.num_layers} layers: " + ", ".join(f"{n} {plain(k)}" for k, n in counts.items())
    )
    fmt = _model_from_selection()[2][0]
    if spec.params is None or fmt == UNMODELLED:
        number(
            st,
            "Weights of the whole model (GiB)",
            0.0,
            100_000.0,
            16.0,
            1.0,
            "wgib",
            help=(
                "kvcalc cannot count this model's parameters (see below)"
                if spec.params is None
                else "the checkpoint is quantised in a format whose bytes kvcalc does not "
                "derive: give the size of its weight files, or choose a weight format"
            )
            + "; the cache figures do not need them, the memory budget does.",
        )
    said = list(spec.notes) + list(spec.assumptions)
    if said:
        with st.expander("What kvcalc read and assumed"):
            for line in said:
                st.markdown(f"- {plain(line)}")
    text = _config_text() if key in (CUSTOM, HUB) else None
    if text and live_missing() is None:
        # Run by itself locally when no reader of this family read it; hosted, only on a press
        # (issue 22 B5). In a bounded child process, through the device queue, once per text.
        auto = (spec.unverified or not spec.family_reader) and not hosted()
        if auto or st.button("Check against transformers", key="verify_btn", help=T("verify_help")):
            try:
                st.session_state["_verified"] = (text, _verify_text(text))
            except ValueError as exc:  # the queue is full, or this visitor's share is used
                show_error(exc)
        done = st.session_state.get("_verified")
        if done and done[0] == text:
            st.caption("Checked against transformers' own cache (meta device):")
            (st.success if done[1][0] else st.warning)(plain(done[1][1]))


@st.cache_data(max_entries=16, show_spinner="Building the model on the meta device...")
def _verify_text(text: str) -> tuple[bool, str]:
    """(agrees, one line) for a config text; the line names what differs or why it cannot be
    checked."""
    from kvcalc.measure.verify import precheck, verify_bounded

    from .device_queue import run_here

    try:
        cfg = parse_config_text(text)
    except ValueError as exc:
        return False, str(exc)
    why = precheck(cfg)  # refused by name in milliseconds: no place in the queue needed
    if why:
        return False, why
    caps = verify_caps()
    r = run_here(
        lambda should_stop: verify_bounded(
            cfg, timeout_s=caps["timeout_s"], memory_gib=caps["memory_gib"], should_stop=should_stop
        )
    )
    return bool(r.agrees), r.line


def _gpu_from_selection() -> GPU:
    key = st.session_state.get("gpu") or DEFAULT_GPU
    if key != CUSTOM_GPU:
        return registry().gpu(key)
    base = registry().gpu(DEFAULT_GPU)
    gib = float(st.session_state.get("gpu_gib", 80.0))
    return GPU(
        key=CUSTOM_GPU,
        name=f"custom GPU ({gib:g} GiB)",
        memory_gb=gib * GiB / 1e9,
        memory_mib_driver=round(gib * 1024),
        bandwidth_gbs=float(st.session_state.get("gpu_gbs", base.bandwidth_gbs)),
        bf16_tflops=float(st.session_state.get("gpu_tflops", base.bf16_tflops)),
        fp8_tflops=None,
        fp16_tflops=None,
    )


def selection() -> Selection:
    """The model, GPU and formats chosen in the sidebar (ValueError with a message to act on); a
    config the user gave that cannot be used keeps the last good model, with the reason shown."""
    try:
        spec, label, (wd, ed), source = _model_from_selection()
        st.session_state["_last_good_model"] = (spec, label, (wd, ed), source)
    except ConfigRejected as exc:
        last = st.session_state.get("_last_good_model")
        if last is None:
            raise
        show_error(f"{exc}. Still showing {last[1]} until the config is fixed.")
        spec, label, (wd, ed), source = last
    if spec.unverified:
        st.warning(
            f"Unverified estimate: {label}'s config has fields kvcalc does not "
            f"understand ({plain(', '.join(spec.unverified[:6]))}"
            f"{' ...' if len(spec.unverified) > 6 else ''}); it was read as a standard "
            "decoder without them, so every figure on this page may be wrong.",
            icon=":material/warning:",
        )
    choice = st.session_state.get("wdtype", "auto")
    gpu = _gpu_from_selection()
    kv = st.session_state.get("kvdtype", "bf16")
    if kv == "bf16" and not gpu.has_bf16:
        kv = "fp16"  # vLLM's cache takes the model's 16-bit format, FP16 without BF16
    if spec.params is None or (wd == UNMODELLED and choice == "auto"):
        gib = float(st.session_state.get("wgib", 16.0))
        w = weights_given(round(gib * GiB), "bf16" if choice == "auto" else choice)
        source += f"; weights {gib:g} GiB as given (" + (
            "parameters not counted)" if spec.params is None else "a quantised checkpoint)"
        )
    else:
        w = weights_in(spec, choice, wd, ed, half=gpu.half)
    deployment = Deployment(
        spec=spec,
        weights=w,
        gpu=gpu,
        tp=st.session_state.get("tp", 1),
        pp=st.session_state.get("pp", 1),
        cache=CacheFormat(kv_dtype=kv),
    )
    return Selection(
        label=label,
        source=source,
        deployment=deployment,
        bw_share=float(st.session_state.get("bw_share", BW_SHARE)),
        engine=_engine_choice(),
        step_overhead_s=float(st.session_state.get("step_ms", STEP_OVERHEAD_S * 1e3)) / 1e3,
    )


def _engine_choice() -> str | None:
    """The sidebar's engine profile, where an Engineer page draws its widget (None elsewhere:
    the Learn pages show the ideal bound alone)."""
    from kvcalc.perf.engines import PROFILES

    v = st.session_state.get("engine_profile")
    return v if v in PROFILES else None


def require_selection() -> Selection:
    """The selection, or a clear message on the page and a stop."""
    try:
        return selection()
    except ValueError as exc:
        stop_on_error(exc)


def require_fit(
    sel: Selection, util: float | None = None, reserve_bytes: int | None = None
) -> None:
    """No speed for a setup that does not fit: when one GPU's share of the weights and the
    reserve exceed what the engine may use, say what does not fit and how to fix it, and stop
    the page before any step time or tokens/s is shown."""
    from kvcalc import budget
    from kvcalc.core.units import fmt_gib

    try:
        dep = pool_deployment(sel, util, reserve_bytes)
        b = budget(dep, 1, convention="ideal", find_max_context=False)
    except ValueError as exc:  # a TP that does not fit the KV heads, a PP above the layers
        stop_on_error(exc)
    if b.kv_pool_bytes > 0:
        return
    st.error(
        f"{plain(sel.label)} does not fit on {plain(sel.gpu.name)}: its weights take "
        f"{fmt_gib(b.weights_bytes)} per GPU and the runtime reserve "
        f"{fmt_gib(b.reserve_bytes)}, more than the {fmt_gib(b.requested_bytes)} an engine "
        f"may use (over by {fmt_gib(-b.kv_pool_bytes)}), so it cannot run and no speed is "
        "shown. Split it over more GPUs (tensor or pipeline parallel), pick a smaller weight "
        "format, or a larger GPU."
    )
    stop()


def pool_deployment(
    sel: Selection,
    util: float | None = None,
    reserve_bytes: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Deployment:
    """The selection's deployment for "does it fit": vLLM's arithmetic on the selected GPU(s),
    at the lab's one default (kvcalc.engines.budget.DEFAULT_GPU_MEM_UTIL, vLLM's own, and the
    2 GiB reserve), unless a page has its own inputs. The captions say so (pool_defaults_text)."""
    from kvcalc import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES

    return sel.deployment.but(
        gpu_memory_utilization=DEFAULT_GPU_MEM_UTIL if util is None else util,
        reserve_bytes=DEFAULT_RESERVE_BYTES if reserve_bytes is None else reserve_bytes,
        block_size=block_size,
    )


def estimate_step(sel: Selection, ideal):
    """A real engine's decode step (kvcalc.perf.calibration.estimate_step) from the ideal bound
    ``ideal`` (``step_time`` at the full peak, with its peaks), under the sidebar's step model."""
    from kvcalc.perf.calibration import estimate_step as _estimate

    return _estimate(
        sel.spec,
        ideal,
        sel.speed,
        tp=sel.tp,
        link_gbs=sel.gpu.tp_link_gbs,
        weight_dtype=sel.weights.dtype,
    )


def real_steps(sel: Selection, points, speed: StepModel | None = None, **step_kw) -> tuple:
    """A real engine's decode step (``estimate_step``) at each (context, batch) of ``points``,
    from the ideal bound's step there (``kvcalc.step_time`` of the selection's deployment with
    ``step_kw``), under ``speed`` (the sidebar's step model when None): a chart's curve."""
    return _real_steps(sel.deployment, speed or sel.speed, tuple(points), **step_kw)


@memo(64)
def _real_steps(dep, speed, points, **step_kw) -> tuple:
    from kvcalc import step_time
    from kvcalc.perf.calibration import estimate_step as _estimate

    return tuple(
        _estimate(
            dep.spec,
            step_time(dep, context=c, batch=b, find_crossover=False, **step_kw),
            speed,
            tp=dep.tp,
            link_gbs=dep.gpu.tp_link_gbs,
            weight_dtype=dep.weights.dtype if dep.weights is not None else None,
        )
        for c, b in points
    )


def speed_caption(sel: Selection, speed=None, bands=("tpot_itl",)) -> str:
    """One sentence: which real-engine estimate the page shows (``speed``, the sidebar's when
    None), and its measured error for the quantities the figure states (``bands``: metric
    classes of kvcalc.perf.calibration.ERROR_BAND)."""
    from kvcalc.perf.calibration import error_band_text

    speed = speed or sel.speed
    all_reduces = f", two all-reduces a layer across the {sel.tp} GPUs" if sel.tp > 1 else ""
    if speed.engine:
        from kvcalc.perf.engines import PROFILES, engine_band_text

        p = sel.profile if sel.engine == speed.engine else PROFILES[speed.engine]
        if p is not PROFILES[speed.engine]:
            factor = (
                f"; the GPU's time x {p.gpu_time_factor:.3g}, as your benchmark measured it"
                if p.gpu_time_factor != 1.0
                else ""
            )
            return (
                f"The {p.label} profile calibrated on your own benchmark: "
                f"{_read_shares(p, sel.spec, sel.weights.dtype)}, {_fixed_costs(p)}"
                f"{all_reduces}{factor}. Its error on runs it was not fitted on: as the fitted "
                f"profile's at best ({engine_band_text(PROFILES[speed.engine])})."
            )
        return (
            f"The {p.label} profile (fitted on {p.fitted_rows} measured runs of that engine): "
            f"{_read_shares(p, sel.spec, sel.weights.dtype)}, {_fixed_costs(p)}"
            f"{all_reduces}. Its error: {engine_band_text(p)}."
        )
    adds = (
        f"{speed.bw_share:g} of the peak bandwidth, MFU {speed.mfu:g}, "
        f"{speed.step_overhead_s * 1e3:g} ms a step{all_reduces}"
    )
    if speed.is_calibrated:
        return (
            f"The calibrated estimate adds what real engines add in published benchmarks: "
            f"{adds}. Its error: {error_band_text(tuple(bands))}."
        )
    return (
        f"Your step model: {adds}, as entered; the measured error band belongs to the "
        "calibrated defaults."
    )


def _read_shares(p, spec: ModelSpec, weight_dtype: str | None = None) -> str:
    """An engine profile's shares of the peak bandwidth and of the GEMM peak in words: the
    weights', the routed experts' (a MoE model's, at their own shares) and the cache's; FP8
    weights' GEMMs at their part of the MFU."""
    experts = f", the routed experts at {p.expert_bw_share:.0%}" if spec.moe else ""
    gemms = f" (the routed experts' at {p.expert_mfu:.0%})" if spec.moe else ""
    if weight_dtype == "fp8" and p.fp8_gemm_share != 1.0:
        gemms += f", FP8 GEMMs at {p.fp8_gemm_share:.0%} of that"
    return (
        f"weights read at {p.bw_share:.0%}{experts} and the cache at {p.kv_bw_share:.0%} of the "
        f"peak bandwidth, GEMMs at {p.mfu:.0%} of the peak (MFU){gemms}"
    )


def _fixed_costs(p) -> str:
    """An engine profile's fixed costs in words: a step's, a layer's, a request's."""
    return (
        f"{p.step_overhead_s * 1e3:.3g} ms a step, {p.layer_overhead_s * 1e6:.3g} µs a layer "
        f"and {p.seq_overhead_s * 1e6:.3g} µs of host time a request in it "
        f"({p.host_overlap:.0%} of that hidden behind the GPU's work)"
    )


def embedding_note(sel: Selection) -> str:
    """What the weight read leaves out: an untied input embedding is gathered, not read."""
    from kvcalc.core.units import fmt_gib

    w = sel.weights
    every = T("moe_reads") if sel.spec.moe else "Every weight is read once per step"
    if not w.input_embedding_bytes:
        return f"{every} (a tied embedding is read whole, as the output head)."
    return (
        f"{every}, except the untied input embedding ({fmt_gib(w.input_embedding_bytes)}): a "
        "lookup gathers only one row per token."
    )
