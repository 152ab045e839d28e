#!/usr/bin/python3
"""Reads an nn_train checkpoint (format: docs/checkpoint.md) with numpy, checks it like
the C++ loader does, and prints the shapes and the CRC verdict.

Usage: /usr/bin/python3 docs/read_checkpoint.py CHECKPOINT   (needs python3-numpy)
Exit status: 0 if the file is valid, 1 if not. Import read_checkpoint() to use the arrays.
"""
import struct
import sys
import zlib

import numpy as np

MAGIC = b"NNMNIST\0"
HEADER = struct.Struct("<8s6I")  # magic, version, precision, D, H, C, reserved: 32 bytes


def read_checkpoint(path):
    """Returns dict(W1, b1, W2, b2) of numpy arrays; raises ValueError on a bad file."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < HEADER.size or buf[:8] != MAGIC:
        raise ValueError(f"{path}: not a checkpoint file")
    _, version, precision, D, H, C, reserved = HEADER.unpack_from(buf)
    if version != 1:
        raise ValueError(f"{path}: unsupported version {version}")
    if precision not in (4, 8) or D == 0 or H == 0 or C == 0 or reserved != 0:
        raise ValueError(f"{path}: corrupt header")
    counts = [H * D, H, C * H, C]  # W1, b1, W2, b2
    expected = HEADER.size + precision * sum(counts) + 4
    if len(buf) != expected:
        raise ValueError(f"{path}: {len(buf)} bytes, the header needs {expected}")
    (stored_crc,) = struct.unpack_from("<I", buf, len(buf) - 4)
    if zlib.crc32(buf[:-4]) != stored_crc:
        raise ValueError(f"{path}: corrupt (CRC mismatch)")

    dtype = np.dtype("<f4" if precision == 4 else "<f8")  # little-endian IEEE 754
    shapes = [(H, D), (H,), (C, H), (C,)]
    arrays, offset = {}, HEADER.size
    for name, count, shape in zip(("W1", "b1", "W2", "b2"), counts, shapes):
        flat = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
        # Column-major on disk (Armadillo's order): order="F" gives W1[i, j] = weight of
        # input j into hidden unit i, as in z1 = W1 @ x + b1.
        arrays[name] = flat.reshape(shape, order="F")
        offset += count * precision
    return arrays


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        p = read_checkpoint(argv[1])
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name in ("W1", "b1", "W2", "b2"):
        a = p[name]
        print(f"{name}: shape {a.shape} {a.dtype}  min {a.min():.6g}  max {a.max():.6g}")
    print("CRC32: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
