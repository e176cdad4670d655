"""Transformer models for the corpus: a GPT-style decoder with a KV cache (prefill and decode
graphs) and a BERT-style encoder over any sequence length. Random weights (seeded); the
architecture is what matters for an inference engine's coverage and speed.

Each export function writes ONNX files with dynamic axes, opset 17, and returns their paths.
"""
import math
import os

import torch
from torch import nn


class DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.act = nn.GELU()

    def forward(self, x, past_k, past_v, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, self.heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        if mask is not None:
            att = att + mask
        y = torch.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
        return x, k, v


class GptDecoder(nn.Module):
    """GPT-2-like: token + learned position embeddings, pre-norm blocks, tied-free LM head."""

    def __init__(self, vocab=4096, d=256, layers=4, heads=4, max_len=1024):
        super().__init__()
        self.layers, self.heads, self.hd = layers, heads, d // heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(DecoderBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        causal = torch.full((max_len, max_len), float("-inf")).triu(1)
        self.register_buffer("causal", causal.view(1, 1, max_len, max_len), persistent=False)

    def forward(self, ids, past):
        t = ids.shape[1]
        start = past[0].shape[2]
        pos = torch.arange(start, start + t, dtype=torch.long).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        # The prefill graph masks the future; a decode step (one token) sees the whole cache.
        mask = self.causal[:, :, start:start + t, :start + t] if t > 1 else None
        present = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, past[2 * i], past[2 * i + 1], mask)
            present += [k, v]
        return (self.head(self.ln(x)), *present)


def export_gpt_decoder(out_dir, seed=0):
    """prefill.onnx (ids [1, S] -> logits [1, S, V], present k/v [1, H, S, D]) and decode.onnx
    (ids [1, 1], past k/v [1, H, P, D] -> logits [1, 1, V], present [1, H, P + 1, D])."""
    torch.manual_seed(seed)
    m = GptDecoder().eval()
    n = m.layers
    kv_names = [f"{kind}_{i}" for i in range(n) for kind in ("key", "value")]
    paths = []
    for name, t, p in (("prefill", 8, 0), ("decode", 1, 8)):
        ids = torch.randint(0, 4096, (1, t))
        past = [torch.zeros(1, m.heads, p, m.hd) for _ in range(2 * n)]

        class Wrap(nn.Module):
            def __init__(self, inner, with_past):
                super().__init__()
                self.inner, self.with_past = inner, with_past

            def forward(self, ids, *past_in):
                if not self.with_past:
                    past_in = [torch.zeros(1, self.inner.heads, 0, self.inner.hd)] * (2 * n)
                return self.inner(ids, list(past_in))

        with_past = name == "decode"
        inputs = ["input_ids"] + (["past_" + k for k in kv_names] if with_past else [])
        outputs = ["logits"] + ["present_" + k for k in kv_names]
        axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        for k in kv_names:
            if with_past:
                axes["past_" + k] = {2: "past"}
            axes["present_" + k] = {2: "total"}
        path = os.path.join(out_dir, f"gpt_decoder_{name}.onnx")
        args = (ids, *past) if with_past else (ids,)
        torch.onnx.export(Wrap(m, with_past), args, path, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes, opset_version=17)
        paths.append(path)
    return paths


class Encoder(nn.Module):
    """BERT-like: embeddings + post-norm encoder layers with a padding mask, any length <= 512."""

    def __init__(self, vocab=8192, d=256, layers=4, heads=4, max_len=512):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict(dict(
                q=nn.Linear(d, d), k=nn.Linear(d, d), v=nn.Linear(d, d), o=nn.Linear(d, d),
                ln1=nn.LayerNorm(d), fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d),
                ln2=nn.LayerNorm(d))))
        self.act = nn.GELU()

    def forward(self, ids, attention_mask):
        b, t = ids.shape
        pos = torch.arange(t, dtype=torch.long).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for l in self.layers:
            def heads(z):
                return z.view(b, t, self.heads, self.hd).transpose(1, 2)
            q, k, v = heads(l["q"](x)), heads(l["k"](x)), heads(l["v"](x))
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.hd) + bias, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = l["ln1"](x + l["o"](y))
            x = l["ln2"](x + l["fc2"](self.act(l["fc1"](x))))
        return x


def export_var_encoder(out_dir, seed=0):
    """var_encoder.onnx: input_ids, attention_mask int64 [1, S] -> hidden [1, S, 256], S any."""
    torch.manual_seed(seed)
    m = Encoder().eval()
    ids = torch.randint(0, 8192, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.long)
    path = os.path.join(out_dir, "var_encoder.onnx")
    torch.onnx.export(m, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                      output_names=["hidden"],
                      dynamic_axes={"input_ids": {1: "seq"}, "attention_mask": {1: "seq"},
                                    "hidden": {1: "seq"}}, opset_version=17)
    return [path]
