// GoogleTest suite for src/io/idx.{h,cpp}: raw and gzip round trips and one test per failure class
// (the in-memory parsers, the fuzzer's saved inputs, normalisation, file lookup and real
// Fashion-MNIST: test_idx_parsers.cpp). Fixtures go to a fresh mkdtemp directory per test, so 1-4
// MPI ranks can run the suite at once. No main() here (the project links its own); standalone:
// link -lgtest -lgtest_main -lz -pthread with test_idx_parsers.cpp.
#include "idx_test_util.h"

namespace {


TEST_F(IdxTest, RawAndGzipRoundTripMatch) {
  const Bytes img = image_file(3, 4, 5), lab = label_file({7, 0, 9});
  auto raw = load_dataset(file("i", img), file("l", lab), 20);
  auto gz = load_dataset(file("i.gz", gzip(img)), file("l.gz", gzip(lab)), 20);
  EXPECT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw.images.count, 3u);
  EXPECT_EQ(raw.images.rows, 4u);
  EXPECT_EQ(raw.images.cols, 5u);
  EXPECT_EQ(raw.images.dim(), 20u);
  EXPECT_EQ(raw.images.pixels, Bytes(img.begin() + 16, img.end()));
  EXPECT_EQ(raw.labels, (Bytes{7, 0, 9}));
  EXPECT_EQ(gz.images.pixels, raw.images.pixels);
  EXPECT_EQ(gz.labels, raw.labels);
  EXPECT_EQ(gz.images_path, dir_ + "/i.gz");
  EXPECT_EQ(gz.labels_path, dir_ + "/l.gz");
  EXPECT_EQ(load_images(dir_ + "/i", 0).pixels, raw.images.pixels);  // 0 accepts any size
}

TEST_F(IdxTest, ContentNotNameDecidesGzip) {
  const Bytes img = image_file(2, 3, 3);
  auto p = file("plain-name-idx3-ubyte", gzip(img));
  EXPECT_EQ(load_images(p, 9).pixels, Bytes(img.begin() + 16, img.end()));
}

TEST_F(IdxTest, MultiMemberGzipIsReadWhole) {
  const Bytes img = image_file(4, 2, 8);
  Bytes cat = gzip(Bytes(img.begin(), img.begin() + 21));  // split mid-header and mid-image
  Bytes second = gzip(Bytes(img.begin() + 21, img.end()));
  cat.insert(cat.end(), second.begin(), second.end());
  EXPECT_EQ(load_images(file("multi.gz", cat), 16).pixels, Bytes(img.begin() + 16, img.end()));
}

TEST_F(IdxTest, MissingFileOrDirectory) {
  EXPECT_IDX_ERROR(load_images(dir_ + "/nope", 784), "/nope", "cannot open");
  EXPECT_IDX_ERROR(load_labels(dir_ + "/nope.gz"), "/nope.gz", "No such file");
  EXPECT_IDX_ERROR(load_images(dir_, 784), dir_, "is a directory");
}

TEST_F(IdxTest, EmptyFile) {
  auto p = file("empty", {});
  EXPECT_IDX_ERROR(load_images(p, 784), p, "file is empty");
}

TEST_F(IdxTest, BadMagic) {
  const std::string text = "hello world!!!!!";
  auto p = file("text", Bytes(text.begin(), text.end()));
  EXPECT_IDX_ERROR(load_images(p, 784), p,
                   "bad magic number: expected 0x00000803, found 0x68656C6C: not an IDX image file");
  EXPECT_IDX_ERROR(load_labels(p), p, "expected 0x00000801, found 0x68656C6C: not an IDX label file");
  auto q = file("dims2", idx_header(0x802, {1, 1}));
  EXPECT_IDX_ERROR(load_images(q, 0), q, "2 dimensions, expected 3");
}

TEST_F(IdxTest, ImagesAndLabelsSwapped) {
  auto img = file("img", image_file(2, 2, 2)), lab = file("lab", label_file({1, 2}));
  EXPECT_IDX_ERROR(load_images(lab, 4), lab, "labels file given where images expected");
  EXPECT_IDX_ERROR(load_labels(img), img, "images file given where labels expected");
  // Swapped arguments to load_dataset fail on the first file.
  EXPECT_IDX_ERROR(load_dataset(lab, img, 4), lab, "expected 0x00000803, found 0x00000801");
}

TEST_F(IdxTest, UnsupportedDataType) {
  Bytes b = idx_header(0x0D03, {1, 2, 2});
  b.resize(b.size() + 16);
  auto p = file("float", b);
  EXPECT_IDX_ERROR(load_images(p, 4), p, "unsupported IDX data type 0x0D (float32)");
  auto q = file("weird", idx_header(0x4201, {1}));
  EXPECT_IDX_ERROR(load_labels(q), q, "unsupported IDX data type 0x42");
}

TEST_F(IdxTest, ImageSizeDiffersFromExpected) {
  auto p = file("small", image_file(2, 4, 5));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "image size 4x5 = 20 pixels, expected 784");
  auto q = file("flat", idx_header(0x803, {1, 0, 28}));
  EXPECT_IDX_ERROR(load_images(q, 0), q, "image size 0x28 is empty");
}

TEST_F(IdxTest, TruncatedRaw) {
  Bytes b = image_file(3, 4, 5);  // 16 + 60 bytes
  b.resize(b.size() - 5);
  auto p = file("cut", b);
  EXPECT_IDX_ERROR(load_images(p, 20), p, "truncated: expected 76 bytes (per the header), file has 71");
  auto q = file("hdr", Bytes(b.begin(), b.begin() + 10));
  EXPECT_IDX_ERROR(load_images(q, 20), q, "truncated: the IDX header needs 16 bytes, file has 10");
  auto r = file("lab", label_file({1, 2, 3, 4}));
  std::filesystem::resize_file(r, 10);
  EXPECT_IDX_ERROR(load_labels(r), r, "truncated: expected 12 bytes");
}

TEST_F(IdxTest, TruncatedGzip) {
  Bytes b = image_file(3, 4, 5);
  b.resize(b.size() - 5);
  auto p = file("short.gz", gzip(b));  // a complete gzip stream of a short IDX file
  EXPECT_IDX_ERROR(load_images(p, 20), p,
                   "truncated: expected 76 bytes (per the header), decompressed data has 71");
  Bytes z = gzip(image_file(3, 4, 5));
  z.resize(z.size() - 6);  // a gzip stream cut short (lost trailer)
  auto q = file("cut.gz", z);
  EXPECT_IDX_ERROR(load_images(q, 20), q, "gzip stream is truncated");
  z.resize(15);  // cut inside the deflate data
  auto r = file("cut2.gz", z);
  EXPECT_THROW(load_images(r, 20), IdxError);
}

TEST_F(IdxTest, TrailingBytes) {
  Bytes b = image_file(2, 3, 3);
  b.insert(b.end(), {1, 2, 3});
  auto p = file("extra", b);
  EXPECT_IDX_ERROR(load_images(p, 9), p, "3 trailing bytes after the data (expected 34 bytes");
  auto q = file("extra.gz", gzip(b));
  EXPECT_IDX_ERROR(load_images(q, 9), q, "3 trailing bytes");
  Bytes l = label_file({1, 2});
  l.push_back(0);
  auto r = file("lextra", l);
  EXPECT_IDX_ERROR(load_labels(r), r, "1 trailing bytes");
}

TEST_F(IdxTest, ZeroImagesOrLabels) {
  auto p = file("none", image_file(0, 28, 28));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "contains zero images");
  auto q = file("none.gz", gzip(label_file({})));
  EXPECT_IDX_ERROR(load_labels(q), q, "contains zero labels");
}

TEST_F(IdxTest, LabelOutOfRange) {
  auto p = file("lab", label_file({1, 2, 10, 3, 255}));
  EXPECT_IDX_ERROR(load_labels(p), p, "label 10 at index 2 is out of range 0..9");
}

TEST_F(IdxTest, CountMismatch) {
  auto img = file("img", image_file(3, 2, 2)), lab = file("lab", label_file({1, 2, 3, 4}));
  EXPECT_IDX_ERROR(load_dataset(img, lab, 4), img, "image count 3 does not match label count 4 in " + lab);
}

TEST_F(IdxTest, GzNameButNotGzip) {
  auto p = file("raw.gz", image_file(1, 2, 2));
  EXPECT_IDX_ERROR(load_images(p, 4), p, ".gz file is not gzip-compressed");
}

TEST_F(IdxTest, CorruptGzip) {
  const Bytes good = gzip(image_file(5, 8, 8));
  Bytes crc = good;
  crc[crc.size() - 8] ^= 0xFF;  // CRC32 trailer: data decodes fine but fails the check
  auto p = file("crc.gz", crc);
  EXPECT_IDX_ERROR(load_images(p, 64), p, "corrupt gzip data (incorrect data check)");
  Bytes method = good;
  method[2] = 7;  // compression method must be 8 (deflate)
  auto q = file("method.gz", method);
  EXPECT_IDX_ERROR(load_images(q, 64), q, "corrupt gzip data");
  Bytes garbage = good;
  garbage.insert(garbage.end(), {0, 0, 0, 0});
  auto r = file("garbage.gz", garbage);
  EXPECT_IDX_ERROR(load_images(r, 64), r, "4 bytes of trailing garbage after the gzip stream");
  Bytes body = good;
  for (std::size_t i = 10; i < body.size() - 8; ++i) body[i] = 0xFF;  // reserved block type 3
  auto s = file("body.gz", body);
  EXPECT_IDX_ERROR(load_images(s, 64), s, "corrupt gzip data");
}

TEST_F(IdxTest, HugeDeclaredCountFailsWithoutAllocating) {
  auto p = file("huge", idx_header(0x803, {0xFFFFFFFFu, 28, 28}));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "image count 4294967295 exceeds the limit of 2147483647");
  auto q = file("big", idx_header(0x803, {1u << 30, 28, 28}));  // plausible count, ~800 GB of pixels
  EXPECT_IDX_ERROR(load_images(q, 784), q, "truncated: expected 841813590032 bytes");
  auto r = file("big.gz", gzip(idx_header(0x803, {1u << 30, 28, 28})));
  EXPECT_IDX_ERROR(load_images(r, 784), r, "compressed input is too small");
  auto s = file("wide", idx_header(0x803, {0x7FFFFFFF, 0xFFFFFFFFu, 0xFFFFFFFFu}));
  EXPECT_IDX_ERROR(load_images(s, 0), s, "too large");
  auto t = file("lhuge.gz", gzip(idx_header(0x801, {0x80000000u})));
  EXPECT_IDX_ERROR(load_labels(t), t, "label count 2147483648 exceeds the limit");
}

}  // namespace
