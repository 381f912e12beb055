#!/usr/bin/env python3
"""An independent reference forward pass (numpy, float64) of the Llama-style decoders
troupe runs (llama, qwen2, qwen3, phi3), from a GGUF file, written from the model
definitions as llama.cpp b11434 builds its graphs (src/models/{llama,qwen2,qwen3,phi3}.cpp):
pre-norm RMSNorm, Q/K/V (fused attn_qkv split as Q|K|V rows; optional biases), qwen3's
per-head q/k RMS norms before RoPE, RoPE (pairs (2i,2i+1) for llama, (i,i+d/2) otherwise;
frequencies divided by rope_freqs factors when the file has them, or by Phi-3's
rope_factors_long/short as llama.cpp picks them from the context REF_CONTEXT, cos and sin
times rope.scaling.attn_factor), causal GQA attention
scaled by 1/sqrt(head_dim) (under llama, attention.sliding_window = w limits every query at
position p to the keys at (p - w, p], Mistral 7B's window as transformers applies it), SwiGLU (phi3: the first half of ffn_up's rows is the gate),
final norm, output head (tied to token_embd when output.weight is absent). gemma2/gemma3
(src/models/gemma2.cpp, gemma3.cpp): embeddings times sqrt(n_embd), NeoX RoPE, RMS norms
after attention and the MLP too, GELU-tanh gating, queries scaled by 1/sqrt(head_dim);
layer l windowed (keys at (p - w, p]) when l mod pattern < pattern - 1 (2 for gemma2, 6 for
gemma3); gemma2 soft-caps attention scores (50) and logits (30); gemma3 norms each head's
q and k and rotates its windowed layers with base 10000 (rope.freq_base_swa). gpt2
(src/models/gpt2.cpp): token plus learned position embeddings, pre-norm layer norms with
biases, fused attn_qkv with its bias, biased attn_output, ffn_up and ffn_down, a tanh-GELU
MLP, no RoPE, causal attention scaled by 1/sqrt(head_dim). Weights are
dequantized exactly (f32, f16, q8_0, mxfp4); all arithmetic is float64, activations unquantized.
The mixture-of-experts families are tests/golden/ref_moe.py (on this file's reader).

  ref_forward.py FILE.gguf PROMPT_IDS_JSON N_PREDICT N_PROBS  ->  JSON on stdout

REF_DROP=bias|qk_norm|rope_freqs|gate_up_swapped|window|positions|gelu_erf|longrope computes a deliberately wrong
model (that part left out, phi3's halves swapped, gpt2's GELU in its erf form, or Phi-3's other factor set):
how far such a model lands from the right one
is what the test's tolerance has to stay below.
"""
import os
import json
import struct
import sys

import numpy as np

DROP = os.environ.get("REF_DROP", "")
GGUF_TYPES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Gguf:
    def __init__(self, path):
        self.buf = open(path, "rb").read()
        self.pos = 0
        assert self.buf[:4] == b"GGUF", "not a GGUF file"
        self.pos = 4
        version, n_tensors, n_kv = self.read("I"), None, None
        assert version in (2, 3)
        n_tensors, n_kv = self.read("Q"), self.read("Q")
        self.kv = {}
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.value(self.read("I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self.string()
            n_dims = self.read("I")
            ne = [self.read("Q") for _ in range(n_dims)]
            ttype = self.read("I")
            offset = self.read("Q")
            self.tensors[name] = (ne, ttype, offset)
        align = self.kv.get("general.alignment", 32)
        self.data = (self.pos + align - 1) // align * align

    def read(self, fmt):
        v = struct.unpack_from("<" + fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return v

    def string(self):
        n = self.read("Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.read("I"), self.read("Q")
            return [self.value(et) for _ in range(n)]
        return self.read(GGUF_TYPES[t])

    def rows(self, name, r0=0, r1=None):
        """Rows [r0, r1) of a tensor as float64 [rows][ne0]."""
        ne, ttype, offset = self.tensors[name]
        ne0 = ne[0]
        total = int(np.prod(ne[1:])) if len(ne) > 1 else 1
        r1 = total if r1 is None else r1
        base = self.data + offset
        if ttype == 0:
            rb = 4 * ne0
            a = np.frombuffer(self.buf, np.float32, (r1 - r0) * ne0, base + r0 * rb)
        elif ttype == 1:
            rb = 2 * ne0
            a = np.frombuffer(self.buf, np.float16, (r1 - r0) * ne0, base + r0 * rb)
        elif ttype == 39:  # mxfp4: blocks of {u8 e, u8 qs[16]}, x = 2^(e-128) * grid[nibble] (ggml's doubled E2M1)
            rb = ne0 // 32 * 17
            raw = np.frombuffer(self.buf, np.uint8, (r1 - r0) * rb, base + r0 * rb).reshape(-1, 17)
            grid = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float64)
            d = np.ldexp(1.0, raw[:, :1].astype(np.int64) - 128)
            q = np.concatenate([grid[raw[:, 1:] & 15], grid[raw[:, 1:] >> 4]], axis=1)
            a = d * q
        elif ttype == 8:  # q8_0: blocks of {f16 d, int8 q[32]}, x = d * q
            rb = ne0 // 32 * 34
            raw = np.frombuffer(self.buf, np.uint8, (r1 - r0) * rb, base + r0 * rb).reshape(-1, 34)
            d = raw[:, :2].copy().view(np.float16).astype(np.float64)
            q = raw[:, 2:].copy().view(np.int8).astype(np.float64)
            a = d * q
        else:
            raise SystemExit(f"tensor {name}: type {ttype} not handled by the reference")
        return np.asarray(a, np.float64).reshape(r1 - r0, ne0)

    def has(self, name):
        return name in self.tensors


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rope(x, pos, theta, neox, factors, mscale):
    """x: [T][H][D]; rotate pairs by pos * theta^(-2i/D) / factors[i]."""
    d = x.shape[-1]
    half = d // 2
    freq = theta ** (-2.0 * np.arange(half) / d)
    if factors is not None:
        freq = freq / factors
    ang = pos[:, None].astype(np.float64) * freq[None, :]
    c, s = (np.cos(ang) * mscale)[:, None, :], (np.sin(ang) * mscale)[:, None, :]
    if neox:
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    return out


class Model:
    def __init__(self, path):
        g = self.g = Gguf(path)
        a = self.arch = g.kv["general.architecture"]
        assert a in ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gpt2"), a
        self.gemma = a in ("gemma2", "gemma3")
        self.gpt2 = a == "gpt2"
        k = lambda key, default=None: g.kv.get(f"{a}.{key}", default)
        self.n_embd, self.n_layer = k("embedding_length"), k("block_count")
        self.n_head = k("attention.head_count")
        self.n_kv = k("attention.head_count_kv", self.n_head)
        self.hd = k("attention.key_length", self.n_embd // self.n_head)
        self.theta, self.eps = k("rope.freq_base", 10000.0), k("attention.layer_norm_rms_epsilon")
        if self.gpt2:
            self.eps = k("attention.layer_norm_epsilon")
        self.neox = a != "llama"
        # llama.cpp disables phi3's window; a window under llama applies to every layer.
        self.window = k("attention.sliding_window", 0) if a == "llama" and DROP != "window" else 0
        self.local = [self.window > 0] * k("block_count")
        self.theta_local = self.theta
        self.attn_cap = self.final_cap = 0.0
        if self.gemma:
            g2 = a == "gemma2"
            self.window = k("attention.sliding_window", 4096 if g2 else 0) if DROP != "window" else 0
            pattern = k("attention.sliding_window_pattern", 2 if g2 else 6)
            self.local = [self.window > 0 and l % pattern < pattern - 1 for l in range(k("block_count"))]
            self.theta_local = k("rope.freq_base_swa", self.theta if g2 else 10000.0)
            self.attn_cap = k("attn_logit_softcapping", 50.0) if g2 else 0.0
            self.final_cap = k("final_logit_softcapping", 30.0 if g2 else 0.0)
        self.factors = g.rows("rope_freqs.weight")[0] if g.has("rope_freqs.weight") else None
        if DROP == "rope_freqs":
            self.factors = None
        self.mscale = k("rope.scaling.attn_factor", 1.0)
        if g.has("rope_factors_long.weight"):
            # Phi-3's long-context RoPE as llama.cpp picks it: the long set when the context
            # (REF_CONTEXT, llama.cpp's -c; else context_length) exceeds original_context_length.
            ctx = int(os.environ.get("REF_CONTEXT", "0")) or k("context_length")
            use_long = ctx > k("rope.scaling.original_context_length", k("context_length"))
            if DROP == "longrope":
                use_long = not use_long
            self.factors = g.rows("rope_factors_long.weight" if use_long else "rope_factors_short.weight")[0]
        self.n_ff = k("feed_forward_length")
        self.out_name = "output.weight" if g.has("output.weight") else "token_embd.weight"
        self.n_vocab = g.tensors["token_embd.weight"][0][1]
        self.layers = [self.load_gpt2_layer(l) if self.gpt2 else self.load_layer(l) for l in range(self.n_layer)]
        self.out_norm = g.rows("output_norm.weight")[0]
        self.out_norm_b = g.rows("output_norm.bias")[0] if g.has("output_norm.bias") else None

    def load_gpt2_layer(self, l):
        g, b = self.g, f"blk.{l}."
        E = self.n_embd
        L = {x: g.rows(b + x)[0] for x in ("attn_norm.weight", "attn_norm.bias", "attn_qkv.bias", "attn_output.bias",
                                          "ffn_norm.weight", "ffn_norm.bias", "ffn_up.bias", "ffn_down.bias")}
        qkv = g.rows(b + "attn_qkv.weight")
        L["wq"], L["wk"], L["wv"] = qkv[:E], qkv[E:2 * E], qkv[2 * E:]
        bqkv = L["attn_qkv.bias"]
        L["bq"], L["bk"], L["bv"] = bqkv[:E], bqkv[E:2 * E], bqkv[2 * E:]
        if DROP == "bias":
            L["bq"] = np.zeros(E)
        for x in ("attn_output", "ffn_up", "ffn_down"):
            L[x] = g.rows(b + x + ".weight")
        return L

    def gpt2_layer(self, L, x, rows, pos):
        """One GPT-2 block over the whole sequence x; returns the rows asked for."""
        T = x.shape[0]
        h = layer_norm(x, L["attn_norm.weight"], L["attn_norm.bias"], self.eps)
        q = (h[rows] @ L["wq"].T + L["bq"]).reshape(len(rows), self.n_head, self.hd)
        k = (h @ L["wk"].T + L["bk"]).reshape(T, self.n_head, self.hd)
        v = (h @ L["wv"].T + L["bv"]).reshape(T, self.n_head, self.hd)
        att = np.empty((len(rows), self.n_head, self.hd))
        for hh in range(self.n_head):
            s = q[:, hh, :] @ k[:, hh, :].T / np.sqrt(self.hd)
            s[pos[rows][:, None] < pos[None, :]] = -np.inf
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hh, :]
        x = x[rows] + att.reshape(len(rows), -1) @ L["attn_output"].T + L["attn_output.bias"]
        h = layer_norm(x, L["ffn_norm.weight"], L["ffn_norm.bias"], self.eps)
        u = h @ L["ffn_up"].T + L["ffn_up.bias"]
        if DROP == "gelu_erf":
            from math import erf
            gelu = 0.5 * u * (1 + np.vectorize(erf)(u / np.sqrt(2)))
        else:
            gelu = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
        return x + gelu @ L["ffn_down"].T + L["ffn_down.bias"]

    def load_layer(self, l):
        g, b = self.g, f"blk.{l}."
        qd, kvd = self.n_head * self.hd, self.n_kv * self.hd
        L = {"attn_norm": g.rows(b + "attn_norm.weight")[0], "ffn_norm": g.rows(b + "ffn_norm.weight")[0],
             "wo": g.rows(b + "attn_output.weight"), "down": g.rows(b + "ffn_down.weight")}
        if self.gemma:
            L["post_attn_norm"] = g.rows(b + "post_attention_norm.weight")[0]
            L["post_ffn_norm"] = g.rows(b + "post_ffw_norm.weight")[0]
        if g.has(b + "attn_qkv.weight"):
            qkv = g.rows(b + "attn_qkv.weight")
            L["wq"], L["wk"], L["wv"] = qkv[:qd], qkv[qd:qd + kvd], qkv[qd + kvd:]
        else:
            L["wq"], L["wk"], L["wv"] = (g.rows(b + f"attn_{x}.weight") for x in "qkv")
        for x in "qkv":
            L["b" + x] = g.rows(b + f"attn_{x}.bias")[0] if g.has(b + f"attn_{x}.bias") else None
        if DROP == "bias":
            L["bq"] = None
        L["q_norm"] = g.rows(b + "attn_q_norm.weight")[0] if g.has(b + "attn_q_norm.weight") else None
        if DROP == "qk_norm":
            L["q_norm"] = None
        L["k_norm"] = g.rows(b + "attn_k_norm.weight")[0] if g.has(b + "attn_k_norm.weight") else None
        if g.has(b + "ffn_gate.weight"):
            L["gate"], L["up"] = g.rows(b + "ffn_gate.weight"), g.rows(b + "ffn_up.weight")
        else:  # phi3: gate rows first, then up (ggml_swiglu)
            up = g.rows(b + "ffn_up.weight")
            L["gate"], L["up"] = up[:self.n_ff], up[self.n_ff:]
            if DROP == "gate_up_swapped":
                L["gate"], L["up"] = L["up"], L["gate"]
        return L

    def logprobs(self, ids, first):
        """Log-softmax rows of positions [first, len(ids))."""
        T = len(ids)
        x = np.concatenate([self.g.rows("token_embd.weight", i, i + 1) for i in ids])
        if self.gemma:
            x = x * np.sqrt(self.n_embd)
        pos = np.arange(T)
        if self.gpt2 and DROP != "positions":
            x = x + self.g.rows("position_embd.weight", 0, T)
        for li, L in enumerate(self.layers):
            if self.gpt2:
                rows = np.arange(first, T) if li == self.n_layer - 1 else np.arange(T)
                x = self.gpt2_layer(L, x, rows, pos)
                continue
            window = self.window if self.local[li] else 0
            theta = self.theta_local if self.local[li] else self.theta
            last = li == self.n_layer - 1
            rows = np.arange(first, T) if last else np.arange(T)  # the last layer: only the rows asked for
            h = rms_norm(x, L["attn_norm"], self.eps)
            q = h[rows] @ L["wq"].T
            k, v = h @ L["wk"].T, h @ L["wv"].T
            if L["bq"] is not None:
                q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
            q = q.reshape(len(rows), self.n_head, self.hd)
            k = k.reshape(T, self.n_kv, self.hd)
            v = v.reshape(T, self.n_kv, self.hd)
            if L["q_norm"] is not None:
                q, k = rms_norm(q, L["q_norm"], self.eps), rms_norm(k, L["k_norm"], self.eps)
            q = rope(q, pos[rows], theta, self.neox, self.factors, self.mscale)
            k = rope(k, pos, theta, self.neox, self.factors, self.mscale)
            group = self.n_head // self.n_kv
            att = np.empty((len(rows), self.n_head, self.hd))
            for hh in range(self.n_head):
                s = q[:, hh, :] @ k[:, hh // group, :].T / np.sqrt(self.hd)  # [rows][T]
                if self.attn_cap > 0:
                    s = self.attn_cap * np.tanh(s / self.attn_cap)
                s[pos[rows][:, None] < pos[None, :]] = -np.inf
                if window > 0:
                    s[pos[None, :] <= pos[rows][:, None] - window] = -np.inf
                s = np.exp(s - s.max(axis=1, keepdims=True))
                att[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hh // group, :]
            if self.gemma:
                x = x[rows] + rms_norm(att.reshape(len(rows), -1) @ L["wo"].T, L["post_attn_norm"], self.eps)
                h = rms_norm(x, L["ffn_norm"], self.eps)
                gt, up = h @ L["gate"].T, h @ L["up"].T
                gelu = 0.5 * gt * (1 + np.tanh(np.sqrt(2 / np.pi) * (gt + 0.044715 * gt ** 3)))
                x = x + rms_norm((gelu * up) @ L["down"].T, L["post_ffn_norm"], self.eps)
                continue
            x = x[rows] + att.reshape(len(rows), -1) @ L["wo"].T
            h = rms_norm(x, L["ffn_norm"], self.eps)
            gt, up = h @ L["gate"].T, h @ L["up"].T
            x = x + (gt / (1 + np.exp(-gt)) * up) @ L["down"].T
        if self.gpt2:
            h = layer_norm(x, self.out_norm, self.out_norm_b, self.eps)
        else:
            h = rms_norm(x, self.out_norm, self.eps)
        logits = np.empty((h.shape[0], self.n_vocab))
        for r0 in range(0, self.n_vocab, 16384):  # the head in slices (the embedding may be ~1 GB as f64)
            r1 = min(self.n_vocab, r0 + 16384)
            logits[:, r0:r1] = h @ self.g.rows(self.out_name, r0, r1).T
        if self.final_cap > 0:
            logits = self.final_cap * np.tanh(logits / self.final_cap)
        m = logits.max(axis=1, keepdims=True)
        return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def greedy_steps(m, prompt, n_predict, n_probs):
    """`n_predict` greedy tokens after `prompt`, each with its logprob and the top `n_probs`."""
    ids, steps = list(prompt), []
    for _ in range(n_predict):
        lp = m.logprobs(ids, len(ids) - 1)[-1]
        top = np.argsort(-lp, kind="stable")[:n_probs]
        steps.append({"id": int(top[0]), "logprob": float(lp[top[0]]),
                      "top": [[int(t), float(lp[t])] for t in top]})
        ids.append(int(top[0]))
    return steps


def main():
    path, prompt, n_predict, n_probs = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    steps = greedy_steps(Model(path), prompt, n_predict, n_probs)
    json.dump({"prompt_ids": prompt, "output_ids": [s["id"] for s in steps], "steps": steps}, sys.stdout)


if __name__ == "__main__":
    main()
