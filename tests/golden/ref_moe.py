#!/usr/bin/env python3
"""An independent float64 reference of the mixture-of-experts families troupe runs, from a
GGUF file, written from llama.cpp b11434's graphs (src/models/{qwen3moe,olmoe,llama,
openai-moe}.cpp and llm_graph_context::build_moe_ffn) with ref_forward.py's reader:

  qwen3moe  per-head q/k RMS norms, NeoX RoPE; router softmax over every expert, the top k
            (by probability), their probabilities divided by their sum
  olmoe     q and k RMS-normed over the whole projection before the split into heads,
            NeoX RoPE; softmax router, top k, weights not normalized
  llama     with an expert_count (Mixtral): consecutive-pair RoPE, softmax router, top k,
            normalized
  gpt-oss   q/k/v and attn_output biases, one sink logit per head (an extra softmax term
            that attends to nothing), the even layers windowed (keys at (p - w, p]),
            YaRN RoPE (ggml's corr dims and ramp, cos/sin times 1 + 0.1 ln factor),
            post_attention_norm before the experts; router with a bias, the top k by
            logit, softmax over those k; biased experts with the clamped SwiGLU
            min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1)

Each token's output is the sum over its k experts of weight * down(act(gate x, up x)).
All arithmetic is float64, weights dequantized exactly (f32, f16, q8_0, mxfp4).

  ref_moe.py FILE.gguf PROMPT_IDS_JSON N_PREDICT N_PROBS  ->  JSON on stdout
    as ref_forward.py's, plus "routes": [layer][prompt token][k] the experts the router chose
    for the prompt, the most probable first, and "route_margins": [layer][prompt token] the gap
    between the k-th and the (k+1)-th router logit (how near the choice was to another).

REF_DROP=topk (one expert fewer per token) | norm (the top-k weights' normalization
toggled) | sinks (no sinks) | yarn (plain RoPE) computes a deliberately wrong model.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_forward import Gguf, greedy_steps, rms_norm, rope  # noqa: E402

DROP = os.environ.get("REF_DROP", "")


def yarn_factors(d, theta, factor, n_orig, beta_fast=32.0, beta_slow=1.0):
    """ggml_rope_yarn_corr_dims and rope_yarn as per-pair divisors of the frequency."""
    corr = lambda beta: d * np.log(n_orig / (beta * 2 * np.pi)) / (2 * np.log(theta))
    low, high = max(0.0, np.floor(corr(beta_fast))), min(d - 1.0, np.ceil(corr(beta_slow)))
    i = np.arange(d // 2, dtype=np.float64)
    ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
    s = 1.0 / factor
    return 1.0 / (s * (1.0 - ramp) + ramp), 1.0 + 0.1 * np.log(factor)


class MoeModel:
    def __init__(self, path):
        g = self.g = Gguf(path)
        a = self.arch = g.kv["general.architecture"]
        assert a in ("qwen3moe", "olmoe", "llama", "gpt-oss"), a
        k = lambda key, default=None: g.kv.get(f"{a}.{key}", default)
        self.oss = a == "gpt-oss"
        self.n_embd, self.n_layer = k("embedding_length"), k("block_count")
        self.n_head = k("attention.head_count")
        self.n_kv = k("attention.head_count_kv", self.n_head)
        self.hd = k("attention.key_length", self.n_embd // self.n_head)
        self.theta, self.eps = k("rope.freq_base", 10000.0), k("attention.layer_norm_rms_epsilon")
        self.neox = a != "llama"
        self.n_expert, self.k = k("expert_count"), k("expert_used_count")
        self.softmax_weight = self.oss
        self.normalize = a in ("qwen3moe", "llama")
        if DROP == "norm":
            self.normalize = not self.normalize
        self.factors, self.mscale = None, 1.0
        if k("rope.scaling.type") == "yarn" and DROP != "yarn":
            self.factors, self.mscale = yarn_factors(self.hd, self.theta, k("rope.scaling.factor"),
                                                     k("rope.scaling.original_context_length"))
        window = k("attention.sliding_window", 0) if self.oss else 0
        self.window = [window if self.oss and l % 2 == 0 else 0 for l in range(self.n_layer)]
        self.out_name = "output.weight" if g.has("output.weight") else "token_embd.weight"
        self.n_vocab = g.tensors["token_embd.weight"][0][1]
        self.layers = [self.load_layer(l) for l in range(self.n_layer)]
        self.out_norm = g.rows("output_norm.weight")[0]

    def vec(self, name):
        return self.g.rows(name)[0] if self.g.has(name) else None

    def load_layer(self, l):
        g, b = self.g, f"blk.{l}."
        L = {"attn_norm": self.vec(b + "attn_norm.weight"), "wo": g.rows(b + "attn_output.weight"),
             "ffn_norm": self.vec(b + ("post_attention_norm.weight" if self.oss else "ffn_norm.weight")),
             "router": g.rows(b + "ffn_gate_inp.weight"), "router_b": self.vec(b + "ffn_gate_inp.bias"),
             "bo": self.vec(b + "attn_output.bias"), "sinks": self.vec(b + "attn_sinks.weight")}
        if DROP == "sinks":
            L["sinks"] = None
        for x in "qkv":
            L["w" + x] = g.rows(b + f"attn_{x}.weight")
            L["b" + x] = self.vec(b + f"attn_{x}.bias")
        L["q_norm"], L["k_norm"] = self.vec(b + "attn_q_norm.weight"), self.vec(b + "attn_k_norm.weight")
        E = self.n_expert
        for x in ("gate", "up", "down"):
            w = g.rows(b + f"ffn_{x}_exps.weight")
            L[x] = w.reshape(E, w.shape[0] // E, w.shape[1])
            bias = b + f"ffn_{x}_exps.bias"
            L[x + "_b"] = g.rows(bias) if g.has(bias) else None
        return L

    def attention(self, L, h, rows, pos, li):
        T = h.shape[0]
        q = h[rows] @ L["wq"].T
        k, v = h @ L["wk"].T, h @ L["wv"].T
        if L["bq"] is not None:
            q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
        if L["q_norm"] is not None and self.arch == "olmoe":  # the whole projection, before the heads
            q, k = rms_norm(q, L["q_norm"], self.eps), rms_norm(k, L["k_norm"], self.eps)
        q = q.reshape(len(rows), self.n_head, self.hd)
        k, v = k.reshape(T, self.n_kv, self.hd), v.reshape(T, self.n_kv, self.hd)
        if L["q_norm"] is not None and self.arch != "olmoe":
            q, k = rms_norm(q, L["q_norm"], self.eps), rms_norm(k, L["k_norm"], self.eps)
        q = rope(q, pos[rows], self.theta, self.neox, self.factors, self.mscale)
        k = rope(k, pos, self.theta, self.neox, self.factors, self.mscale)
        group, window = self.n_head // self.n_kv, self.window[li]
        att = np.empty((len(rows), self.n_head, self.hd))
        for hh in range(self.n_head):
            s = q[:, hh, :] @ k[:, hh // group, :].T / np.sqrt(self.hd)
            s[pos[rows][:, None] < pos[None, :]] = -np.inf
            if window > 0:
                s[pos[None, :] <= pos[rows][:, None] - window] = -np.inf
            m = s.max(axis=1, keepdims=True)
            if L["sinks"] is not None:
                m = np.maximum(m, L["sinks"][hh])
            e = np.exp(s - m)
            den = e.sum(axis=1, keepdims=True)
            if L["sinks"] is not None:
                den = den + np.exp(L["sinks"][hh] - m)
            att[:, hh, :] = (e / den) @ v[:, hh // group, :]
        out = att.reshape(len(rows), -1) @ L["wo"].T
        return out + L["bo"] if L["bo"] is not None else out

    def route(self, L, h, margins=None):
        """Each row's experts (most probable first) and their weights; margins gets each row's
        gap between the k-th and the (k+1)-th largest router logit."""
        logits = h @ L["router"].T
        if L["router_b"] is not None:
            logits = logits + L["router_b"]
        n_used = self.k - 1 if DROP == "topk" else self.k
        experts, weights = [], []
        for row in logits:
            order = np.argsort(-row, kind="stable")
            top = order[:n_used]
            if margins is not None:
                margins.append(float(row[order[self.k - 1]] - row[order[self.k]]) if self.k < len(row) else 1e9)
            if self.softmax_weight:
                w = np.exp(row[top] - row[top].max())
                w = w / w.sum()
            else:
                p = np.exp(row - row.max())
                w = (p / p.sum())[top]
                if self.normalize:
                    w = w / max(w.sum(), 6.103515625e-5)
            experts.append(top)
            weights.append(w)
        return experts, weights

    def experts(self, L, h, experts, weights):
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for e, w in zip(experts[t], weights[t]):
                g, u = L["gate"][e] @ h[t], L["up"][e] @ h[t]
                if L["gate_b"] is not None:
                    g, u = g + L["gate_b"][e], u + L["up_b"][e]
                if self.oss:
                    x, y = np.minimum(g, 7.0), np.clip(u, -7.0, 7.0)
                    act = x / (1 + np.exp(-1.702 * x)) * (y + 1)
                else:
                    act = g / (1 + np.exp(-g)) * u
                d = L["down"][e] @ act
                if L["down_b"] is not None:
                    d = d + L["down_b"][e]
                out[t] += w * d
        return out

    def logprobs(self, ids, first, routes=None, margins=None):
        T = len(ids)
        x = np.concatenate([self.g.rows("token_embd.weight", i, i + 1) for i in ids])
        pos = np.arange(T)
        for li, L in enumerate(self.layers):
            rows = np.arange(first, T) if li == self.n_layer - 1 else np.arange(T)
            h = rms_norm(x, L["attn_norm"], self.eps)
            x = x[rows] + self.attention(L, h, rows, pos, li)
            h = rms_norm(x, L["ffn_norm"], self.eps)
            gaps = [] if margins is not None else None
            experts, weights = self.route(L, h, gaps)
            if routes is not None:
                routes.append([[int(e) for e in ex] for ex in experts])
            if margins is not None:
                margins.append(gaps)
            x = x + self.experts(L, h, experts, weights)
        h = rms_norm(x, self.out_norm, self.eps)
        logits = h @ self.g.rows(self.out_name).T
        m = logits.max(axis=1, keepdims=True)
        return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))


def main():
    path, prompt, n_predict, n_probs = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    m = MoeModel(path)
    routes, margins = [], []
    m.logprobs(list(prompt), 0, routes, margins)  # with first = 0 every layer routes every prompt row
    steps = greedy_steps(m, prompt, n_predict, n_probs)
    json.dump({"prompt_ids": prompt, "output_ids": [s["id"] for s in steps], "steps": steps, "routes": routes,
               "route_margins": margins},
              sys.stdout)


if __name__ == "__main__":
    main()
