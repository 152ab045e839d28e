#!/usr/bin/env python3
# Writes the fuzzers' seed corpora, tests/fuzz/corpus/{idx,checkpoint}/: tiny valid IDX files (raw,
# gzip, two-member gzip) and valid checkpoints (float, double; version 1, and version 2 with a
# training state); and the hand-made limit probes in
# tests/fuzz/regressions/*/limit-* (headers declaring huge sizes in tiny files), which make test
# replays with the fuzzers' fixed crashers. Deterministic (gzip mtime 0): python3 tests/fuzz/make_seeds.py.
# All outputs are committed; the fuzzers add new inputs to their working corpus under build/ only.
import gzip
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data, kind="corpus"):
    d = os.path.join(HERE, kind, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


def idx(magic, dims, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload


def checkpoint(D, H, C, precision):
    n = H * D + H + C * H + C
    vals = [(k * 0.731 - 17.5) / (1 + k % 13) for k in range(n)]
    vals[3] = -0.0
    fmt = "<%d%s" % (n, "f" if precision == 4 else "d")
    body = b"NNMNIST\0" + struct.pack("<6I", 1, precision, D, H, C, 0) + struct.pack(fmt, *vals)
    return body + struct.pack("<I", zlib.crc32(body))


pixels = bytes((i * 37 + i // 7) & 0xFF for i in range(3 * 4 * 5))
images = idx(0x803, [3, 4, 5], pixels)
labels = idx(0x801, [5], bytes([7, 0, 9, 3, 1]))
write("idx", "images-3x4x5", images)
write("idx", "images-3x4x5.gz", gz(images))
write("idx", "images-3x4x5-two-members.gz", gz(images[:21]) + gz(images[21:]))
write("idx", "images-1x28x28.gz", gz(idx(0x803, [1, 28, 28], bytes(range(256)) * 3 + bytes(16))))
write("idx", "labels-5", labels)
write("idx", "labels-5.gz", gz(labels))

write("checkpoint", "float-3-2-2", checkpoint(3, 2, 2, 4))
write("checkpoint", "double-3-2-2", checkpoint(3, 2, 2, 8))
write("checkpoint", "float-5-4-3", checkpoint(5, 4, 3, 4))


def checkpoint_v2(D, H, C, precision, ranks, strategy, epoch, batch_done):
    """Version 2 (docs/checkpoint.md): the v1 tensors, then a training state, then the CRC."""
    v1 = checkpoint(D, H, C, precision)[:-4]
    body = b"NNMNIST\0" + struct.pack("<I", 2) + v1[12:]
    n_fit, n_val, B = 900, 100, 50  # batch_done < ceil(n_fit / B) = 18
    body += struct.pack("<4Q2d", 7, B, n_fit, n_val, 0.5, 1e-4)
    body += struct.pack("<5I", ranks, strategy, 4, 1, 0x1234ABCD)  # ranks strategy gemm shuffle data-CRC
    body += struct.pack("<IQ", epoch, batch_done)
    for r in range(ranks):  # the epoch so far: cross-entropy sum, correct count
        body += struct.pack("<dQ", 10.25 + r, 17 + r)
    for e in range(epoch):  # finished epochs: loss (a float value), train and validation accuracy
        body += struct.pack("<3d", 1.5 / (e + 1), 0.6 + 0.01 * e, 0.65 + 0.02 * e)
    return body + struct.pack("<I", zlib.crc32(body))


write("checkpoint", "v2-float-3-2-2-p2-epoch1", checkpoint_v2(3, 2, 2, 4, ranks=2, strategy=0, epoch=1, batch_done=5))
write("checkpoint", "v2-double-5-4-3-p3-model-epoch2", checkpoint_v2(5, 4, 3, 8, ranks=3, strategy=2, epoch=2, batch_done=0))

# Limit probes: each must be refused before anything near the declared size is allocated.
def probe(target, name, data):
    write(target, "limit-" + name, data, kind="regressions")


probe("idx", "images-count-4294967295-in-20-bytes", idx(0x803, [0xFFFFFFFF, 28, 28], b"\0" * 4))
probe("idx", "images-count-1073741824-in-20-bytes", idx(0x803, [1 << 30, 28, 28], b"\0" * 4))
probe("idx", "images-count-1073741824.gz", gz(idx(0x803, [1 << 30, 28, 28], b"\0" * 4)))
probe("idx", "images-2147483647-of-4294967295-squared", idx(0x803, [0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF], b""))
probe("idx", "labels-count-2147483647-in-12-bytes", idx(0x801, [0x7FFFFFFF], b"\1" * 4))
# 1 MiB of zeros compresses ~1000:1: a gzip that inflates far beyond its size, but still
# short of what its header declares (2147483647 labels).
probe("idx", "labels-count-2147483647-deflate-bomb.gz", gz(idx(0x801, [0x7FFFFFFF], bytes(1 << 20))))


def header(D, H, C, precision, version=1, reserved=0):
    return b"NNMNIST\0" + struct.pack("<6I", version, precision, D, H, C, reserved)


probe("checkpoint", "D-1073741824-in-36-bytes", header(1 << 30, 4, 3, 4) + b"\0" * 4)
probe("checkpoint", "D-H-2147483647-double", header(0x7FFFFFFF, 0x7FFFFFFF, 10, 8) + b"\0" * 4)
probe("checkpoint", "D-4294967295", header(0xFFFFFFFF, 1, 1, 4) + b"\0" * 4)
probe("checkpoint", "H-C-2147483647-float", header(1, 0x7FFFFFFF, 0x7FFFFFFF, 4) + b"\0" * 4)
