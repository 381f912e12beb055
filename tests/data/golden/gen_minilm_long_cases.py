#!/usr/bin/env python3
"""Generate minilm_long_embeddings.json: all-MiniLM-L6-v2 embeddings of ~400-word texts
truncated as sentence-transformers truncates them (max_seq_length 256: [CLS] + the first
254 text tokens + [SEP]), with mean pooling and with CLS pooling, each L2-normalised.

The reference is independent of troupe: Hugging Face `tokenizers` on the folder's
tokenizer.json for the ids, and BERT's forward pass written here in float64 numpy from
the folder's model.safetensors (embeddings + LayerNorm, 6 post-LN encoder layers with
exact erf GELU, no padding so no attention mask). Before writing anything the script checks
itself against transformers' embeddings of the short texts in minilm_embeddings.json
(transformers 5.24 + torch, mean pooling) and stops unless every cosine is >= 0.99999
(measured: 1 - cosine <= 4.1e-13, max |diff| 1.4e-7, the goldens' rounding to 7 decimals).

Dev-time only (no torch needed):

  python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy==2.4.6 tokenizers==0.23.3 safetensors==0.8.0
  /tmp/v/bin/python tests/data/golden/gen_minilm_long_cases.py "$(scripts/fetch-model.sh all-MiniLM-L6-v2)" \\
      > tests/data/golden/minilm_long_embeddings.json

Each case: text, words, full_tokens (ids without truncation), input_ids (truncated to 256),
mean and cls (the two L2-normalised embeddings).
"""
import json
import math
import os
import sys

import numpy as np
import tokenizers
from safetensors.numpy import load_file

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
CLS_ID, SEP_ID = 101, 102

# ~400 words each: plain prose; digits, punctuation and symbols; non-ASCII scripts and accents.
PROSE = (
    "The old lighthouse stood at the edge of the cliff, its white paint peeling after decades of salt and wind. "
    "Every evening the keeper climbed the narrow spiral stairs, counted the steps out of habit, and lit the great "
    "lamp that swept its beam across the restless water. Fishermen returning late would look for that light the "
    "way children look for a parent in a crowd, and they trusted it more than any chart or compass. "
    "In winter the storms came from the north, and the sea rose in grey walls that broke against the rocks below. "
    "The keeper kept a journal of those nights, writing in a small careful hand about the height of the waves, the "
    "sound of the wind in the chimney, and the ships he saw struggling toward the harbour. Some of them he never saw "
    "again. He wrote their names anyway, because someone should remember them. "
    "When the village built a new automatic beacon on the breakwater, the council decided that the lighthouse was "
    "no longer needed. They offered the keeper a pension and a cottage near the church, and he accepted politely, "
    "though he walked back to the cliff every morning to look at the tower and the empty lantern room. "
    "Years later a young historian found his journals in a box at the town library. She read them over a long "
    "summer, copying the names of the ships and the dates of the storms, and she began to understand how much of "
    "the village's story had passed through that one small room at the top of the stairs. "
    "She wrote a book about the keeper and the sea, and the village held a celebration when it was published. "
    "People came from the neighbouring towns, and old fishermen told stories about the nights the light had "
    "guided them home. Someone suggested that the lamp should be lit again, just once, in his honour. "
    "On the evening of the celebration the whole village gathered on the cliff. The historian climbed the stairs "
    "with the mayor, counting the steps as the keeper had done, and together they lit the old lamp. Its beam swept "
    "across the water as it had for a hundred years, and for a moment everyone was silent, watching the light move "
    "over the waves toward the dark horizon where the ships had once appeared. "
    "Afterwards the children ran along the path with lanterns of their own, and the adults walked slowly back to "
    "the village, talking about the sea, the storms, and the man who had kept the light burning for so long."
)
NUMBERS = (
    "Invoice #2024-0117 (due 2024-03-31): 3 x widgets @ $19.99 = $59.97; 12.5% VAT -> $7.50; total $67.47. "
    "Order IDs: A-100, B-2001, C-30002, D-400003; SKUs 9780306406157, 4006381333931; tracking 1Z999AA10123456784. "
    "Temperatures (°C): -12.5, -3, 0, 4.25, 18.75, 37.0, 100; pressures 101.325 kPa, 14.696 psi, 760 mmHg. "
    "Coordinates: 48.8584° N, 2.2945° E; 40.6892° N, 74.0445° W; 35.6586° N, 139.7454° E. "
    "Phone numbers: +1 (555) 010-9999, +44 20 7946 0958, +81 3-1234-5678; ext. 42, 314, 2718. "
    "Scores: 98/100, 87.5/100, 7 of 10; ratios 1:2, 3:4, 16:9; odds 5-to-1, 9:1 against. "
    "Versions v1.0.0, v2.3.17-rc.4, 10.15.7, build 20231105.3; hashes 0x1F4A9C, 0xDEADBEEF, sha-256 e3b0c442. "
    "Math: 2 + 2 = 4; 7 * 6 = 42; 10 / 4 = 2.5; 2^10 = 1024; sqrt(144) = 12; 3.14159 * 2 = 6.28318; 1e-9 << 1e9. "
    "Dates: 1969-07-20, 01/02/2003, 31.12.1999, March 14th 2015 at 9:26:53 a.m., Q3 FY2022, week 52. "
    "Punctuation run: !!! ??? ... --- ;;; ::: ((( ))) [[[ ]]] {{{ }}} <<< >>> ''' \"\"\" ``` ~~~ ^^^ &&& ||| %%% ### @@@. "
    "Lists: (a) first; (b) second; (c) third -- see section 4.2.1, paragraph 7, footnote [12], appendix B-3. "
    "Emails and URLs: alice@example.com, bob.smith+tag@mail.example.org, https://example.com/path?q=1&r=2#frag. "
    "Counting: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26. "
    "Prices: €9.99, £14.50, ¥1200, ₹349, $0.99, 1,234,567.89 USD, 2.5M EUR, 3bn GBP, 0.0001 BTC. "
    "Measurements: 5'11\", 180 cm, 72.5 kg, 160 lb, 3.5 mi, 5.6 km, 250 ml, 8 fl oz, 1/4 cup, 2 tbsp, 350°F. "
    "Times: 00:00, 06:30, 12:00, 18:45, 23:59:59.999; durations 1h 23m 45s, 90 min, 2.5 hrs, 3 days, 6 weeks. "
    "Sports: 3-1, 2-2 (4-3 pens), 101-99 OT, 6-4 3-6 7-6(5), 21-19, 15-0, 30-15, 40-30, deuce, advantage. "
    "Chemistry: H2O, CO2, C6H12O6, NaCl, H2SO4, CH3COOH; pH 7.4; 6.022e23 mol^-1; 298.15 K; 8.314 J/(mol*K). "
    "Code: for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; } return sum / n; // average of 42 values. "
    "Table: | id | name | qty | price |; | 1 | bolt | 100 | 0.05 |; | 2 | nut | 250 | 0.03 |; | 3 | washer | 75 | 0.02 |."
)
UNICODE = (
    "Café au lait, naïve façade, résumé, coöperate, jalapeño, piñata, crème brûlée, smörgåsbord, Ærøskøbing. "
    "Straße, Größe, Fußgängerübergang, Äpfel und Birnen, über alles, schön, Mädchen, Öl, Übung, Zürich, München. "
    "Le cœur a ses raisons que la raison ne connaît point; où est la bibliothèque? Ça va très bien, merci. "
    "¿Dónde está la estación? ¡Qué día tan bonito! El niño comió paella en Valencia con su abuela. "
    "Привет, как дела? Москва — столица России. Я люблю читать книги вечером у окна. "
    "Γειά σου κόσμε. Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. Καλημέρα σε όλους. "
    "東京は日本の首都です。北京是中国的首都。今日は天気がいいですね。我喜欢学习新的语言。 "
    "서울은 한국의 수도입니다. 안녕하세요, 만나서 반갑습니다. 감사합니다. "
    "नमस्ते, आप कैसे हैं? दिल्ली भारत की राजधानी है। مرحبا بالعالم، كيف حالك اليوم؟ שלום עולם, מה שלומך? "
    "สวัสดีครับ ยินดีต้อนรับ. Xin chào, Hà Nội là thủ đô của Việt Nam. İstanbul'da güzel bir gün; teşekkür ederim. "
    "Emoji: 🦙 llama, 😀 smile, 👍🏽 thumbs up, ✅ done, 🚀 launch, ❤️ heart, 🇫🇷 flag, 🧑‍💻 coder. "
    "Math symbols: ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ ± × ÷ ∂ ∇ ∈ ∉ ⊂ ⊃ ∪ ∩ ∀ ∃ α β γ δ ε θ λ μ π σ φ ω. "
    "Full width: Ａｂｃ ＡＢＣ １２３; ligatures ﬁ ﬂ; small caps ᴀʙᴄ; superscripts x² y³ z⁴; fractions ½ ¼ ¾. "
    "Quotes: «guillemets», „low double“, ‘single’, “double”, ‹angle›; dashes — – ‐; ellipsis …; bullets • ◦ ‣. "
    "The quick brown fox jumps over the lazy dog while the café owner serves crêpes and the naïve tourist "
    "photographs the façade of the old cathedral in the golden evening light, humming a tune from München. "
    "Dans la forêt, les arbres murmurent des histoires anciennes; the wanderer listens, écoute, слушает, "
    "聴いている, 듣고 있다, and writes everything down in a notebook bound in soft brown leather. "
    "Zero-width joiners\u200d and spaces\u200b, non-breaking\u00a0spaces, ideographic\u3000spaces, tabs\tand "
    "newlines\nmix with combining marks: e\u0301 a\u0300 o\u0308 n\u0303 and the replacement character \ufffd. "
    "Accented capitals: ÀÉÎÕÜ ÇÑ ÅØ Ł Ž Š Č Ř Ő Ű; Vietnamese: Tiếng Việt có nhiều dấu thanh khác nhau. "
    "Finally, a few more plain English words so the text runs well past two hundred and fifty six tokens, "
    "which is the longest input this sentence embedding model reads before it has to cut the rest away."
)
TEXTS = [PROSE, NUMBERS, UNICODE]


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):  # BERT's "gelu": the exact erf form
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class MiniLM:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        assert c["model_type"] == "bert" and c["hidden_act"] == "gelu", c
        assert c.get("position_embedding_type", "absolute") == "absolute", c
        self.heads = c["num_attention_heads"]
        self.layers = c["num_hidden_layers"]
        self.eps = c["layer_norm_eps"]
        raw = load_file(os.path.join(folder, "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items() if v.dtype != np.int64}

    def hidden_states(self, ids):
        w, n = self.w, len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        d = x.shape[1]
        hd = d // self.heads

        def lin(p, h):
            return h @ w[p + ".weight"].T + w[p + ".bias"]

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = lin(p + "attention.self.query", x).reshape(n, self.heads, hd).transpose(1, 0, 2)
            k = lin(p + "attention.self.key", x).reshape(n, self.heads, hd).transpose(1, 0, 2)
            v = lin(p + "attention.self.value", x).reshape(n, self.heads, hd).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, d)
            x = layer_norm(lin(p + "attention.output.dense", a) + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], self.eps)
            h = gelu(lin(p + "intermediate.dense", x))
            x = layer_norm(lin(p + "output.dense", h) + x, w[p + "output.LayerNorm.weight"],
                           w[p + "output.LayerNorm.bias"], self.eps)
        return x

    def embed(self, ids):
        """(mean, cls): sentence-transformers' Pooling (mean over the tokens / the first token) + Normalize."""
        h = self.hidden_states(np.asarray(ids))
        mean, cls = h.mean(axis=0), h[0]
        return mean / np.linalg.norm(mean), cls / np.linalg.norm(cls)


def cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main():
    folder = sys.argv[1]
    golden_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_embeddings.json")
    model = MiniLM(folder)
    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_padding()

    # Self-check against transformers' embeddings of the short texts.
    with open(golden_path) as f:
        golden = json.load(f)
    tok.no_truncation()
    worst = 1.0
    for c in golden["cases"]:
        ids = tok.encode(c["text"]).ids
        assert ids == c["input_ids"], (c["text"], ids, c["input_ids"])
        mean = model.embed(ids)[0]
        cos = cosine(mean, c["embedding"])
        worst = min(worst, cos)
        diff = float(np.abs(mean - np.asarray(c["embedding"])).max())
        print(f"self-check {c['text'][:40]!r}: 1 - cosine {1 - cos:.2e}, max |diff| {diff:.1e}", file=sys.stderr)
    if worst < 0.99999:
        sys.exit(f"the numpy reference disagrees with minilm_embeddings.json (cosine {worst})")

    cases = []
    for text in TEXTS:
        tok.no_truncation()
        full = tok.encode(text).ids
        # sentence-transformers: tokenizer(..., truncation="longest_first", max_length=max_seq_length);
        # the special tokens count toward the length and are kept.
        tok.enable_truncation(MAX_SEQ_LENGTH)
        ids = tok.encode(text).ids
        assert len(full) > MAX_SEQ_LENGTH + 20, len(full)
        assert ids == full[:MAX_SEQ_LENGTH - 1] + [SEP_ID] and ids[0] == CLS_ID, "unexpected truncation"
        mean, cls = model.embed(ids)
        print(f"{len(text.split())} words, {len(full)} tokens -> {len(ids)}; "
              f"cos(mean, cls) {cosine(mean, cls):.4f}", file=sys.stderr)
        cases.append({"text": text, "words": len(text.split()), "full_tokens": len(full), "input_ids": ids,
                      "mean": [round(float(v), 9) for v in mean], "cls": [round(float(v), 9) for v in cls]})

    out = {
        "model": "all-MiniLM-L6-v2 (scripts/fetch-model.sh all-MiniLM-L6-v2)",
        "truncation": f"sentence-transformers max_seq_length {MAX_SEQ_LENGTH}: [CLS] + first "
                      f"{MAX_SEQ_LENGTH - 2} text tokens + [SEP]",
        "pooling": "mean: mean over all tokens; cls: the first token; each then L2-normalised",
        "reference": f"float64 numpy BERT (gen_minilm_long_cases.py), tokenizers {tokenizers.__version__}, "
                     f"numpy {np.__version__}; self-check vs minilm_embeddings.json min cosine {worst:.10f}",
        "cases": cases,
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
