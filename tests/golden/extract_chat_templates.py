#!/usr/bin/env python3
"""Copies the tokenizer.chat_template of GGUF files into tests/data/chat_templates/NAME.jinja,
with the BOS/EOS token texts in NAME.tokens.json, so tests need no model file.

usage: extract_chat_templates.py NAME=FILE.gguf ...
"""
import json
import os
import struct
import sys

# GGUF value types (gguf spec): 0 u8 1 i8 2 u16 3 i16 4 u32 5 i32 6 f32 7 bool 8 string 9 array 10 u64 11 i64 12 f64
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read(f, fmt):
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, f.read(size))[0]


def _string(f):
    n = _read(f, "<Q")
    return f.read(n).decode("utf-8")


def _value(f, t, keep):
    if t in _SCALARS:
        return _read(f, _SCALARS[t])
    if t == 8:
        return _string(f)
    if t == 9:
        et = _read(f, "<I")
        n = _read(f, "<Q")
        items = [_value(f, et, keep) for _ in range(n)]
        return items if keep else None
    raise ValueError(f"unknown GGUF value type {t}")


def metadata(path):
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = _read(f, "<I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old")
        _read(f, "<Q")  # tensor count
        n_kv = _read(f, "<Q")
        kv = {}
        for _ in range(n_kv):
            key = _string(f)
            t = _read(f, "<I")
            kv[key] = _value(f, t, keep=key == "tokenizer.ggml.tokens")
        return kv


def main(argv):
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat_templates")
    for spec in argv:
        name, path = spec.split("=", 1)
        kv = metadata(path)
        tmpl = kv.get("tokenizer.chat_template")
        if tmpl is None:
            print(f"{name}: {path} has no tokenizer.chat_template")
            continue
        tokens = kv.get("tokenizer.ggml.tokens") or []
        special = {}
        for role in ("bos", "eos"):
            tid = kv.get(f"tokenizer.ggml.{role}_token_id")
            special[f"{role}_token"] = tokens[tid] if tid is not None and tid < len(tokens) else ""
        with open(os.path.join(out_dir, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(tmpl)
        with open(os.path.join(out_dir, name + ".tokens.json"), "w", encoding="utf-8") as f:
            json.dump(special, f, ensure_ascii=False)
            f.write("\n")
        print(f"{name}: {len(tmpl)} chars, {special}")


if __name__ == "__main__":
    main(sys.argv[1:])
