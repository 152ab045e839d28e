"""What the peers (bench/peer_torch.py, peer_jax.py, peer_tf.py) share: the IDX files, read
as nn_train reads them, and the options every peer takes with nn_train's meaning and defaults.
Imported from the peers' own directory (python puts a script's directory first on sys.path)."""
import gzip
import os
import struct
import sys

import numpy as np


def read_idx(directory, stem):
    """An IDX file (raw, or gzip by content) as a numpy uint8 array of its declared shape."""
    path = os.path.join(directory, stem)
    if not os.path.exists(path):
        path += ".gz"
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit("error: %s: not an unsigned-byte IDX file" % path)
    ndim = raw[3]
    dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        sys.exit("error: %s: %d bytes of data, header says %s" % (path, data.size, dims))
    return data.reshape(dims)


def load_split(directory, split):
    """(images as rows of D bytes, labels) of split "train" or "t10k"."""
    images = read_idx(directory, split + "-images-idx3-ubyte")
    labels = read_idx(directory, split + "-labels-idx1-ubyte")
    if images.shape[0] != labels.shape[0]:
        sys.exit("error: %s: %d images but %d labels" % (split, images.shape[0], labels.shape[0]))
    return images.reshape(images.shape[0], -1), labels


def add_common_args(ap):
    """The data, network and SGD options, as nn_train's (--data ... --no-shuffle)."""
    ap.add_argument("--data", default="data/current")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--reg", type=float, default=1e-4)
    ap.add_argument("--train-size", type=int, default=0, help="first N training images (0 = all)")
    ap.add_argument("--test-size", type=int, default=0, help="first N test images (0 = all)")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-shuffle", action="store_true")


def load_data(a):
    """nn_train's split for options `a`: the first --train-size training images (0 = all), the
    last --val-fraction of them held out, the first --test-size test images. Returns
    (train_x, train_y, test_x, test_y, n_fit, n_val, n_test); exits with one line on bad sizes."""
    train_x, train_y = load_split(a.data, "train")
    test_x, test_y = load_split(a.data, "t10k")
    n_used = a.train_size or train_x.shape[0]
    if n_used > train_x.shape[0]:
        sys.exit("error: --train-size %d exceeds the %d training images" % (n_used, train_x.shape[0]))
    n_val = int(n_used * a.val_fraction)
    n_fit = n_used - n_val
    n_test = min(a.test_size or test_x.shape[0], test_x.shape[0])
    if a.batch > n_fit:
        sys.exit("error: --batch %d exceeds the %d training images" % (a.batch, n_fit))
    return train_x, train_y, test_x, test_y, n_fit, n_val, n_test
