"""Offload tiers (issue 43, item 3: kvcalc.cache.tiers and ``kvcalc tiers``), worked by hand.

Llama 3.1 70B at TP 4: 80 layers x 2 x (8 / 4) KV heads x 128 x 2 B = 81,920 B a token per GPU,
so a prefix of 8,192 tokens is 671,088,640 B (640 MiB). 256 GiB of CPU memory holds
274,877,906,944 / 671,088,640 = 409.6, so 409 prefixes; back over PCIe 5.0 x16 (63 GB/s) in
671,088,640 / 63e9 = 10.65 ms. 2,000 GiB of NVMe: 3,200 prefixes, 95.87 ms at 7 GB/s.
"""

from __future__ import annotations

import json

import pytest

from kvcalc.cache.tiers import TierSpec, tiers
from kvcalc.cli import main

PREFIX = 671_088_640


def test_tiers_fill_gpu_first_and_a_hit_saves_recompute_minus_reload():
    specs = [
        TierSpec(name="gpu", capacity_bytes=10 * PREFIX, link_gbs=None),
        TierSpec(name="cpu", capacity_bytes=30 * PREFIX + 5, link_gbs=63.0),
        TierSpec(name="nvme", capacity_bytes=1000 * PREFIX, link_gbs=7.0),
    ]
    r = tiers(8192, PREFIX, 100, 0.620, specs)
    gpu, cpu, nvme = r.tiers
    assert (gpu.prefixes, cpu.prefixes, nvme.prefixes) == (10, 30, 1000)
    # 100 conversations: 10 on the GPU, 30 in CPU memory, the other 60 on NVMe
    assert (gpu.hit_share, cpu.hit_share, nvme.hit_share) == (0.10, 0.30, 0.60)
    assert r.hit_rate == pytest.approx(1.0)
    assert gpu.saved_s == 0.620 and cpu.reload_s == pytest.approx(PREFIX / 63e9)
    assert cpu.saved_s == pytest.approx(0.620 - PREFIX / 63e9)
    assert nvme.saved_s == pytest.approx(0.620 - PREFIX / 7e9)
    expected = 0.1 * 0.620 + 0.3 * (0.620 - PREFIX / 63e9) + 0.6 * (0.620 - PREFIX / 7e9)
    assert r.mean_saved_s == pytest.approx(expected)


def test_more_conversations_than_the_tiers_hold_miss_and_a_slow_tier_saves_nothing():
    specs = [
        TierSpec(name="gpu", capacity_bytes=2 * PREFIX, link_gbs=None),
        TierSpec(name="remote", capacity_bytes=8 * PREFIX, link_gbs=0.1),  # 6.7 s a reload
    ]
    r = tiers(8192, PREFIX, 40, 0.5, specs)
    assert r.hit_rate == pytest.approx(10 / 40)
    assert r.tiers[1].saved_s == 0.0  # recomputing is faster: the engine recomputes
    assert r.mean_saved_s == pytest.approx(2 / 40 * 0.5)


def test_the_command_by_hand(capsys):
    argv = ["tiers", "--model", "llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--tp", "4"]
    argv += ["--prefix-tokens", "8192", "--active", "1000", "--cpu-gib", "256"]
    argv += ["--nvme-gib", "2000", "--json"]
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["prefix_bytes"] == PREFIX
    cpu, nvme = j["tiers"][1], j["tiers"][2]
    assert cpu["prefixes"] == 409 and nvme["prefixes"] == 3200
    assert cpu["reload_s"] == pytest.approx(PREFIX / 63e9)
    assert nvme["reload_s"] == pytest.approx(PREFIX / 7e9)
    assert main(argv[:-1]) == 0
    assert "holds 409 prefixes" in capsys.readouterr().out


def test_bad_sizes_are_refused_by_name(capsys):
    argv = ["tiers", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    argv += ["--prefix-tokens", "100", "--active", "5", "--cpu-gib", "-3"]
    assert main(argv) == 2
    assert "--cpu-gib" in capsys.readouterr().err


@pytest.mark.parametrize(
    "key,tp,mb",
    [
        ("llama-3.1-8b", 1, 2.0),
        ("mistral-7b-v0.1", 1, 2.0),  # the blog's Mistral-7B-Instruct-v0.2: the same geometry
        ("qwen2.5-7b", 1, 0.87),
        ("llama-3.1-70b", 4, 1.25),  # the table gives no TP for it; 1.25 is a quarter of 5 MiB
    ],
)
def test_offloaded_block_is_vllm_blogs_physical_block(key, tp, mb):
    # vLLM's offloading connector moves one physical block (16 tokens of every layer's K and V,
    # one GPU's heads) per copy; IBM's table of "New block size" (vllm-project.github.io,
    # _posts/2026-01-08-kv-offloading-connector.md) in MB that are MiB: Llama 3.1 8B 16 x
    # 131,072 B = 2 MiB. (Its Qwen3-8B row, 1.97 MB, is not 16 x 144 KiB = 2.25 MiB, which
    # Mooncake's measured moves confirm: tests/test_transfer.py.)
    from kvcalc import registry
    from kvcalc.cache.kv import kv_cache

    block = kv_cache(registry().model(key).spec, 16, 1, tp=tp).total_bytes
    assert block / 2**20 == pytest.approx(mb, abs=0.006)  # printed to two decimals


def test_pcie5_reload_rate_the_blog_measured_is_below_line_rate():
    # the same blog: "for single-direction both can get up to about 50GB/s" (an H100 on PCIe 5.0
    # x16); the registry's line rate is 63 GB/s one way, so a reload takes at least bytes / 63
    # and about bytes / 50 in practice
    from kvcalc import registry

    line = registry().link("pcie5-x16").gbs
    assert line == pytest.approx(63, abs=1) and 50 / line == pytest.approx(0.79, abs=0.01)
