"""The Streamlit app under AppTest: every page renders, inputs change outputs, the numbers shown
are kvcalc's for the same inputs, and bad input gives a message, never an exception."""

import json
import re

import pytest

pytest.importorskip("streamlit")
from conftest import ROOT, llama_config, metric, open_page, tables  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from kvcalc import budget, get_gpu, get_model, kv_cache, step_time  # noqa: E402
from kvcalc.cache.deployment import Deployment  # noqa: E402
from kvcalc.core.units import GiB, fmt_bytes, fmt_gib, fmt_seconds  # noqa: E402
from webui.pages import path  # noqa: E402

APP = str(ROOT / "app.py")


def on(gpu_key: str = "h100-sxm-80gb", model: str = "llama-3.1-8b") -> Deployment:
    """The sidebar's default deployment: a catalog model in its own weights on one GPU."""
    m = get_model(model)
    return Deployment(spec=m.spec, gpu=get_gpu(gpu_key), weights=m.weights())


def text(element) -> str:
    """An element's text as the user reads it (markdown escapes removed)."""
    return re.sub(r"\\(.)", r"\1", element.value)


# The pages each test opens, by their names in the app's one registry (webui/pages.py).
PAGES = [path(n) for n in ("home", "budget", "step_time", "techniques", "vllm_startup", "lab")]


def figure(at, key: str) -> dict:
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if chart.proto.id and key in chart.proto.id:
            return spec
    raise AssertionError(f"no chart {key}")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_defaults(page):
    at = open_page(page)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [text(e) for e in at.error][:1]  # the defaults fit: no error anywhere


def test_home_numbers_are_kvcalc_numbers():
    at = open_page(path("home"))
    spec = get_model("llama-3.1-8b").spec
    r = kv_cache(spec, 8192)
    assert (
        metric(at, "KV cache per token") == fmt_bytes(r.kv_bytes_per_token_nominal) == "128.00 KiB"
    )
    assert metric(at, "One 8,192-token") == "1.00 GiB"


def test_budget_page_matches_kvcalc_and_reacts_to_inputs():
    at = open_page(path("budget"))
    expect = budget(on().but(reserve_bytes=2 * GiB), 8192, 16)
    assert metric(at, "Blocks") == f"{expect.num_blocks:,}"
    assert metric(at, "vLLM logs at 8,192") == f"{expect.max_concurrency:,.2f}x"
    assert metric(at, "Capacity") == f"{expect.kv_capacity_tokens:,}"
    assert at.success and "fits" in at.success[0].value

    at.number_input(key="b_ctx").set_value(32768)
    at.number_input(key="b_conc").set_value(64)
    at.run()
    expect = budget(on().but(reserve_bytes=2 * GiB), 32768, 64)
    assert metric(at, "vLLM logs at 32,768") == f"{expect.max_concurrency:,.2f}x"
    assert not expect.fits
    assert at.error and fmt_gib(expect.overflow_bytes) in text(at.error[0])
    # The request bar turns red beyond the pool.
    spec = figure(at, "b_fig")
    names = [t.get("name") for t in spec["data"]]
    assert "Overflow" in names


def test_budget_compare_mode_adds_curves_and_rows():
    # The compare box takes model names. On one H100, DeepSeek-V3's 624.94 GiB of weights leave
    # no pool: no curve, and its row says so instead of a negative pool (review 4, F10). Llama 2
    # 7B's curve stops at its own limit, 4,096 tokens, and its row at 8,192 is marked past it.
    at = open_page(path("budget"))
    at.multiselect(key="b_cmp").set_value(["Llama 2 7B", "DeepSeek-V3"])
    at.run()
    assert not at.exception
    spec = figure(at, "b_curve")
    lines = {t["name"]: t["x"] for t in spec["data"] if t.get("mode") == "lines"}
    assert set(lines) == {"Llama 3.1 8B", "Llama 2 7B"}
    assert max(lines["Llama 2 7B"]) == 4096 and max(lines["Llama 3.1 8B"]) == 131_072
    table = tables(at)[0]
    assert list(table["model"]) == ["Llama 3.1 8B", "Llama 2 7B", "DeepSeek-V3"]
    pools = list(table["KV pool"])
    assert pools[2] == "does not fit (weights 624.94 GiB)" and not any("-" in p for p in pools)
    seqs = list(table["sequences of 8,192 tokens"])
    assert seqs[1].endswith("(past its limit, 4,096)") and seqs[2] == "none"


def test_budget_model_and_dtype_switch():
    at = open_page(path("budget"))
    before = metric(at, "KV per token")
    at.sidebar.selectbox(key="kvdtype").set_value("fp8")
    at.run()
    assert metric(at, "KV per token") == "64.00 KiB" != before
    at.sidebar.selectbox(key="model").set_value("deepseek-v3")
    at.sidebar.selectbox(key="tp").set_value(8)
    at.sidebar.selectbox(key="gpu").set_value("h200-141gb")
    at.run()
    assert not at.exception
    assert metric(at, "KV per token") == fmt_bytes(61 * 576)  # FP8 latent, replicated per GPU


def test_step_time_page_matches_kvcalc():
    at = open_page(path("step_time"))
    m = get_model("llama-3.1-8b")
    s = step_time(
        Deployment(spec=m.spec, weights=m.weights()), context=8192, batch=1, bandwidth_gbs=3350
    )
    assert metric(at, "Crossover context") == f"{s.crossover_context:,}"
    assert metric(at, "Tokens/s") == f"{s.tokens_per_s:,.1f}"
    at.number_input(key="s_batch").set_value(32)
    at.run()
    s32 = step_time(
        Deployment(spec=m.spec, weights=m.weights()), context=8192, batch=32, bandwidth_gbs=3350
    )
    assert metric(at, "Crossover context") == f"{s32.crossover_context:,}"
    fig = figure(at, "s_fig")
    shapes = fig["layout"].get("shapes", [])
    assert any(abs(sh.get("x0", -1) - s32.crossover_context) < 1 for sh in shapes)


def test_techniques_page_rows():
    at = open_page(path("techniques"))
    rows = tables(at)[0]
    assert len(rows) == 9
    at.session_state["t_settings"] = True  # the reader opens the settings fold
    at.run()
    at.number_input(key="t_window").set_value(1024)
    at.run()
    assert any("1,024" in str(v) for v in tables(at)[0].iloc[:, 0])


def test_the_techniques_settings_are_built_only_when_they_can_matter():
    # issue 42 (webui.urlstate.inputs_fold): at their defaults and closed, the five settings
    # send no widget and the rows use the defaults (a window of 4,096 tokens)
    at = open_page(path("techniques"))
    assert not [w for w in at.number_input if w.key == "t_window"]
    assert any("4,096" in str(v) for v in tables(at)[0].iloc[:, 0])
    # a link that carries one builds them, the link's value taken
    at = open_page(path("techniques"), t_window="1024")
    assert at.number_input(key="t_window").value == 1024
    assert any("1,024" in str(v) for v in tables(at)[0].iloc[:, 0])
    assert not at.session_state["t_settings"]  # built, the fold still closed
    # a value changed in the open fold stays when the fold closes again
    at = open_page(path("techniques"))
    at.session_state["t_settings"] = True
    at.run()
    at.number_input(key="t_rank").set_value(256).run()
    at.session_state["t_settings"] = False
    at.run()
    assert at.number_input(key="t_rank").value == 256
    assert any("(256 + 64 RoPE)" in str(v) for v in tables(at)[0].iloc[:, 0])


def test_lab_reacts_and_shows_deltas():
    at = open_page(path("lab"))
    assert metric(at, "Step time")
    at.number_input(key="l_ctx").set_value(16384)  # 16 x 16,384 x 128 KiB = 32 GiB: fits
    at.run()
    step = [m for m in at.metric if m.label == "Step time, calibrated estimate"][0]
    assert step.proto.delta  # the arrow compares with the previous view


def test_lab_shows_no_speed_for_a_batch_that_does_not_fit():
    # Llama 3.1 8B, 16 sequences of 65,536 tokens: 16 x 65,536 x 131,072 B = 128 GiB of cache,
    # more than the whole 80 GB H100. No step time and no tokens/s; the page says how many fit.
    at = open_page(path("lab"), l_ctx="65536")
    assert not at.exception
    assert metric(at, "Step time") == "does not fit"
    assert metric(at, "Tokens/s") == "does not fit"
    b = budget(on(), 65536)
    pool_tokens = b.kv_pool_bytes // 131_072  # 60,471,139,042 B: about 461K tokens of pool
    assert int(b.max_concurrency) == pool_tokens // 65536 == 7
    assert any("at most 7 do" in text(w) for w in at.warning)


def test_bad_url_parameters_give_a_note_not_an_error():
    at = open_page(
        path("home"),
        model="nope",
        tp="3",
        kvdtype="fp8",
        junk="<b>x</b>",
        gpu="h100-sxm-80gb",
    )
    assert not at.exception
    note = " ".join(w.value for w in at.warning)
    assert "model=" in note and "tp=" in note and "junk=" in note
    assert "<b>" not in note  # nothing a user typed is rendered as markup
    assert at.sidebar.selectbox(key="kvdtype").value == "fp8"  # the valid one was taken


def test_bad_page_parameter_is_reported():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(path("budget"))
    at.run()
    at2 = AppTest.from_file(APP, default_timeout=60)
    at2.query_params["b_ctx"] = "-5"
    at2.run()
    assert not at2.exception


def test_custom_config_paste():
    at = open_page(path("budget"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    assert not at.exception and at.error  # asks for a config, clearly
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(llama_config(num_hidden_layers=10)))
    at.run()
    assert not at.exception
    assert metric(at, "KV per token") == fmt_bytes(2 * 10 * 2 * 64 * 2)
    at.sidebar.text_area(key="cfg_text").set_value("{not json")
    at.run()
    assert not at.exception and "not valid JSON" in text(at.error[0])
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(llama_config(num_key_value_heads=3)))
    at.run()
    assert "num_key_value_heads" in text(at.error[0])


def test_hub_id_is_checked_and_offline_is_explained(monkeypatch):
    import huggingface_hub

    def offline(*a, **k):
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    at = open_page(path("home"))
    at.sidebar.selectbox(key="model").set_value("hub")
    at.run()
    at.sidebar.text_input(key="hub_id").set_value("../../etc/passwd")
    at.sidebar.button(key="hub_fetch").click()
    at.run()
    assert "not a Hub model id" in " ".join(text(e) for e in at.error)
    at.sidebar.text_input(key="hub_id").set_value("Qwen/Qwen2.5-0.5B-Instruct")
    at.sidebar.button(key="hub_fetch").click()
    at.run()
    assert not at.exception
    assert "offline" in " ".join(text(e) for e in at.error)


def test_model_too_big_for_gpu_is_explained():
    at = open_page(path("budget"))
    at.sidebar.selectbox(key="model").set_value("deepseek-v3")
    at.run()
    assert not at.exception
    assert "no room for a cache" in text(at.error[0])
    # The cache per token does not depend on the GPU: 61 layers x (512 + 64) x 2 B = 70,272 B.
    assert metric(at, "KV per token") == fmt_bytes(61 * (512 + 64) * 2) == "68.62 KiB"
    # No pool: no blocks, capacity, concurrency or longest sequence is shown.
    assert not [
        m
        for m in at.metric
        if m.label.startswith(("Blocks", "Max concurrency", "Longest", "Capacity"))
    ]


DATA = ROOT / "tests" / "data" / "configs"


def test_rejected_config_keeps_the_last_good_model():
    at = open_page(path("budget"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(llama_config(num_hidden_layers=10)))
    at.run()
    good = metric(at, "KV per token")
    assert good == fmt_bytes(2 * 10 * 2 * 64 * 2)
    bad = llama_config(num_hidden_layers=10, foo_pattern="ABAB")
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(bad))
    at.run()
    assert not at.exception
    errors = " ".join(text(e) for e in at.error)
    assert "not understood" in errors and "'foo_pattern'" in errors and "Still showing" in errors
    assert metric(at, "KV per token") == good  # the page still shows the last good model


def test_config_without_parameter_count_asks_for_weights_and_shows_assumptions():
    # MiniMax-M1: 10 softmax layers x 8 KV heads x 128 x 2 x 2 B = 40,960 B per token
    # (tests/test_real_configs.py), here with a MiniMax-Text-01-style shared expert
    # (shared_intermediate_size), whose weights vLLM builds and transformers does not: its
    # parameters are not counted, so the weights are asked for; the cache is the same.
    import json

    cfg = json.loads((DATA / "minimax-m1.json").read_text())
    cfg["shared_intermediate_size"] = 1024
    at = open_page(path("budget"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(cfg))
    at.run()
    assert not at.exception
    assert metric(at, "KV per token") == fmt_bytes(40960)
    at.sidebar.number_input(key="wgib").set_value(100.0)
    at.run()
    assert not at.exception
    captions = " ".join(text(c) for c in at.sidebar.caption)
    assert "80 layers: 70 state (lightning), 10 full" in captions
    said = " ".join(text(m) for m in at.sidebar.expander[0].markdown)
    assert "conv_kernel - 1" in said and "parameters not counted" in said


def test_user_config_checked_against_transformers():
    pytest.importorskip("torch")
    at = open_page(path("home"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value((DATA / "opt-125m.json").read_text())
    at.run()
    at.sidebar.button(key="verify_btn").click()
    at.run(timeout=120)
    assert not at.exception
    assert any("layer geometry agrees" in s.value for s in at.sidebar.success)


ALL_PAGES = PAGES + [path(n) for n in ("cache_fill", "engine", "interview", "tour")]


@pytest.mark.parametrize(
    "config", ["nemotron-h-56b.json", "gemma-4-e2b-it.json", "mamba-2.8b-hf.json"]
)
@pytest.mark.parametrize("page", ALL_PAGES)
def test_every_page_takes_a_hard_real_config(page, config):
    # A Mamba-2 / attention / MLP hybrid, a model with KV-sharing layers, and one with no
    # attention at all: every page renders, or says what it cannot do, never crashes.
    at = open_page(path("home"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value((DATA / config).read_text())
    at.run()
    if page != path("home"):
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_budget_says_which_vllm_limit_binds_and_when_vllm_would_not_start():
    # Llama 3.1 8B on an H100 at 256 tokens: memory allows thousands of sequences, but vLLM's
    # default max_num_seqs on a GPU of 70 GiB or more is 1,024: the scheduler binds.
    at = open_page(path("budget"), b_ctx="256")
    info = " ".join(text(i) for i in at.info)
    assert "max_num_seqs = 1,024" in info and "the scheduler, not memory" in info
    # On an L4 (22.5 GiB as the driver reports it) with 16 GB of BF16 weights, one 131,072-token
    # request needs 16 GiB of cache: vLLM refuses to start, with its own message and estimate.
    at = open_page(path("budget"), gpu="l4", b_ctx="131072")
    errors = " ".join(text(e) for e in at.error)
    b = budget(on("l4"), 131072)
    assert b.startup_error and "vLLM would refuse to start" in errors
    assert f"estimated maximum model length is {b.max_context_tokens}" in errors


def test_lab_ttft_is_at_least_one_weight_read():
    # Issue 13: "Time to first token (16 tokens) = 485.6 us" next to a 5.11 ms decode step.
    from kvcalc import get_gpu, get_model

    at = open_page(path("lab"), l_prompt="16")
    assert not at.exception
    m, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    # Every weight but the untied input table (128,256 x 4,096 BF16), which the 16 tokens only
    # gather 16 rows of: (16.06 GB - 1.05 GB + 16 x 8,192 B) / 3,350 GB/s = 4.48 ms.
    read = m.weights().bytes - 128_256 * 4096 * 2 + 16 * 4096 * 2
    floor_ms = read / (gpu.bandwidth_gbs * 1e9) * 1e3
    ttft = [x for x in at.metric if x.label.startswith("TTFT")][0]
    assert "of one 16-token prompt" in ttft.help  # the prompt the label no longer carries
    shown = ttft.value
    value = float(shown.split()[0]) * (1e-3 if shown.endswith("µs") else 1.0)
    assert shown.endswith(("ms", "µs")) and value >= floor_ms * 0.999


@pytest.mark.parametrize("page", [path("lab"), path("step_time")])
def test_no_speed_for_a_model_that_does_not_fit(page):
    # DeepSeek-V3 on one H100: about 625 GiB of FP8 weights against 80 GB. No step time, no
    # tokens/s: a message that says what does not fit and how to fix it.
    at = open_page(page, model="deepseek-v3")
    assert not at.exception
    assert any(
        "does not fit on" in text(e) and "tensor or pipeline parallel" in text(e) for e in at.error
    )
    assert not [m for m in at.metric if m.label.startswith(("Step time", "Tokens/s", "TTFT"))]
    at = open_page(page, model="deepseek-v3", tp="8", gpu="h200-141gb")
    assert not at.exception and not any("does not fit on" in text(e) for e in at.error)


def test_longest_sequence_is_at_most_the_models_limit():
    # Llama 3.1 8B on an H100: memory alone would hold far more than 131,072 tokens for one
    # sequence; the model's max_position_embeddings (131,072) binds and the page says so.
    at = open_page(path("budget"))
    assert metric(at, "Longest sequence") == "131,072"
    # On an L4 the same model has about 3 GiB of pool (22.5 GiB x 0.9 - 15 GiB - 2 GiB): about
    # 25,000 tokens of 128 KiB, below 131,072: memory binds.
    at = open_page(path("budget"), gpu="l4")
    b = budget(on("l4"), 8192, 16)
    assert b.max_context_limited_by == "memory" and 20_000 < b.max_context_tokens < 131_072
    assert metric(at, "Longest sequence") == f"{b.max_context_tokens:,}"


def test_step_time_text_is_linear_and_flags_a_crossover_past_the_model():
    # Llama 3.1 8B, batch 1, BF16: crossover about 114.5K tokens, inside its 131,072.
    at = open_page(path("step_time"))
    body = " ".join(text(m) for m in at.markdown)
    assert "grows in a straight line" in body and "nearly free" not in body
    assert "beyond this model" not in body
    # FP8 KV halves the bytes per token: the crossover doubles to about 229K, past the model.
    at = open_page(path("step_time"), kvdtype="fp8")
    body = " ".join(text(m) for m in at.markdown)
    assert "beyond this model's max_position_embeddings (131,072 tokens)" in body
    assert any("every byte read once at the GPU's full 3,350 GB/s" in text(c) for c in at.caption)


def test_the_sidebars_share_and_step_cost_move_the_labs_real_engine_figure_only():
    # Llama 3.1 8B, the Lab's batch 16 at 8,192 tokens on an H100 (moved from the step time
    # page, a Learn page that now shows the ideal bound alone). The ideal bound: (weights +
    # cache) / 3,350 GB/s, whatever the sidebar says. A real engine: that / share + the step's
    # fixed cost (batch 16 is far from compute bound): the calibrated defaults, then one's own
    # 0.7 and 1 ms.
    from kvcalc import get_gpu, get_model, step_time
    from kvcalc.perf.calibration import BW_SHARE, STEP_OVERHEAD_S

    m, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    s = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=8192,
        batch=16,
        bandwidth_gbs=gpu.bandwidth_gbs,
    )
    for share, ms, name in (
        (BW_SHARE, STEP_OVERHEAD_S * 1e3, "calibrated estimate"),
        (0.7, 1.0, "your step model"),
    ):
        at = open_page(path("lab"), bw_share=str(share), step_ms=str(ms))
        assert not at.exception
        step = [x for x in at.metric if x.label.startswith("Step time")][0]
        assert step.label == f"Step time, {name}"
        assert step.value == fmt_seconds(s.step_time_s / share + ms / 1e3)
        assert f"nothing else): {fmt_seconds(s.step_time_s)}" in step.help


def test_step_time_page_marks_what_does_not_fit():
    # Llama 3.1 8B on an H100 at vLLM's defaults. The pool in 2 MiB blocks (16 tokens x 128 KiB):
    # 64 sequences fit up to (blocks // 64) x 16 tokens each; at 8,192 tokens (512 blocks each)
    # blocks // 512 sequences fit, so batch 64 and up are hatched.
    pool = budget(on(), 8192).kv_pool_bytes
    blocks = pool // (16 * 131_072)
    at = open_page(path("step_time"), s_batch="64", s_xmax="131072", s_batch_open="true")
    assert not at.exception
    caps = " ".join(text(c) for c in at.caption)
    assert f"64 sequences fit in the KV pool up to {blocks // 64 * 16:,} tokens each" in caps
    assert f"the KV pool holds {blocks // 512:,} sequences" in caps
    fig = figure(at, "s_fig")
    assert max(fig["data"][0]["x"]) <= blocks // 64 * 16
    bars = figure(at, "s_batch_fig")
    shown = dict(zip(bars["data"][2]["x"], bars["data"][2]["y"]))
    assert shown[32] is not None and shown[64] is None
    # The untied input embedding (128,256 x 4,096 x 2 B = 0.98 GiB) is named as not read whole.
    assert "untied input embedding (0.98 GiB)" in caps


GLOSSARY = ["MHA", "GQA", "MQA", "MLA", "RoPE", "MFU", "TP", "PP", "BF16", "FP8", "TTFT", "GiB"]


@pytest.mark.parametrize("page", ALL_PAGES + [path("live")])
def test_glossary_is_reachable_from_every_page(page):
    # Issue 13: MHA, GQA, MQA, MLA, RoPE, MFU, TP, PP, BF16/FP8 spelled out from every page.
    from webui.selection import GLOSSARY_KEY

    at = open_page(page)
    assert not at.exception
    glossary = [e for e in at.sidebar.expander if e.label.startswith("Glossary")]
    assert len(glossary) == 1
    assert not glossary[0].markdown  # issue 42: built only once opened
    at.session_state[GLOSSARY_KEY] = True  # the reader opens it
    at.run()
    glossary = [e for e in at.sidebar.expander if e.label.startswith("Glossary")]
    body = " ".join(text(m) for m in glossary[0].markdown)
    for term in GLOSSARY:
        assert f"**{term}" in body or f"{term} " in body, term
    assert "Multi-head latent attention" in body and "Grouped-query attention" in body


def test_home_has_the_picture_and_a_path_through_the_pages():
    # The picture: one decode step, as an SVG (no Plotly to load on the first page). Four cached
    # tokens keep K and V; the new one writes its own; its query is drawn once, with one line to
    # every key, its own included.
    from webui.figures import cache_picture

    svg = cache_picture(["The", "cache", "keeps", "every"], "key")
    assert svg.count('class="cached"') == 8 and svg.count('class="written"') == 2
    assert svg.count('class="query"') == 1 and svg.count('class="read"') == 5
    assert "query: used once, then dropped" in svg and ">key</text>" in svg and ">(new)<" in svg
    assert "&lt;b&gt;" in cache_picture(["<b>"], "x")  # token text is escaped
    at = open_page(path("home"))
    assert len(at.get("image")) == 1
    links = [p.proto.page for p in at.get("page_link")]
    assert links[:6] == ["cache_fill", "budget", "step_time", "engine", "techniques", "interview"]


def test_url_bindings_are_declared_per_session_and_run():
    # Issue 14: no process-wide table that every session writes. Each run declares the widgets it
    # binds in its own session; another session's page leaves no key behind.
    budget_page = open_page(path("budget"))
    home = open_page(path("home"))
    assert "b_ctx" in budget_page.session_state["_url_bound"]
    assert "b_ctx" not in home.session_state["_url_bound"]
    assert "model" in home.session_state["_url_bound"]


def test_techniques_headline_is_the_largest_saving():
    # Llama 3.1 8B at 32,768 tokens: 32,768 x 131,072 B = 4 GiB as configured. MQA (1 K/V head
    # instead of 8) and a 4,096-token window both divide it by 8 (512 MiB); MQA comes first.
    at = open_page(path("techniques"))
    assert metric(at, "One sequence of 32,768 tokens, as configured") == "4.00 GiB"
    assert metric(at, "Largest saving on this page") == "8.00x smaller"
    caps = " ".join(text(c) for c in at.caption)
    assert "Largest saving: MQA (multi-query attention): 1 K/V head." in caps
    best = next(m for m in at.metric if m.label == "Largest saving on this page")
    assert "512.00 MiB for the same sequence" in best.help  # 4 GiB / 8, printed once


def test_unknown_fields_refused_then_read_unverified_with_a_banner():
    # A config with a field no reader understands is refused by name in the sidebar; asking for
    # the unverified estimate gives the figures (2 x 4 layers x 2 KV heads x 64 x 2 B per
    # token) under a warning that says they are unverified.
    at = open_page(path("budget"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(llama_config(prompt_length=32)))
    at.run()
    assert not at.exception
    assert any("prompt_length" in text(e) for e in at.sidebar.error)
    at.sidebar.checkbox(key="cfg_unverified").check()
    at.run(timeout=120)
    assert not at.exception
    assert metric(at, "KV per token") == fmt_bytes(2 * 4 * 2 * 64 * 2)
    assert any("Unverified estimate" in text(w) and "prompt_length" in text(w) for w in at.warning)


def test_config_of_a_family_without_a_reader_is_checked_by_itself():
    # A model_type no family reader knows, with only the standard decoder fields: kvcalc reads
    # it as a standard decoder and, torch being installed, checks it against transformers
    # without a button press.
    pytest.importorskip("torch")
    at = open_page(path("home"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    cfg = llama_config(model_type="my_own_llama")
    cfg = {
        k: v
        for k, v in cfg.items()
        if k not in ("intermediate_size", "vocab_size", "tie_word_embeddings")
    }
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(cfg))
    at.run(timeout=180)
    assert not at.exception
    # transformers has no such model_type either, so the check says it cannot be run, by name.
    said = " ".join(text(w) for w in at.sidebar.warning) + " ".join(
        text(s) for s in at.sidebar.success
    )
    assert "my_own_llama" in said


def test_hosted_checks_only_on_a_press_and_refuses_native_code_types(monkeypatch):
    # Issue 22 B2/B5: on a hosted server the transformers check starts only on a press, and a
    # model_type whose transformers code compiles native code (RWKV runs ninja) is refused by
    # name without any process started.
    pytest.importorskip("torch")
    import subprocess

    monkeypatch.setenv("KVLAB_HOSTED", "1")
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or real(*a, **k))
    at = open_page(path("home"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    rwkv = json.loads((DATA / "rwkv-4-430m-pile.json").read_text())
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps({**rwkv, "sliding_window": 131000}))
    at.run()
    assert any("sliding_window" in text(e) for e in at.sidebar.error)
    at.sidebar.checkbox(key="cfg_unverified").check()  # what locally starts the check by itself
    at.run()
    assert not at.exception and not at.sidebar.success and started == []
    assert not [w for w in at.sidebar.warning if "transformers" in text(w)]
    at.sidebar.button(key="verify_btn").click()
    at.run(timeout=60)
    assert not at.exception and started == []
    said = " ".join(text(w) for w in at.sidebar.warning)
    assert "rwkv model loads or compiles native code" in said


@pytest.mark.parametrize(
    "page",
    [
        path("step_time"),
        path("frontier"),
        path("roofline"),
        path("lab"),
    ],
)
def test_tp_that_does_not_divide_the_kv_heads_is_a_message(page):
    # issue 22 B3: SmolLM2-135M has 3 KV heads; TP 2 neither divides nor is a multiple of them.
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "smollm2-135m"
    at.query_params["tp"] = "2"
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception
    assert any("tensor parallel size 2" in text(e) for e in at.error)


@pytest.mark.parametrize(
    "page,kv,config",
    [
        # issue 22 B4: Gemma 4's sliding and full pages do not divide each other in INT8 / INT4
        # with per-head scales, and vLLM refuses to start: said on the page, not a generic box.
        (path("step_time"), "int8", "gemma-4-26b-a4b.json"),
        (path("step_time"), "int4", "gemma-4-26b-a4b.json"),
    ],
)
def test_a_setup_vllm_refuses_is_a_sentence_on_the_page(page, kv, config):
    at = open_page(page)
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value((DATA / config).read_text())
    at.run()
    at.sidebar.selectbox(key="kvdtype").set_value(kv)
    at.run()
    assert not at.exception
    said = " ".join(text(e) for e in at.error)
    assert "vLLM cannot unify them" in said and "another KV cache format" in said


def test_a_context_limit_past_the_cap_is_refused_by_name():
    # issue 22 B4: max_position_embeddings above 10^8 was read, then crashed two pages.
    at = open_page(path("step_time"))
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(
        json.dumps(llama_config(max_position_embeddings=10**9))
    )
    at.run()
    assert not at.exception
    said = [text(e).replace("\\_", "_") for e in list(at.sidebar.error) + list(at.error)]
    assert any("max_position_embeddings" in t and "100,000,000" in t for t in said)


@pytest.mark.parametrize("name, ignored", [("microscope", True), ("budget", False)])
def test_the_sidebar_says_where_its_choices_do_not_apply(name, ignored):
    # The microscope runs SmolLM2 whatever the sidebar says (webui/pages.py marks it); the
    # Budget uses the sidebar's model.
    at = open_page(path(name))
    assert any("runs its own model" in i.value for i in at.sidebar.info) == ignored


def _ms(shown: str) -> float:
    """A page's time as shown ("52.36 ms", "485.6 µs", "1.20 s") in milliseconds."""
    n, unit = shown.split()[0].replace(",", ""), shown.split()[1]
    return float(n) * {"s": 1e3, "ms": 1.0, "µs": 1e-3}[unit]


@pytest.mark.parametrize("mfu", ["0.511", "0.9", "1.0"])
def test_no_step_model_beats_the_ideal_ttft_whatever_its_mfu(mfu):
    # A teacher's review: at MFU 0.9 the Lab's TTFT (52.36 ms) fell below "the ideal bound"
    # (64.36 ms, then at MFU 0.5). The bound is every FLOP at the full dense peak (docs/design.md,
    # principle 7: FLOPs / peak), so no MFU a user enters can beat it; by hand, Llama 3.1 8B's
    # 8,030,261,248 parameters less its input table (128,256 x 4,096, gathered, not multiplied)
    # are 7,504,924,672: a 2,048-token prompt is 2 x that x 2,048 = 3.07e13 FLOPs of linear
    # layers, at least 31.1 ms at the H100's 989.4 TFLOPS (BF16 dense), attention on top.
    at = open_page(path("lab"), l_prompt="2048", l_mfu=mfu)
    assert not at.exception
    ttft = [x for x in at.metric if x.label.startswith("TTFT")][0]
    ideal = re.search(r"full bandwidth\): ([\d.,]+ (?:ms|µs|s))", ttft.help).group(1)
    assert _ms(ttft.value) >= _ms(ideal) >= 2 * 7_504_924_672 * 2048 / 989.4e12 * 1e3


def _band_sentence(cls: str) -> str:
    from kvcalc.perf.calibration import BAND_NAMES, ERROR_BAND

    med, worst, n = ERROR_BAND[cls]
    return f"{BAND_NAMES[cls]}: within ±{med:.0%} of the measured value on half of {n} held-back"


@pytest.mark.parametrize(
    ("page", "query", "bands"),
    [
        (path("lab"), {}, ["tpot_itl", "ttft"]),
        (path("frontier"), {}, ["output_tokens_per_s", "tpot_itl", "ttft"]),
        (path("roofline"), {"r_batch": "32"}, ["tpot_itl"]),
    ],
)
def test_each_page_states_the_band_of_the_quantity_it_shows(page, query, bands):
    # A single stream's tokens/s has its own measured band; a batch's step, a first token and a
    # server's throughput have theirs (kvcalc.perf.calibration.ERROR_BAND, per metric class).
    at = open_page(page, **query)
    assert not at.exception
    main = at.main  # the page, not the sidebar (whose caption states the TPOT band)
    body = " ".join(text(e) for e in [*main.caption, *main.markdown]) + " ".join(
        m.help or "" for m in main.metric
    )
    for cls in bands:
        assert _band_sentence(cls) in body, cls


def test_the_roofline_and_the_lab_give_one_ideal_ttft():
    # A teacher's second review: the roofline's TTFT of a 512-token prompt (15.67 ms, at MFU 0.5)
    # sat under "These are ideal bounds" while the Lab's ideal bound for it was 7.84 ms. One
    # truth per quantity: both at the full dense peak; by hand at least 2 x 7,504,924,672 x 512
    # / 989.4e12 = 7.77 ms (Llama 3.1 8B on an H100, attention on top).
    lab = open_page(path("lab"), l_prompt="512")
    ttft = [x for x in lab.metric if x.label.startswith("TTFT")][0]
    ideal = re.search(r"full bandwidth\): ([\d.,]+ (?:ms|µs|s))", ttft.help).group(1)
    roof = open_page(path("roofline"), r_prompt="512")
    assert not roof.exception
    said = " ".join(text(m) for m in roof.main.markdown)
    shown = re.search(r"= \*\*([\d.,]+ (?:ms|µs|s))\*\* at the ideal bound", said).group(1)
    assert shown == ideal and _ms(ideal) >= 2 * 7_504_924_672 * 512 / 989.4e12 * 1e3


def test_the_version_rules_read_as_words_with_sets_sorted():
    # The version box's help lists every release rule (engines/vllm/facts.py). A rule whose value
    # is a set of layer kinds (vLLM's MambaStateShapeCalculator rows: Gated DeltaNet from 0.10.2,
    # Mamba-2 from 0.17.0, KDA from 0.27.0) reads as the names in order, the same on every run,
    # never as Python's frozenset({...}) in the order of that process's string hashes.
    at = open_page(path("vllm_startup"))
    box = next(s for s in at.selectbox if s.label == "vLLM version")
    assert "frozenset" not in box.help
    assert "{gated_deltanet, kda, mamba2} from 0.27.0" in box.help
    assert "{} from 0.0.0" in box.help  # no such rows before vLLM counted them
