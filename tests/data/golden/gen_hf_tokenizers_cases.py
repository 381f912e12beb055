#!/usr/bin/env python3
"""Regenerate hf_tokenizers_{llama3,qwen2,llama2,llama2-metaspace,gemma3}.json:
Hugging Face `tokenizers`' ids and decoded text for a corpus of hard strings,
on tokenizer.json files built here, independently of troupe, with the
library's own builders from the vocabularies of llama.cpp's vocab GGUFs and
the Gemma 3 GGUF, in the layouts real models of each family ship:

  llama3    ggml-vocab-llama-bpe.gguf: BPE (ignore_merges), Split(Llama 3 regex)
            + ByteLevel, ByteLevel decoder, TemplateProcessing "<|begin_of_text|> $A"
  qwen2     ggml-vocab-qwen2.gguf: NFC, Split(Qwen2 regex) + ByteLevel, no BOS
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
(tests/runtime/request/tokenizer/hf_tokenizer_json_test.cpp) fills vocab and
merges from the GGUF, checks the hashes, and reads the file.

Each case: "text", "ids" (encode with add_special_tokens), "decoded"
(decode(ids, skip_special_tokens=True)).

    ~/.cache/troupe/hf-tok-venv/bin/python gen_hf_tokenizers_cases.py

Needs `pip install tokenizers gguf` in that venv, TROUPE_VOCAB_DIR
(scripts/fetch-vocab.sh) and TROUPE_GEMMA_MODEL (scripts/fetch-model.sh gemma-3-270m).
"""
import glob
import json
import os
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


def build(family, v):
    tokens, types = v["tokens"], v["types"]
    added_types = (UNKNOWN, CONTROL, USER_DEFINED)
    if family in ("llama3", "qwen2"):
        vocab = {t: i for i, t in enumerate(tokens) if types[i] not in added_types}
        merges = [tuple(m.split(" ")) for m in v["merges"]]
        model = models.BPE(vocab=vocab, merges=merges, ignore_merges=(family == "llama3"))
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
        "llama2": ("tests/data/vocab", "ggml-vocab-llama-spm.gguf", os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")),
        "llama2-metaspace": ("tests/data/vocab", "ggml-vocab-llama-spm.gguf",
                             os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")),
        "gemma3": ("TROUPE_GEMMA_MODEL", "", gemma),
    }
    texts = corpus()
    for family, (where, file, path) in sources.items():
        v = read_gguf_vocab(path)
        tok, vocab, merges = build(family, v)
        doc = json.loads(tok.to_str())
        doc["model"]["vocab"] = {}
        doc["model"]["merges"] = []
        vocab_items = sorted(vocab.items(), key=lambda kv: kv[1])
        cases = []
        for t in texts:
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
        out = os.path.join(HERE, f"hf_tokenizers_{family}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"{out}: {len(cases)} cases, {len(vocab_items)} vocab, {len(merges)} merges")


if __name__ == "__main__":
    main()
