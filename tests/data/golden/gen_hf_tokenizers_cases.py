#!/usr/bin/env python3
"""Regenerate hf_tokenizers_{llama3,qwen2,tekken,tekken-nemo,llama2,llama2-metaspace,gemma3}.json:
Hugging Face `tokenizers`' ids and decoded text for a corpus of hard strings,
on tokenizer.json files built here, independently of troupe, with the
library's own builders from the vocabularies of llama.cpp's vocab GGUFs and
the Gemma 3 GGUF, in the layouts real models of each family ship:

  llama3    ggml-vocab-llama-bpe.gguf: BPE (ignore_merges), Split(Llama 3 regex)
            + ByteLevel, ByteLevel decoder, TemplateProcessing "<|begin_of_text|> $A"
  qwen2     ggml-vocab-qwen2.gguf: NFC, Split(Qwen2 regex) + ByteLevel, no BOS
  tekken    ggml-vocab-qwen2.gguf's vocabulary in Mistral-Nemo's layout: BPE
            (ignore_merges), Split(tekken regex, the pattern of mistral-common's
            tekken.json) + ByteLevel, ByteLevel decoder, "BOS $A" with the
            vocabulary's BOS; the corpus gets TEKKEN_TEXTS (case changes, marks,
            non-ASCII cased letters, '/' runs) on top
  tekken-nemo  Mistral-Nemo's own vocabulary (the C++ test puts the added tokens into
            model.vocab as well as the ranks): tekken_240718.json (mistral-common's
            copy, fetched by scripts/fetch-vocab.sh): its first 130072 BPE ranks as
            ids 1000.. and byte-level tokens, the merges derived from the ranks as
            transformers' tiktoken converter did (one merge per token: what BPE on
            the lower ranks leaves as two parts), 1000 added specials (<unk>, <s>,
            </s>, [INST], [/INST], then <SPECIAL_n>), the layout of "tekken";
            when `tiktoken` is installed its ids on the same ranks and regex are
            checked equal first (the way mistral-common encodes)
  llama2    ggml-vocab-llama-spm.gguf: BPE with byte_fallback / fuse_unk, merges
            derived from the scores as transformers' SentencePieceExtractor does;
            Prepend('▁') + Replace(' ' -> '▁'); Replace/ByteFallback/Fuse/Strip
            decoders; "<s> $A"
  llama2-metaspace  the same vocabulary with the newer layout: Metaspace
            pre-tokenizer (prepend_scheme "first", split false) and decoder
  gemma3    $TROUPE_GEMMA_MODEL (gemma-3-270m): Replace(' ' -> '▁') only, no
            Strip, "<bos> $A"

The tokenizer.json files are too large to commit, so each golden holds what
is needed to rebuild the same file from the GGUF: "tokenizer_json" is the
file with model.vocab and model.merges emptied, "vocab_fnv1a64" and
"merges_fnv1a64" (FNV-1a 64 over "text\\0id\\n" per vocab entry in id order,
and "left\\0right\\n" per merge) with their counts. The C++ test
(tests/runtime/text/tokenizer/hf_tokenizer_json_test.cpp) fills vocab and
merges from the GGUF, checks the hashes, and reads the file.

Each case: "text", "ids" (encode with add_special_tokens), "decoded"
(decode(ids, skip_special_tokens=True)).

    ~/.cache/troupe/hf-tok-venv/bin/python gen_hf_tokenizers_cases.py [FAMILY ...]

Needs `pip install tokenizers gguf` (and tiktoken for the tekken-nemo check) in that venv, TROUPE_VOCAB_DIR
(scripts/fetch-vocab.sh) and TROUPE_GEMMA_MODEL (scripts/fetch-model.sh gemma-3-270m).
"""
import base64
import glob
import json
import os
import random
import sys

import gguf
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from gen_llamacpp_tokenize_cases import corpus as llamacpp_corpus  # noqa: E402

SPACE = "\u2581"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
            r"\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
             r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Strings where the tekken split differs from Llama 3's and from llama.cpp's ASCII-only adaptation.
TEKKEN_TEXTS = [
    "camelCase HTTPServer XMLHttpRequest getURLForID ABC def",
    "\u00c9T\u00c9 \u00e9t\u00e9 a\u00c9b \u01c5ungla \u01c4A \u1f08\u03b8\u1fc6\u03bd\u03b1\u03b9 \u0391\u0398\u0397\u039d\u0391 \u0130stanbul \u00dfTRASSE",
    "path/to/file /usr/bin//\n// comment\r\n a/\nb a-\r\n/b //\n/ -\n\n/x",
    "e\u0301\u0301 !\u0301x \u0301 A\u0301B a\u0301B \u0915\u093f\u0924\u093e\u092c",
    "\u65e5\u672c\u8a9eText \u02b0\u02b2 Hello\u4e16\u754c \u3042Abc\u3044 x\u02b0Y",
    "I'm DON'T you're \tTab\nNew \u00a0Nbsp",
]
# Random strings over characters of every class the tekken regex tells apart (Lu, Ll, Lt,
# Lm, Lo, Mn, Mc, N, '/', punctuation, \r, \n, other spaces); their Split chunks go into
# the tekken golden as "pre_tokenized", which pretokenize_test holds the scanner to.
TEKKEN_ALPHABET = ["a", "Z", "\u00c9", "\u00e9", "\u01c5", "\u02b0", "\u65e5", "\u0301", "\u093f", "1", "\u00b2", "/",
                   ".", "!", "'", "\n", "\r", "\t", " ", " ", "\u00a0", "-", "_", "(", "A", "b"]
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4


def read_gguf_vocab(path):
    r = gguf.GGUFReader(path)

    def field(key):
        return r.fields.get(key)

    def strings(key):
        f = field(key)
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def numbers(key):
        f = field(key)
        return [f.parts[i][0].item() for i in f.data] if f else None

    def scalar(key):
        f = field(key)
        return f.parts[f.data[0]][0].item() if f else None

    v = {"tokens": strings("tokenizer.ggml.tokens"), "types": numbers("tokenizer.ggml.token_type"),
         "scores": numbers("tokenizer.ggml.scores"),
         "merges": strings("tokenizer.ggml.merges") if field("tokenizer.ggml.merges") else None,
         "bos": scalar("tokenizer.ggml.bos_token_id"), "eos": scalar("tokenizer.ggml.eos_token_id"),
         "unk": scalar("tokenizer.ggml.unknown_token_id")}
    return v


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (ByteLevel's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def rank_bpe(ranks, token, max_rank):
    """tiktoken's BPE on `token` with the ranks below max_rank."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]


def read_tekken_vocab(path):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    cfg = d["config"]
    n_special = cfg["default_num_special_tokens"]
    n_ranks = cfg["default_vocab_size"] - n_special
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in d["vocab"][:n_ranks]}
    to_char = bytes_to_unicode()
    text = lambda b: "".join(to_char[x] for x in b)  # noqa: E731
    vocab = {text(b): r + n_special for b, r in ranks.items()}
    merges = []
    for b, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(b) > 1:
            parts = rank_bpe(ranks, b, r)
            if len(parts) == 2:
                merges.append((text(parts[0]), text(parts[1])))
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"] + [f"<SPECIAL_{i}>" for i in range(5, n_special)]
    return {"pattern": cfg["pattern"], "ranks": ranks, "n_special": n_special, "vocab": vocab, "merges": merges,
            "specials": specials}


def sentencepiece_merges(tokens, scores):
    """transformers' SentencePieceExtractor.extract(vocab_scores)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    vocab_scores = {t: scores[i] for i, t in enumerate(tokens)}
    merges = []
    for merge, piece_score in vocab_scores.items():
        local = []
        for index in range(1, len(merge)):
            piece_l, piece_r = merge[:index], merge[index:]
            if piece_l in vocab and piece_r in vocab:
                local.append((piece_l, piece_r, piece_score))
        local = sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges = sorted(merges, key=lambda val: val[2], reverse=True)
    return [(a, b) for a, b, _ in merges]


def fnv1a64(chunks):
    h = 0xcbf29ce484222325
    for chunk in chunks:
        for byte in chunk:
            h ^= byte
            h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def template(bos_text, bos_id):
    return processors.TemplateProcessing(single=f"{bos_text} $A", pair=f"{bos_text} $A {bos_text}:1 $B:1",
                                         special_tokens=[(bos_text, bos_id)])


def build_tekken_nemo(v):
    assert v["pattern"] == TEKKEN_RE, "tekken.json's regex is not TEKKEN_RE"
    # The specials hold ids 0..999 in the model's vocabulary too, as Mistral-Nemo's file has them.
    model_vocab = {**{t: i for i, t in enumerate(v["specials"])}, **v["vocab"]}
    tok = Tokenizer(models.BPE(vocab=model_vocab, merges=v["merges"], ignore_merges=True))
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in v["specials"]])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(TEKKEN_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template("<s>", 1)])
    return tok, v["vocab"], v["merges"]


def check_against_tiktoken(v, tok, texts):
    """mistral-common encodes ordinary text with tiktoken on these ranks and regex."""
    try:
        import tiktoken
    except ImportError:
        print("tekken-nemo: tiktoken is not installed; not cross-checked")
        return
    enc = tiktoken.Encoding("tekken", pat_str=v["pattern"], mergeable_ranks=v["ranks"], special_tokens={})
    bad = 0
    for t in texts:
        want = [i + v["n_special"] for i in enc.encode(t, disallowed_special=())]
        got = tok.encode(t, add_special_tokens=False).ids
        if got != want and not any(s in t for s in v["specials"][:5]):
            bad += 1
            print("tekken-nemo: tokenizers and tiktoken differ on %r:\n  %s\n  %s" % (t, got, want))
    if bad:
        sys.exit("tekken-nemo: %d texts differ from tiktoken" % bad)
    print("tekken-nemo: tokenizers agrees with tiktoken on %d texts" % len(texts))


def build(family, v):
    if family == "tekken-nemo":
        return build_tekken_nemo(v)
    tokens, types = v["tokens"], v["types"]
    added_types = (UNKNOWN, CONTROL, USER_DEFINED)
    if family in ("llama3", "qwen2", "tekken"):
        vocab = {t: i for i, t in enumerate(tokens) if types[i] not in added_types}
        merges = [tuple(m.split(" ")) for m in v["merges"]]
        model = models.BPE(vocab=vocab, merges=merges, ignore_merges=(family != "qwen2"))
    else:
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = sentencepiece_merges(tokens, v["scores"])
        model = models.BPE(vocab=vocab, merges=merges, unk_token=tokens[v["unk"]], fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(model)
    # Added tokens in id order (ids past the model's vocab are given in order).
    for i, t in enumerate(tokens):
        if types[i] in added_types:
            special = types[i] != USER_DEFINED
            tok.add_tokens([AddedToken(t, special=special, normalized=False)])
    if family == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                                  template(tokens[v["bos"]], v["bos"])])
    elif family == "tekken":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(TEKKEN_RE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                                  template(tokens[v["bos"]], v["bos"])])
    elif family == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    elif family == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.post_processor = template(tokens[v["bos"]], v["bos"])
    elif family == "llama2-metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        tok.post_processor = template(tokens[v["bos"]], v["bos"])
    elif family == "gemma3":
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
        tok.post_processor = template(tokens[v["bos"]], v["bos"])
    return tok, vocab, merges


def corpus():
    texts = []
    for path in sorted(glob.glob(os.path.join(DATA, "vocab", "*.inp"))):
        with open(path, encoding="utf-8") as f:
            parts = f.read().split("\n__ggml_vocab_test__\n")
        texts += parts[:-1]
    for raw in llamacpp_corpus():
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            pass  # tokenizers takes text only
    texts += [
        "",  # nothing at all
        "e\u0301 \u212b \u1100\u1161\u11a8 \u0041\u030a\u0328 q\u0307\u0323 \u1e0b\u0323",  # not NFC
        "\ufb01 \u2460 \uff21",  # compatibility forms (NFC keeps them)
        "  two leading", "   ", "x\n\n\n\ny", "\t\tindent",
        "<s>Hello</s> <s> spaced </s>", "<|im_start|>system\nBe brief.<|im_end|>",
        "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n", "text<|eot_id|>more",
        "<unk>", "a<bos>b", "\U0001f916\U0001f916 robots \u2014 \u00bd \u00be",
        "\u0000 \u0001 \u001f control", "\u00ad soft hyphen", "\ud7a3 \u3131 \u314f hangul",
    ]
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def main():
    vocab_dir = os.environ.get("TROUPE_VOCAB_DIR")
    gemma = os.environ.get("TROUPE_GEMMA_MODEL")
    if not vocab_dir or not gemma:
        sys.exit("set TROUPE_VOCAB_DIR (scripts/fetch-vocab.sh) and TROUPE_GEMMA_MODEL (scripts/fetch-model.sh gemma-3-270m)")
    sources = {
        "llama3": ("TROUPE_VOCAB_DIR", "ggml-vocab-llama-bpe.gguf", os.path.join(vocab_dir, "ggml-vocab-llama-bpe.gguf")),
        "qwen2": ("TROUPE_VOCAB_DIR", "ggml-vocab-qwen2.gguf", os.path.join(vocab_dir, "ggml-vocab-qwen2.gguf")),
        "tekken": ("TROUPE_VOCAB_DIR", "ggml-vocab-qwen2.gguf", os.path.join(vocab_dir, "ggml-vocab-qwen2.gguf")),
        "tekken-nemo": ("TROUPE_VOCAB_DIR", "tekken_240718.json", os.path.join(vocab_dir, "tekken_240718.json")),
        "llama2": ("tests/data/vocab", "ggml-vocab-llama-spm.gguf", os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")),
        "llama2-metaspace": ("tests/data/vocab", "ggml-vocab-llama-spm.gguf",
                             os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")),
        "gemma3": ("TROUPE_GEMMA_MODEL", "", gemma),
    }
    texts = corpus()
    only = sys.argv[1:]  # families to regenerate (default: all)
    for family, (where, file, path) in sources.items():
        if only and family not in only:
            continue
        v = read_tekken_vocab(path) if family == "tekken-nemo" else read_gguf_vocab(path)
        tok, vocab, merges = build(family, v)
        family_texts = texts + (TEKKEN_TEXTS + ["[INST] Hi [/INST]</s>"] if family.startswith("tekken") else [])
        if family == "tekken-nemo":
            check_against_tiktoken(v, tok, family_texts)
        doc = json.loads(tok.to_str())
        doc["model"]["vocab"] = {}
        doc["model"]["merges"] = []
        vocab_items = sorted(vocab.items(), key=lambda kv: kv[1])
        cases = []
        for t in family_texts:
            ids = tok.encode(t, add_special_tokens=True).ids
            cases.append({"text": t, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=True)})
        golden = {
            "family": family, "gguf_from": where, "gguf_file": file, "tokenizers_version": tokenizers.__version__,
            "vocab_count": len(vocab_items),
            "vocab_fnv1a64": fnv1a64(t.encode() + b"\0" + str(i).encode() + b"\n" for t, i in vocab_items),
            "merges_count": len(merges),
            "merges_fnv1a64": fnv1a64(a.encode() + b"\0" + b.encode() + b"\n" for a, b in merges),
            "tokenizer_json": doc, "cases": cases,
        }
        if family == "tekken":
            rng = random.Random(22)
            split = pre_tokenizers.Split(Regex(TEKKEN_RE), behavior="isolated", invert=False)
            randoms = ["".join(rng.choice(TEKKEN_ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(1500)]
            golden["pre_tokenized"] = [{"text": t, "chunks": [c for c, _ in split.pre_tokenize_str(t)]}
                                       for t in randoms]
        out = os.path.join(HERE, f"hf_tokenizers_{family}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"{out}: {len(cases)} cases, {len(vocab_items)} vocab, {len(merges)} merges")


if __name__ == "__main__":
    main()
