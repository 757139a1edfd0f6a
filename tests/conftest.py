import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def llama_config(**overrides):
    """A small Llama-style config.json dict; tests override the fields they are about."""
    cfg = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "vocab_size": 1000, "max_position_embeddings": 4096, "tie_word_embeddings": False}
    cfg.update(overrides)
    return {k: v for k, v in cfg.items() if v is not ...}
