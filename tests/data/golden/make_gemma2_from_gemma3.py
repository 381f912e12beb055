#!/usr/bin/env python3
"""Derive a gemma2 GGUF from a gemma3 one, for a gemma2 reference without a gemma2
download: every tensor but the q/k norms (gemma2 has none) copied byte for byte, the
gemma3.* keys renamed gemma2.*, and gemma2's own keys set: attention logit
soft-capping 50, final logit soft-capping 30, a sliding window of 512 on the even
layers (pattern 2) and one RoPE base for all layers. The weights were not trained for
this architecture, but the file is a valid gemma2 model that llama.cpp and troupe both
run, and its outputs are far from uniform, so greedy tokens compare meaningfully.

Without gemma3's q/k norms the raw attention logits are large enough that the
result depends on rounding (llama.cpp's own tokens change with flash attention
and the KV cache type); QK_SCALE (default 1) multiplies the block scales of every
attn_q and attn_k (Q5_0 or Q8_0 blocks), so the logits shrink by QK_SCALE^2 and
the model becomes well-conditioned.

usage: make_gemma2_from_gemma3.py IN.gguf OUT.gguf [QK_SCALE]
"""
import struct, sys

ALIGN = 32
SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}

class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0
    def get(self, fmt):
        v = struct.unpack_from('<' + fmt, self.d, self.o)
        self.o += struct.calcsize('<' + fmt)
        return v[0]
    def string(self):
        n = self.get('Q')
        s = self.d[self.o:self.o + n]
        self.o += n
        return s.decode('utf-8')
    def skip_value(self, t):
        if t == 8:
            self.string()
        elif t == 9:
            et, n = self.get('I'), self.get('Q')
            for _ in range(n):
                self.skip_value(et)
        else:
            self.o += struct.calcsize('<' + SCALAR[t])

def enc_string(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b

BLOCK_BYTES = {6: 22, 8: 34}  # Q5_0, Q8_0: an f16 scale first, then 32 elements' codes

def scale_blocks(chunk, ttype, dims, factor):
    if ttype not in BLOCK_BYTES:
        sys.exit(f"cannot scale a tensor of type {ttype} (Q5_0 and Q8_0 only)")
    n_blocks = dims[0] * dims[1] // 32
    bb = BLOCK_BYTES[ttype]
    out = bytearray(chunk)
    for b in range(n_blocks):
        o = b * bb
        (d,) = struct.unpack_from('<e', out, o)
        struct.pack_into('<e', out, o, d * factor)  # rounded to f16 (nearest even)
    return bytes(out)

def main():
    src, dst = sys.argv[1], sys.argv[2]
    qk_scale = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    data = open(src, 'rb').read()
    r = Reader(data)
    assert r.get('4s') == b'GGUF'
    version, n_tensors, n_kv = r.get('I'), r.get('Q'), r.get('Q')
    kvs = []  # (key, raw value bytes with type)
    for _ in range(n_kv):
        key = r.string()
        start = r.o
        t = r.get('I')
        r.skip_value(t)
        kvs.append((key, data[start:r.o]))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.get('I')
        dims = [r.get('Q') for _ in range(nd)]
        ttype, off = r.get('I'), r.get('Q')
        infos.append((name, dims, ttype, off))
    base = (r.o + ALIGN - 1) // ALIGN * ALIGN
    ends = sorted(off for _, _, _, off in infos) + [len(data) - base]

    def size_of(off):
        return ends[ends.index(off) + 1] - off  # up to the next tensor (alignment padding included)

    out_kv = []
    arch_seen = False
    for key, raw in kvs:
        if key == 'general.architecture':
            raw = struct.pack('<I', 8) + enc_string('gemma2')
            arch_seen = True
        elif key.startswith('gemma3.'):
            if key in ('gemma3.attention.sliding_window', 'gemma3.attention.sliding_window_pattern',
                       'gemma3.rope.freq_base_swa', 'gemma3.final_logit_softcapping'):
                continue  # set below
            key = 'gemma2.' + key[len('gemma3.'):]
        out_kv.append((key, raw))
    assert arch_seen
    out_kv += [('gemma2.attention.sliding_window', struct.pack('<II', 4, 512)),
               ('gemma2.attn_logit_softcapping', struct.pack('<If', 6, 50.0)),
               ('gemma2.final_logit_softcapping', struct.pack('<If', 6, 30.0))]
    kept = [i for i in infos if not i[0].endswith(('attn_q_norm.weight', 'attn_k_norm.weight'))]

    header = bytearray(b'GGUF' + struct.pack('<IQQ', version, len(kept), len(out_kv)))
    for key, raw in out_kv:
        header += enc_string(key) + raw
    offsets, pos = [], 0
    for name, dims, ttype, off in kept:
        offsets.append(pos)
        pos += (size_of(off) + ALIGN - 1) // ALIGN * ALIGN
    for (name, dims, ttype, off), new_off in zip(kept, offsets):
        header += enc_string(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        header += struct.pack('<IQ', ttype, new_off)
    header += b'\0' * ((-len(header)) % ALIGN)
    with open(dst, 'wb') as f:
        f.write(header)
        for (name, dims, ttype, off), new_off in zip(kept, offsets):
            chunk = data[base + off: base + off + size_of(off)]
            if qk_scale != 1.0 and name.endswith(('attn_q.weight', 'attn_k.weight')):
                chunk = scale_blocks(chunk, ttype, dims, qk_scale)
            f.write(chunk + b'\0' * ((-len(chunk)) % ALIGN))

if __name__ == '__main__':
    main()
