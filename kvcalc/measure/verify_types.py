"""Which model types the transformers check may build on a server (issue 22 B2).

The check builds a model with transformers' own classes. A few of them load or compile native
code when built or run (RWKV runs ``ninja`` and, on a GPU, compiles a CUDA kernel; MRA and YOSO
compile theirs; SAM3 video loads a hub kernel): a pasted ``model_type`` must never make a
server do that. So the check builds only:

* a type of the zoo (docs/zoo.md: every ``model_type`` with a causal-LM class in transformers
  5.24, as ``python -m kvcalc verify --zoo`` lists them), and
* not one of ``NATIVE_CODE`` (found by reading transformers' modeling files for ``ninja``,
  ``cpp_extension``, ``load_cuda_kernels``, ``lazy_load_kernel`` and ``get_kernel``;
  tests/test_verify_types.py reads them again for every allowed type).

Everything else is refused by name before a process starts. Regenerate ``ZOO_TYPES`` from
docs/zoo.md after a zoo run with a new transformers (the test says when they differ).
"""

from __future__ import annotations

__all__ = ["ZOO_TYPES", "NATIVE_CODE", "refusal"]

NATIVE_CODE = frozenset({"rwkv", "mra", "yoso", "sam3_video"})

ZOO_TYPES = frozenset({
    "afmoe", "apertus", "apertus1p5", "apertus1p5_text", "arcee", "aria", "aria_text",
    "audioflamingo3", "axk1", "axk2", "aya_vision", "bailing_hybrid", "bamba", "bart", "beam",
    "bert", "bert-generation", "big_bird", "bigbird_pegasus", "biogpt", "bitnet", "blenderbot",
    "blenderbot-small", "blip-2", "bloom", "blt", "camembert", "clip", "codegen", "cohere",
    "cohere2", "cohere2_moe", "cohere2_vision", "cohere_compass", "cohere_compass_text",
    "colmodernvbert", "colpali", "colqwen2", "cosmos3_edge", "cosmos3_omni", "cpmant", "ctrl",
    "cwm", "data2vec-text", "dbrx", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4",
    "deepseek_vl", "deepseek_vl_hybrid", "diffllama", "doge", "dory", "dots1", "dots3_note",
    "dots3_note_text", "electra", "embedding_gemma2", "emu3", "encoder-decoder", "ernie",
    "ernie4_5", "ernie4_5_moe", "exaone", "exaone4", "exaone4_5", "exaone_moe", "falcon",
    "falcon_h1", "falcon_mamba", "fast_vlm", "flex_olmo", "flint", "florence2", "fun_asr_nano",
    "fuyu", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "gemma4",
    "gemma4_assistant", "gemma4_text", "gemma4_unified", "gemma4_unified_assistant",
    "gemma4_unified_text", "git", "glm", "glm4", "glm46v", "glm4_moe", "glm4_moe_lite", "glm4v",
    "glm4v_moe", "glm5_next", "glm_image", "glm_moe_dsa", "glm_ocr", "glmasr", "glmga", "got_ocr2",
    "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese", "gpt_oss",
    "gptj", "granite", "granite_docling", "granite_speech", "granite_speech_plus", "granite_swa",
    "granitemoe", "granitemoe_swa", "granitemoehybrid", "granitemoeshared", "grounding-dino",
    "helium", "hrm_text", "hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl", "hy_v3", "hy_v4",
    "hy_v4_vl", "hyperclovax", "hyperclovax_vision_v2", "idefics2", "idefics3", "inkling2",
    "inkling2_loop", "inkling2_loop_text", "inkling2_text", "inkling_mm_model", "inkling_text",
    "instructblip", "instructblipvideo", "internlm3", "internvl", "iquestcoder", "jais2", "jamba",
    "janus", "jetmoe", "jev", "kimi_k25", "kimi_linear", "kolibri1", "laguna", "lara_mini", "lfm2",
    "lfm2_moe", "lfm2_vl", "lfm3", "lfm3_vl", "lighton_ocr", "llama", "llama4", "llama4_text",
    "llava", "llava_next", "llava_next_video", "llava_onevision", "longcat_flash", "mamba",
    "mamba2", "marian", "mbart", "megatron-bert", "mellum", "mimo_v2_flash", "minicpm3",
    "minicpm_ocr", "minicpmv4_6", "minicpmv4_7", "minimax", "minimax_m2", "minimax_m3_vl",
    "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mistral3", "mistral_large4",
    "mixtral", "mllama", "mm-grounding-dino", "modernbert-decoder", "modernvbert", "molmo2",
    "moshi", "moss_transcribe_diarize", "mpt", "muse_glimmer", "muse_spark", "musicflamingo",
    "musicgen", "musicgen_melody", "mvp", "nanochat", "nemo_speechlm", "nemotron", "nemotron_h",
    "nemotron_h_omni", "olmo", "olmo2", "olmo3", "olmo_hybrid", "olmoe", "omdet-turbo", "omniasr",
    "openai-gpt", "opt", "ovis2", "paligemma", "pe_audio", "pe_audio_video", "pe_video", "pegasus",
    "perception_lm", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "plbart",
    "pp_chart2table", "prophetnet", "qianfan_ocr", "qwen2", "qwen2_5_vl", "qwen2_audio",
    "qwen2_moe", "qwen2_vl", "qwen3", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text",
    "qwen3_asr", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe", "qwen4_exp",
    "qwen4_exp_text", "rag", "recurrent_gemma", "reformer", "rembert", "roberta",
    "roberta-prelayernorm", "roc_bert", "roformer", "rwkv", "sam3", "sam3_lite_text", "sarvam_mla",
    "sarvam_moe", "seed_oss", "shieldgemma2", "smollm3", "smolvlm", "solar_open",
    "speech-encoder-decoder", "stablelm", "starcoder2", "tipsv2", "trocr", "ultravbert",
    "vaultgemma", "vibevoice", "vibevoice_asr", "video_llama_3", "video_llava", "vipllava",
    "vision-encoder-decoder", "vision-text-dual-encoder", "voxtral", "voxtral_realtime", "whisper",
    "xglm", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xlstm", "xmod", "youtu", "zamba",
    "zamba2", "zaya",
})


def refusal(model_type: object) -> str | None:
    """Why the check will not build ``model_type`` here, or None when it may."""
    if not isinstance(model_type, str) or not model_type:
        return "not checked: the config has no model_type, so transformers has no class to build"
    shown = model_type[:60].encode("unicode_escape").decode("ascii")
    if model_type in NATIVE_CODE:
        return (f"not checked here: transformers' {shown} model loads or compiles native code "
                "when it is built, which this server never does (run `python -m kvcalc verify` "
                "on your own machine)")
    if model_type not in ZOO_TYPES:
        return (f"not checked: model_type '{shown}' is not one of the {len(ZOO_TYPES)} "
                "decoder types transformers ships that this check builds (docs/zoo.md)")
    return None
