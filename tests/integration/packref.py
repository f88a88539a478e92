# SPDX-License-Identifier: MIT
"""A plain-Python reference of pack views (core/pack.h) and of the views' generator and shards
(core/rng.h, core/view.c), written from their descriptions: the tests hold the mount's files to
it byte for byte."""

import numpy as np

M64 = (1 << 64) - 1


def _splitmix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    """xoshiro256** seeded from (seed, epoch) through splitmix64."""

    def __init__(self, seed, epoch):
        _, e = _splitmix(epoch)
        x = seed ^ e
        self.s = []
        for _ in range(4):
            x, v = _splitmix(x)
            self.s.append(v)

    def next(self):
        s = self.s
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        m = self.next() * n
        low = m & M64
        if low < n:
            t = ((1 << 64) - n) % n
            while low < t:
                m = self.next() * n
                low = m & M64
        return m >> 64

    def shuffle(self, a):
        for i in range(len(a), 1, -1):
            j = self.below(i)
            a[i - 1], a[j] = a[j], a[i - 1]


def shard(order, rank=0, world=1, start=0, stride=0, drop_last=False):
    """A view's shard of an order (core/view.c: contiguous, or interleaved with stride)."""
    n = len(order)
    if stride:
        first = min(start, n)
        left = n - first
        per = left // world + (1 if not drop_last and left % world else 0) if left else 0
        full, tail = per // stride, per - (per // stride) * stride
        out = []
        for i in range(per):
            e = ((i // stride) * world * stride + rank * stride + i % stride if i < full * stride
                 else full * world * stride + rank * tail + (i - full * stride))
            out.append(order[first + e % left])
        return out
    per = n // world + (1 if not drop_last and n % world else 0) if n else 0
    first = min(start, per)
    return [order[(rank * per + first + i) % n] for i in range(per - first)]


def pack(docs, seq, eos=None, seed=None, epoch=None, rows=None, **shard_args):
    """(tokens, segments, doc) of views/pack=seq,... over documents docs (1-D int arrays): all
    of them, or those numbered in rows, in that order (where=, a saved query)."""
    shuffle = seed is not None or epoch is not None
    rng = Rng(seed or 0, epoch or 0)
    order = list(range(len(docs))) if rows is None else [int(r) for r in rows]
    if shuffle:
        rng.shuffle(order)
    stream, owner = [], []
    for pos, d in enumerate(order):
        toks = [int(t) for t in docs[d]] + ([eos] if eos is not None else [])
        for o, t in enumerate(toks):
            stream.append(t)
            owner.append((pos, d, o))
    n = (len(stream) - 1) // seq if stream else 0
    samples = list(range(n))
    if shuffle:
        rng.shuffle(samples)
    rows = shard(samples, **shard_args)
    dt = np.asarray(docs[0]).dtype if len(docs) else np.int64
    tokens = np.zeros((len(rows), seq + 1), dt)
    segments = np.zeros((len(rows), seq + 1), np.uint16 if seq + 1 <= 65536 else np.uint32)
    doc = np.zeros((len(rows), 2), np.int64)
    for i, k in enumerate(rows):
        w = slice(k * seq, k * seq + seq + 1)
        tokens[i] = stream[w]
        pos = [p for p, _, _ in owner[w]]
        segments[i] = np.cumsum([0] + [int(a != b) for a, b in zip(pos, pos[1:])])
        doc[i] = owner[k * seq][1:]
    return tokens, segments, doc, n


def blend(weights, counts, epoch=0):
    """Megatron-LM's build_blending_indices over a mixture epoch of sum(counts) samples, and
    each mixed sample's sample number in its source (core/mixview.h)."""
    total = sum(weights)
    w = [x / total for x in weights]
    n = sum(counts)

    def run():
        taken, out = [0] * len(w), []
        for j in range(n):
            x = float(max(j, 1))
            best = max(range(len(w)), key=lambda i: (w[i] * x - taken[i], -i))
            out.append((best, taken[best]))
            taken[best] += 1
        return out, taken

    order, per = run()
    return [(s, (epoch * per[s] + c) % counts[s]) for s, c in order]
