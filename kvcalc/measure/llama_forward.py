"""A Llama-family forward pass written out, with its KV cache in plain sight.

``Net`` runs the model's own modules and writes out only the attention between them:
q, k, v = W_q x, W_k x, W_v x; q, k rotated (keys cached after RoPE, as transformers does);
p = softmax(q k^T / sqrt(head_dim) + mask); out = p v. Query head h reads KV head
h // (heads / kv_heads) (transformers' ``repeat_kv``). docs/measurement.md.
"""

from __future__ import annotations

import math


class Net:
    """The pieces of a loaded Llama-family ``LlamaForCausalLM`` that a step needs, batch 1."""

    def __init__(self, model):
        cfg = model.config
        if getattr(cfg, "model_type", None) != "llama":
            raise ValueError(
                f"the written-out forward supports Llama-family models, not "
                f"{getattr(cfg, 'model_type', None)!r}"
            )
        self.model = model
        self.n_layers = int(cfg.num_hidden_layers)
        self.n_heads = int(cfg.num_attention_heads)
        self.n_kv = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads)
        self.group = self.n_heads // self.n_kv  # query heads per KV head
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self._layers = model.model.layers
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        self._rotary = apply_rotary_pos_emb

    def embed(self, ids):
        """ids: [n] token ids -> hidden states [1, n, hidden]."""
        return self.model.model.embed_tokens(ids.view(1, -1))

    def rope(self, x, start: int):
        """(cos, sin) for positions start .. start + n - 1."""
        import torch

        pos = torch.arange(start, start + x.shape[1], device=x.device).view(1, -1)
        return self.model.model.rotary_emb(x, position_ids=pos)

    def qkv(self, i: int, x, cos, sin):
        """Layer i's query [heads, n, d], key and value [kv_heads, n, d] for hidden states x;
        q and k are rotated (RoPE) for their positions."""
        layer = self._layers[i]
        a = layer.self_attn
        h = layer.input_layernorm(x)
        n = x.shape[1]
        q = a.q_proj(h).view(1, n, self.n_heads, self.head_dim).transpose(1, 2)
        k = a.k_proj(h).view(1, n, self.n_kv, self.head_dim).transpose(1, 2)
        v = a.v_proj(h).view(1, n, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = self._rotary(q, k, cos, sin)
        return q[0], k[0], v[0]

    def finish(self, i: int, x, out):
        """The rest of layer i: W_o on the attention output [heads, n, d], the residual, the
        MLP and its residual."""
        layer = self._layers[i]
        n = out.shape[1]
        o = layer.self_attn.o_proj(out.transpose(0, 1).reshape(1, n, self.n_heads * self.head_dim))
        x = x + o
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def logits(self, x):
        """Final norm and the language-model head: [n, vocab]."""
        return self.model.lm_head(self.model.model.norm(x))[0]

    def scores(self, q, k):
        """Scaled scores [heads, n_q, n_k] of queries q [heads, n_q, d] against keys
        k [kv_heads, n_k, d]: each group of query heads reads its one KV head."""
        g, nq = self.group, q.shape[1]
        s = q.reshape(self.n_kv, g * nq, self.head_dim) @ k.transpose(1, 2)
        return (s * self.scale).view(self.n_heads, nq, k.shape[1])

    def weighted(self, p, v):
        """Attention output [heads, n_q, d]: weights p [heads, n_q, n_k] times values
        v [kv_heads, n_k, d], each group of query heads reading its one KV head."""
        g, nq = self.group, p.shape[1]
        return (p.reshape(self.n_kv, g * nq, v.shape[1]) @ v).view(self.n_heads, nq, self.head_dim)

    def attend(self, q, k, v, allowed):
        """(output [heads, n_q, d], weights [heads, n_q, n_k]); ``allowed`` [n_q, n_k] is the
        mask (True: the query may read that key), shared by every head."""
        import torch

        p = torch.softmax(self.scores(q, k).masked_fill(~allowed, float("-inf")), dim=-1)
        return self.weighted(p, v), p
