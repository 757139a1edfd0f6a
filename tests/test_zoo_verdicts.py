"""The zoo's verdict logic (kvcalc.measure.zoo.classify) on hand-made verify reports: no
torch needed.

The zoo itself (every architecture transformers ships) runs in tests/test_zoo.py (slow)."""

from kvcalc.measure.verify import VerifyReport, VerifyRow
from kvcalc.measure.zoo import VERDICTS, ZooResult, ZooRun, cause_of, classify


def row(layer, verdict="agrees", why="", kvcalc="full", transformers="DynamicLayer"):
    return VerifyRow(
        layer=layer,
        kvcalc=kvcalc,
        transformers=transformers,
        expected={"kv": 8, "indexer": 0, "state": 0},
        found={"kv": 8, "indexer": 0, "state": 0},
        verdict=verdict,
        why=why,
    )


def report(*rows, checkable=True, reason="", differences=()):
    return VerifyReport(
        model="m",
        context=64,
        transformers_version="x",
        checkable=checkable,
        verdict="v",
        reason=reason,
        rows=tuple(rows),
        differences=tuple(differences),
    )


def test_every_layer_agreeing_with_nothing_named_is_exact():
    assert classify(report(row(0), row(1))) == ("exact", "", ())


def test_named_differences_are_collected_once_each_by_their_short_names():
    r = report(
        row(0, "agrees (named difference)", "sliding"),
        row(1),
        row(2, "agrees (named difference)", "sliding"),
        row(3, "agrees (named difference)", "state, none"),
        differences=("sliding layers: ...", "recurrent layers: ...", "MLP/MoE-only ..."),
    )
    verdict, detail, named = classify(r)
    assert verdict == "named difference"
    assert named == (
        "window vs window-1",
        "conv kernel vs kernel-1",
        "placeholder layers (nothing cached)",
    )
    assert (
        detail == "window vs window-1; conv kernel vs kernel-1; placeholder layers (nothing cached)"
    )


def test_mla_and_extra_mtp_layers_are_named():
    r = report(
        row(0, "agrees (named difference)", "mla"),
        differences=(
            "MLA: ...",
            "transformers' cache has 1 more layer(s) than the config "
            "declares (multi-token-prediction layers), not counted here",
        ),
    )
    assert classify(r)[2] == ("MLA latent layout", "extra cache layers (multi-token prediction)")


def test_one_differing_layer_makes_it_wrong_and_names_the_first():
    r = report(
        row(0),
        row(
            1,
            "differs",
            "kv: kvcalc 8 elements, transformers 16",
            kvcalc="sliding",
            transformers="DynamicLayer",
        ),
        row(2, "differs", "state: kvcalc 0 elements, transformers 4"),
        row(3, "agrees (named difference)", "sliding"),
    )
    verdict, detail, named = classify(r)
    assert verdict == "wrong" and named == ()
    assert detail == (
        "2 of 4 layers differ; first: layer 1 (sliding / DynamicLayer): kv: kvcalc "
        "8 elements, transformers 16"
    )


def test_an_unbuildable_model_is_cannot_build_with_transformers_reason():
    r = report(checkable=False, reason="a forward pass on the meta device fails (boom)")
    assert classify(r) == ("cannot build", "a forward pass on the meta device fails (boom)", ())


def test_causes_group_without_the_values_that_differ():
    a = "config field 'head_dim' must be at least 1, got 0"
    b = "config field 'head_dim' must be at least 1, got -3"
    assert cause_of(a) == cause_of(b) == "config field 'head_dim' must be at least N"
    assert cause_of(
        "'hidden_size' (4096) is not divisible by 'num_attention_heads' (12)"
    ) == cause_of("'hidden_size' (768) is not divisible by 'num_attention_heads' (7)")


def result(mt, verdict, detail="", via_text=None):
    return ZooResult(
        model_type=mt, model_class="XForCausalLM", verdict=verdict, detail=detail, via_text=via_text
    )


def test_a_run_counts_every_verdict_groups_refusals_and_writes_one_row_per_type():
    run = ZooRun(
        results=(
            result("a", "exact"),
            result("b", "refused", "field 'x', got 1"),
            result("c", "refused", "field 'x', got 2"),
            result("d", "wrong", "layer 0 | differs"),
            result("e", "named difference", "window vs window-1", via_text="e_t"),
        ),
        transformers_version="9.9",
        torch_version="1.0",
        seconds=3.0,
        date="2026-12-01",
        workers=2,
        timeout_s=60,
        memory_gib=8,
    )
    assert run.counts() == {
        "exact": 1,
        "named difference": 1,
        "refused": 2,
        "cannot build": 0,
        "wrong": 1,
        "error": 0,
    }
    assert list(run.counts()) == list(VERDICTS)
    assert run.by_cause("refused") == {"field 'x'": ["b", "c"]}
    md = run.markdown()
    assert "transformers 9.9" in md[0] and "2026-12-01" in md[0]
    assert "| `d` | XForCausalLM | wrong | layer 0 \\| differs |" in md
    assert "| `e` | XForCausalLM (text model `e_t`) | named difference | window vs window-1 |" in md
    summary = "\n".join(run.summary())
    assert "WRONG: d: layer 0 | differs" in summary
    assert (
        "exact: 1, named difference: 1, refused: 2, cannot build: 0, wrong: 1, error: 0" in summary
    )


# -- the parameter check (kvcalc.measure.param_check) ---------------------------------------------


class _Spec:
    def __init__(self, total=None, error=None):
        self.params = None if total is None else type("P", (), {"total": total})()
        self.params_error = error


def test_params_equal_with_stored_buffers_is_exact_and_says_what_was_added():
    from kvcalc.measure.param_check import judge

    assert judge(_Spec(1000), (1000, 0)) == ("exact", "", 1000, 1000)
    verdict, detail, k, t = judge(_Spec(1010), (1000, 10))
    assert (verdict, k, t) == ("exact", 1010, 1010)
    assert "1,000 parameters + 10 elements of e_score_correction_bias" in detail


def test_params_that_differ_are_wrong_and_a_missing_count_is_refused_by_its_reason():
    from kvcalc.measure.param_check import judge

    verdict, detail, k, t = judge(_Spec(990), (1000, 0))
    assert verdict == "wrong" and (k, t) == (990, 1000)
    assert detail == "kvcalc 990, transformers 1,000 (-10)"
    assert judge(_Spec(error="no counter for x"), (1000, 0)) == (
        "refused",
        "no counter for x",
        None,
        1000,
    )
    assert judge(_Spec(5), "no head")[:2] == ("cannot build", "no head")


def test_a_run_counts_params_verdicts_and_writes_a_params_row_per_type():
    from dataclasses import replace

    run = ZooRun(
        results=(
            replace(result("a", "exact"), params="exact", params_kvcalc=7, params_transformers=7),
            replace(
                result("b", "exact"),
                params="wrong",
                params_detail="kvcalc 8, transformers 7 (+1)",
                params_kvcalc=8,
                params_transformers=7,
            ),
            replace(result("c", "refused", "x"), params="refused", params_detail="the config"),
        ),
        transformers_version="9.9",
        torch_version="1.0",
        seconds=3.0,
        date="2026-12-01",
        workers=2,
        timeout_s=60,
        memory_gib=8,
    )
    assert run.params_counts() == {"exact": 1, "refused": 1, "cannot build": 0, "wrong": 1}
    md = run.markdown()
    assert "| `b` | wrong | 8 | 7 | kvcalc 8, transformers 7 (+1) |" in md
    assert "| `c` | refused |  |  | the config |" in md
    summary = "\n".join(run.summary())
    assert "parameters: exact: 1, refused: 1, cannot build: 0, wrong: 1" in summary
    assert "PARAMS WRONG: b: kvcalc 8, transformers 7 (+1)" in summary
