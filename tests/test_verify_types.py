"""The model types the transformers check may build on a server (kvcalc.measure.verify: refusal).

Oracles: transformers' own modeling files (read here for native-code loaders, for every type the
check may build) and docs/zoo.md (the zoo's list of types, written by a zoo run)."""

import re
from pathlib import Path

import pytest

from kvcalc.measure.verify import NATIVE_CODE, ZOO_TYPES, refusal

ROOT = Path(__file__).resolve().parent.parent
# What transformers' modeling code calls to compile or load native code.
LOADERS = re.compile(
    r"cpp_extension|load_cuda_kernels|lazy_load_kernel|get_kernel\(|"
    r"is_ninja_available|load_inline|load_wkv_cuda_kernel"
)


def test_the_allow_list_is_the_zoos_list():
    rows = [
        line
        for line in (ROOT / "docs" / "zoo.md").read_text().splitlines()
        if line.startswith("| `")
    ]
    assert {re.match(r"\| `([^`]+)`", r).group(1) for r in rows} == set(ZOO_TYPES)


def test_no_allowed_type_loads_native_code():
    transformers = pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    models = Path(transformers.__file__).parent / "models"
    loaders = set()
    for t in ZOO_TYPES:
        folder = models / model_type_to_module_name(t)
        for f in folder.glob("modeling_*.py"):
            if LOADERS.search(f.read_text(encoding="utf-8")):
                loaders.add(t)
    assert "rwkv" in loaders  # the scan finds the case the issue names
    assert loaders <= NATIVE_CODE, loaders - NATIVE_CODE
    for t in loaders:
        assert "native code" in refusal(t)


@pytest.mark.parametrize(
    "model_type, words",
    [
        ("llama", None),
        ("nemotron_h", None),
        ("rwkv", "native code"),
        ("yoso", "native code"),
        ("resnet", "not one of the 297"),
        ("", "no model_type"),
        (None, "no model_type"),
        (7, "no model_type"),
        ("x" * 500, "not one of"),
    ],
)
def test_refusal(model_type, words):
    got = refusal(model_type)
    if words is None:
        assert got is None
    else:
        assert words in got and len(got) < 400
