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
# Version 2's fixed state part: seed, batch, n_fit, n_val, lr, reg, ranks, strategy, gemm,
# shuffle, data_crc, epoch, batch_done: 80 bytes.
STATE = struct.Struct("<4Q2d6IQ")


def read_checkpoint(path):
    """Returns dict(W1, b1, W2, b2) of numpy arrays (and "state", a dict, for version 2);
    raises ValueError on a bad file."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < HEADER.size or buf[:8] != MAGIC:
        raise ValueError(f"{path}: not a checkpoint file")
    _, version, precision, D, H, C, reserved = HEADER.unpack_from(buf)
    if version not in (1, 2):
        raise ValueError(f"{path}: unsupported version {version}")
    if precision not in (4, 8) or D == 0 or H == 0 or C == 0 or reserved != 0:
        raise ValueError(f"{path}: corrupt header")
    counts = [H * D, H, C * H, C]  # W1, b1, W2, b2
    tensors_end = HEADER.size + precision * sum(counts)
    expected = tensors_end + 4
    if version == 2:  # the training state: 80 fixed bytes, 16 per rank, 24 per epoch
        if len(buf) < tensors_end + STATE.size + 4:
            raise ValueError(f"{path}: truncated training state")
        fixed = STATE.unpack_from(buf, tensors_end)
        expected += STATE.size + 16 * fixed[6] + 24 * fixed[11]
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
    if version == 2:
        names = ("seed", "batch", "n_fit", "n_val", "lr", "reg", "ranks", "strategy", "gemm",
                 "shuffle", "data_crc", "epoch", "batch_done")
        state = dict(zip(names, STATE.unpack_from(buf, offset)))
        offset += STATE.size
        state["rank_sums"] = [struct.unpack_from("<dQ", buf, offset + 16 * r) for r in range(state["ranks"])]
        offset += 16 * state["ranks"]
        state["epochs"] = [struct.unpack_from("<3d", buf, offset + 24 * e) for e in range(state["epoch"])]
        arrays["state"] = state
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
    if "state" in p:
        st = p["state"]
        print(f"state: {st['epoch']} epochs and {st['batch_done']} batches done, {st['ranks']} ranks, "
              f"batch {st['batch']}, lr {st['lr']:g}")
        for i, (loss, tr, va) in enumerate(st["epochs"], 1):
            print(f"  epoch {i}: loss {loss:.5f}  train acc {tr:.4f}  val acc {va:.4f}")
    print("CRC32: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
