//===- CheckpointTest.cpp - checkpoint pieces: SHA-256, JSON, folders
//------===//

#include "runtime/Checkpoint.h"
#include "runtime/Crc32c.h"
#include "runtime/Json.h"
#include "runtime/LossScaler.h"
#include "runtime/Sha256.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>

using namespace cleave::runtime;

namespace {

std::string sha(const std::string &text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return h.hexDigest();
}

/// `size` bytes of a linear congruential sequence from `seed`: input for
/// comparing a hash's hardware and portable paths.
std::string pseudoRandomBytes(size_t size, uint32_t seed) {
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    seed = seed * 1664525u + 1013904223u;
    text += char(seed >> 24);
  }
  return text;
}

std::string tempFolder() {
  char name[] = "/tmp/cleave-checkpoint-test-XXXXXX";
  return mkdtemp(name);
}

void touch(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
}

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

} // namespace

// FIPS 180-4's examples (and the empty message).
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                     "91b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb41"
                        "0ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06"
            "c1");
}

// Fed in pieces of every size across the 64-byte blocks, the digest is that
// of the whole.
TEST(Sha256, PiecesEqualTheWhole) {
  std::string text;
  for (int i = 0; i < 1000; ++i)
    text += char('a' + i % 26);
  std::string whole = sha(text);
  for (size_t piece : {1, 7, 63, 64, 65, 200}) {
    Sha256 h;
    for (size_t at = 0; at < text.size(); at += piece)
      h.update(text.data() + at, std::min(piece, text.size() - at));
    EXPECT_EQ(h.hexDigest(), whole) << "pieces of " << piece;
  }
}

TEST(Json, ReadsWhatTheRuntimeWrites) {
  std::string text = "{\"a\": [1, -2.5, " + jsonNumber(0.1) +
                     "], \"s\": " + jsonQuote("x\"y\n") +
                     ", \"o\": {\"t\": true, \"n\": null}}";
  JsonValue v;
  std::string error;
  ASSERT_TRUE(parseJson(text, v, error)) << error;
  ASSERT_EQ(v.find("a")->array.size(), 3u);
  EXPECT_EQ(v.find("a")->array[1].number, -2.5);
  EXPECT_EQ(v.find("a")->array[2].number, 0.1); // exact round trip
  EXPECT_EQ(v.find("s")->string, "x\"y\n");
  EXPECT_TRUE(v.find("o")->find("t")->boolean);
  EXPECT_EQ(v.find("o")->find("n")->kind, JsonValue::Kind::Null);
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, ErrorsSayWhere) {
  JsonValue v;
  std::string error;
  EXPECT_FALSE(parseJson("{\"a\": [1, 2}", v, error));
  EXPECT_EQ(error, "expected ',' or ']' at byte 12");
  EXPECT_FALSE(parseJson("[1] x", v, error));
  EXPECT_EQ(error, "unexpected text after the value at byte 4");
  EXPECT_FALSE(parseJson(std::string(100, '['), v, error));
  EXPECT_EQ(error, "nesting deeper than 64 at byte 64");
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler a(1024, 3, 1, 2), b(1024, 3, 1, 2);
  a.update(true);
  a.update(false);
  b.restore(a.state());
  for (bool overflow : {false, false, true, true, false}) {
    a.update(overflow);
    b.update(overflow);
    EXPECT_EQ(a.scale(), b.scale());
  }
}

// The newest complete checkpoint is found; a folder without its manifest is
// never one; --keep removes the old ones and older unfinished saves.
TEST(Checkpoint, FindAndKeep) {
  std::string root = tempFolder();
  for (int step : {2, 4, 6, 8}) {
    std::string folder = checkpointFolder(root, step);
    ASSERT_EQ(mkdir(folder.c_str(), 0755), 0);
    touch(folder + "/rank-0.bin");
    if (step != 8 && step != 4)
      touch(folder + "/manifest.json");
  }
  std::string found;
  ASSERT_TRUE(findCheckpoint(root, found));
  EXPECT_EQ(found, root + "/step-6");
  EXPECT_FALSE(findCheckpoint(root + "/step-8", found));
  ASSERT_TRUE(findCheckpoint(root + "/step-2/", found));
  EXPECT_EQ(found, root + "/step-2");

  ASSERT_TRUE(removeOldCheckpoints(root, 1));
  EXPECT_FALSE(exists(root + "/step-2"));
  EXPECT_FALSE(exists(root + "/step-4")); // unfinished, older than step 6
  EXPECT_TRUE(exists(root + "/step-6/manifest.json"));
  EXPECT_TRUE(exists(root + "/step-8")); // a save that may still be running
  std::system(("rm -rf " + root).c_str());
}

// The SHA-extension rounds equal the portable ones, for every length
// around the block boundaries and for a large buffer.
TEST(Sha256, HardwareEqualsPortable) {
  if (!Sha256::hardwareAvailable())
    GTEST_SKIP() << "no SHA instructions on this CPU";
  std::string text = pseudoRandomBytes((1 << 20) + 77, 12345);
  for (size_t n :
       std::initializer_list<size_t>{0, 1, 55, 56, 63, 64, 65, 127, 128, 129,
                                     1000, 4096, (1 << 20) + 77}) {
    Sha256 fast, slow(/*allowHardware=*/false);
    fast.update(text.data(), n);
    slow.update(text.data(), n);
    EXPECT_EQ(fast.hexDigest(), slow.hexDigest()) << n << " bytes";
  }
}

// RFC 3720's check value and test vectors, in one piece and in pieces.
TEST(Crc32c, KnownValues) {
  for (bool hardware : {false, true}) {
    if (hardware && !Crc32c::hardwareAvailable())
      continue;
    Crc32c digits(hardware);
    digits.update("123456789", 9);
    EXPECT_EQ(digits.value(), 0xe3069283u) << hardware;
    EXPECT_EQ(digits.hexDigest(), "e3069283");
    std::string zeros(32, '\0'), ones(32, '\xff');
    Crc32c z(hardware), o(hardware);
    z.update(zeros.data(), 7);
    z.update(zeros.data() + 7, 25);
    o.update(ones.data(), ones.size());
    EXPECT_EQ(z.value(), 0x8a9136aau) << hardware;
    EXPECT_EQ(o.value(), 0x62a8ab43u) << hardware;
    EXPECT_EQ(Crc32c(hardware).hexDigest(), "00000000");
  }
}

// The crc32 instruction equals the table for every length and alignment
// near a word, and for a large buffer fed in uneven pieces.
TEST(Crc32c, HardwareEqualsTable) {
  if (!Crc32c::hardwareAvailable())
    GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::string text = pseudoRandomBytes((1 << 20) + 13, 54321);
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; n < 40; ++n) {
      Crc32c fast, slow(/*allowHardware=*/false);
      fast.update(text.data() + start, n);
      slow.update(text.data() + start, n);
      EXPECT_EQ(fast.value(), slow.value()) << start << " + " << n;
    }
  Crc32c fast, slow(/*allowHardware=*/false);
  for (size_t at = 0, step = 1; at < text.size();
       at += step, step = step * 3 + 1) {
    size_t n = std::min(step, text.size() - at);
    fast.update(text.data() + at, n);
    slow.update(text.data() + at, n);
  }
  EXPECT_EQ(fast.value(), slow.value());
}

TEST(Json, BadEscapesAndNumbersAreErrors) {
  JsonValue v;
  std::string error;
  EXPECT_FALSE(parseJson("\"\\uZZZZ\"", v, error));
  EXPECT_EQ(error, "a bad \\u escape at byte 3");
  EXPECT_FALSE(parseJson("[1, -]", v, error));
  EXPECT_EQ(error, "expected a value at byte 4");
  ASSERT_TRUE(parseJson("\"\\u00e9\"", v, error)) << error;
  EXPECT_EQ(v.string, "\xc3\xa9");
}

//===----------------------------------------------------------------------===//
// Reading by name and box: slices of any split, as tensor parallelism and
// ZeRO will write them.
//===----------------------------------------------------------------------===//

namespace {

/// A checkpoint of 3 ranks written by hand: `w` [6, 4] (element r*4+c) split
/// as rank 0 rows 0-2, rank 1 rows 3-5 columns 0-1, rank 2 rows 3-5
/// columns 2-3; `b` [4] whole on ranks 0 and 2; `s` a scalar on rank 1.
struct SplitCheckpoint {
  /// Each tensor's own check: a CRC-32C, as writers give it now, or a
  /// SHA-256 (manifests before it).
  explicit SplitCheckpoint(bool crc = true) : crc(crc) {}
  bool crc;
  std::string folder;
  std::vector<std::string> files{"", "", ""};
  std::vector<std::string> tensors{"", "", ""};

  ~SplitCheckpoint() {
    for (size_t r = 0; r < files.size(); ++r)
      unlink((folder + "/rank-" + std::to_string(r) + ".bin").c_str());
    unlink((folder + "/manifest.json").c_str());
    rmdir(folder.c_str());
  }

  void add(int rank, const std::string &name, const std::vector<int64_t> &shape,
           const std::vector<int64_t> &start, const std::vector<int64_t> &size,
           const std::vector<float> &values, int64_t flatStart = 0,
           int64_t flatSize = -1) {
    auto ints = [](const std::vector<int64_t> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    std::string &t = tensors[rank];
    t += std::string(t.empty() ? "" : ", ") + "{\"name\": \"" + name +
         "\", \"kind\": \"parameter\", \"dtype\": \"F32\", \"shape\": " +
         ints(shape) + ", \"slice_start\": " + ints(start) +
         ", \"slice_size\": " + ints(size) +
         (flatSize < 0 ? std::string()
                       : ", \"flat_range\": " + ints({flatStart, flatSize})) +
         ", \"offset\": " + std::to_string(files[rank].size()) +
         ", \"bytes\": " + std::to_string(values.size() * 4) + ", \"" +
         (crc ? "crc32c" : "sha256") + "\": \"" +
         ownCheck(std::string(reinterpret_cast<const char *>(values.data()),
                              values.size() * 4)) +
         "\"}";
    files[rank].append(reinterpret_cast<const char *>(values.data()),
                       values.size() * 4);
    version = flatSize < 0 ? version : 2;
  }

  std::string ownCheck(const std::string &bytes) const {
    if (!crc)
      return sha(bytes);
    Crc32c c;
    c.update(bytes.data(), bytes.size());
    return c.hexDigest();
  }

  /// The elements of a [rows, 4] tensor whose value is their row-major
  /// index, in the box at (r0, c0) of size (rows, cols), its flat range
  /// [flatStart, flatStart + flatSize) (flatSize < 0: all of it).
  static std::vector<float> range(int64_t r0, int64_t rows, int64_t c0,
                                  int64_t cols, int64_t flatStart,
                                  int64_t flatSize) {
    std::vector<float> v;
    for (int64_t e = 0; e < rows * cols; ++e)
      if (flatSize < 0 || (e >= flatStart && e < flatStart + flatSize))
        v.push_back(float((r0 + e / cols) * 4 + c0 + e % cols));
    return v;
  }

  static std::vector<float> box(int64_t r0, int64_t r1, int64_t c0,
                                int64_t c1) {
    std::vector<float> v;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        v.push_back(float(r * 4 + c));
    return v;
  }

  int version = 1;

  void write() {
    folder = tempFolder();
    add(0, "w", {6, 4}, {0, 0}, {3, 4}, box(0, 3, 0, 4));
    add(1, "w", {6, 4}, {3, 0}, {3, 2}, box(3, 6, 0, 2));
    add(2, "w", {6, 4}, {3, 2}, {3, 2}, box(3, 6, 2, 4));
    add(0, "b", {4}, {0}, {4}, {1, 2, 3, 4});
    add(2, "b", {4}, {0}, {4}, {1, 2, 3, 4});
    add(1, "s", {}, {}, {}, {7});
    writeFiles();
  }

  void writeFiles() {
    if (folder.empty())
      folder = tempFolder();
    std::string ranks;
    int world = int(files.size());
    for (int r = 0; r < world; ++r) {
      std::string file = "rank-" + std::to_string(r) + ".bin";
      std::FILE *f = std::fopen((folder + "/" + file).c_str(), "wb");
      std::fwrite(files[r].data(), 1, files[r].size(), f);
      std::fclose(f);
      ranks += std::string(r ? ", " : "") + "{\"rank\": " + std::to_string(r) +
               ", \"file\": \"" + file +
               "\", \"bytes\": " + std::to_string(files[r].size()) +
               ", \"sha256\": \"" + sha(files[r]) +
               "\", \"optimizer_steps\": 2, \"loss_scaler\": {\"scale\": 1, "
               "\"hysteresis\": 1, \"good_steps\": 0}, \"tensors\": [" +
               tensors[r] + "]}";
    }
    std::string manifest =
        "{\"format\": \"cleave-checkpoint\", \"version\": " +
        std::to_string(version) +
        ", \"step\": 2, "
        "\"layout\": {\"world_size\": " +
        std::to_string(world) +
        ", \"data_degree\": 1, "
        "\"pipeline_degree\": 1, \"tensor_degree\": 3}, \"ranks\": [" +
        ranks + "]}";
    std::FILE *f = std::fopen((folder + "/manifest.json").c_str(), "w");
    std::fwrite(manifest.data(), 1, manifest.size(), f);
    std::fclose(f);
  }
};

std::vector<float> floats(const std::string &bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

} // namespace

TEST(CheckpointSlices, AnyBoxFromAnySplit) {
  SplitCheckpoint ck;
  ck.write();
  CheckpointManifest m;
  Status status = readCheckpointManifest(ck.folder, m);
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(m.tensors.size(), 3u);
  EXPECT_EQ(m.tensors["w"].pieces.size(), 3u);

  // Boxes across the pieces: the whole, and one cutting all three.
  std::vector<SliceRequest> requests(4);
  requests[0].tensor = &m.tensors["w"];
  requests[0].start = {0, 0};
  requests[0].size = {6, 4};
  requests[1].tensor = &m.tensors["w"];
  requests[1].start = {2, 1};
  requests[1].size = {3, 2};
  requests[2].tensor = &m.tensors["b"];
  requests[2].start = {1};
  requests[2].size = {2};
  requests[3].tensor = &m.tensors["s"];
  for (SliceRequest &r : requests) {
    status = planSlice(m, 2, r);
    ASSERT_TRUE(status) << status.message();
  }
  EXPECT_EQ(requests[0].pieces.size(), 3u);
  EXPECT_EQ(requests[1].pieces.size(), 3u);
  // A replica in the preferred rank's file is the one read.
  ASSERT_EQ(requests[2].pieces.size(), 1u);
  EXPECT_EQ(requests[2].pieces[0]->rankIndex, 2);
  status = readSlices(m, requests);
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(floats(requests[0].bytes), SplitCheckpoint::box(0, 6, 0, 4));
  EXPECT_EQ(floats(requests[1].bytes), SplitCheckpoint::box(2, 5, 1, 3));
  EXPECT_EQ(floats(requests[2].bytes), (std::vector<float>{2, 3}));
  EXPECT_EQ(floats(requests[3].bytes), (std::vector<float>{7}));

  std::vector<NamedTensor> full;
  status = readFullTensors(m, false, full);
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[0].name, "b");
  EXPECT_EQ(full[1].name, "s");
  EXPECT_EQ(full[2].name, "w");
  EXPECT_EQ(full[2].shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(floats(full[2].bytes), SplitCheckpoint::box(0, 6, 0, 4));
}

TEST(CheckpointSlices, MissingPartsAndBadFilesAreErrors) {
  SplitCheckpoint ck;
  ck.write();
  CheckpointManifest m;
  ASSERT_TRUE(readCheckpointManifest(ck.folder, m));
  // Without rank 2's piece, columns 2-3 of rows 3-5 are held by no rank.
  m.tensors["w"].pieces.pop_back();
  SliceRequest r;
  r.tensor = &m.tensors["w"];
  r.start = {0, 0};
  r.size = {6, 4};
  Status status = planSlice(m, -1, r);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("tensor 'w': 6 elements of the slice at "
                                  "[0, 0] of size [6, 4] are held by no rank"),
            std::string::npos)
      << status.message();
  r.start = {4, 0};
  r.size = {3, 4};
  status = planSlice(m, -1, r);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("has no slice at [4, 0] of size [3, 4]"),
            std::string::npos)
      << status.message();

  // A flipped byte: the file named, nothing returned.
  std::string path = ck.folder + "/rank-1.bin";
  std::FILE *f = std::fopen(path.c_str(), "r+b");
  std::fputc('x', f);
  std::fclose(f);
  ASSERT_TRUE(readCheckpointManifest(ck.folder, m));
  // As a manifest from before per-tensor checks: the file's names it.
  for (auto &[name, t] : m.tensors)
    for (CheckpointPiece &p : t.pieces)
      p.sha256.clear(), p.crc32c.clear();
  std::vector<NamedTensor> full;
  status = readFullTensors(m, false, full);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find(path + ": SHA-256"), std::string::npos)
      << status.message();
  EXPECT_TRUE(full.empty());
}

namespace {

/// What a box (and flat range) of `shape` holds, element by element: the
/// full row-major index of each, in order.
std::vector<int64_t> indexesOf(const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &start,
                               const std::vector<int64_t> &size,
                               int64_t flatStart, int64_t flatSize) {
  std::vector<int64_t> out;
  int64_t elements = 1;
  for (int64_t d : size)
    elements *= d;
  for (int64_t e = 0; e < elements; ++e) {
    if (flatSize >= 0 && (e < flatStart || e >= flatStart + flatSize))
      continue;
    int64_t rest = e, full = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      full += (start[d] + rest % size[d]) * stride;
      rest /= size[d];
      stride *= shape[d];
    }
    out.push_back(full);
  }
  return out;
}

struct RandomPiece {
  std::vector<int64_t> start, size;
  int64_t flatStart = 0, flatSize = -1;
};

RandomPiece randomPiece(std::mt19937 &rng, const std::vector<int64_t> &shape) {
  RandomPiece p;
  int64_t elements = 1;
  for (int64_t n : shape) {
    int64_t a = int64_t(rng() % uint32_t(n + 1));
    int64_t b = int64_t(rng() % uint32_t(n + 1));
    p.start.push_back(std::min(a, b));
    p.size.push_back(std::max(a, b) - std::min(a, b));
    elements *= p.size.back();
  }
  if (rng() % 2) {
    int64_t a = int64_t(rng() % uint32_t(elements + 1));
    int64_t b = int64_t(rng() % uint32_t(elements + 1));
    p.flatStart = std::min(a, b);
    p.flatSize = std::max(a, b) - p.flatStart;
  }
  return p;
}

} // namespace

// The runs of boxes and flat ranges, and what two of them share, equal an
// element-by-element walk, for boxes and ranges of every kind: crossing
// rows, crossing a box's edges, empty, whole, scalars.
TEST(CheckpointSlices, FlatRunsEqualAnElementWalk) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int64_t> shape;
    for (int d = int(rng() % 4); d > 0; --d)
      shape.push_back(1 + int64_t(rng() % 5));
    RandomPiece a = randomPiece(rng, shape), b = randomPiece(rng, shape);
    std::vector<int64_t> aIndexes =
        indexesOf(shape, a.start, a.size, a.flatStart, a.flatSize);
    std::vector<int64_t> bIndexes =
        indexesOf(shape, b.start, b.size, b.flatStart, b.flatSize);
    std::vector<FlatRun> aRuns =
        flatRuns(shape, a.start, a.size, a.flatStart, a.flatSize);
    std::vector<FlatRun> bRuns =
        flatRuns(shape, b.start, b.size, b.flatStart, b.flatSize);
    std::vector<int64_t> walked;
    for (const FlatRun &r : aRuns) {
      ASSERT_EQ(r.local, int64_t(walked.size()));
      for (int64_t i = 0; i < r.count; ++i)
        walked.push_back(r.full + i);
    }
    ASSERT_EQ(walked, aIndexes) << "trial " << trial;
    // Shared: each element of A that B holds, at its place in both.
    std::map<int64_t, int64_t> bAt;
    for (size_t i = 0; i < bIndexes.size(); ++i)
      bAt[bIndexes[i]] = int64_t(i);
    std::vector<std::pair<int64_t, int64_t>> expected, shared;
    for (size_t i = 0; i < aIndexes.size(); ++i)
      if (bAt.count(aIndexes[i]))
        expected.push_back({int64_t(i), bAt[aIndexes[i]]});
    int64_t count =
        forEachSharedRun(aRuns, bRuns, [&](int64_t at, int64_t in, int64_t n) {
          for (int64_t i = 0; i < n; ++i)
            shared.push_back({at + i, in + i});
        });
    ASSERT_EQ(shared, expected) << "trial " << trial;
    EXPECT_EQ(count, int64_t(expected.size()));
  }
}

namespace {

/// Random boxes of `shape` concatenated along `axis`: disjoint intervals of
/// that axis in random order, the other axes one random interval each.
std::vector<Box> randomBoxes(std::mt19937 &rng,
                             const std::vector<int64_t> &shape, int axis) {
  Box common;
  for (int64_t n : shape) {
    int64_t a = int64_t(rng() % uint32_t(n)), b = int64_t(rng() % uint32_t(n));
    common.start.push_back(std::min(a, b));
    common.size.push_back(std::max(a, b) - std::min(a, b) + 1);
  }
  std::vector<Box> boxes;
  for (int64_t at = 0; at < shape[axis];) {
    int64_t size = 1 + int64_t(rng() % uint32_t(shape[axis] - at));
    if (rng() % 2) {
      Box b = common;
      b.start[axis] = at;
      b.size[axis] = size;
      boxes.push_back(b);
    }
    at += size;
  }
  if (boxes.empty()) {
    boxes.push_back(common);
  }
  std::shuffle(boxes.begin(), boxes.end(), rng);
  return boxes;
}

} // namespace

// Several boxes concatenated along an axis (a blocked tensor-parallel
// slice), and flat ranges of that (ZeRO on top): the runs equal a walk of
// the concatenation element by element, in its order (boxRuns) and sorted
// by the full tensor's (sliceRuns, which forEachSharedRun reads).
TEST(CheckpointSlices, BoxRunsEqualAnElementWalk) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int64_t> shape;
    for (int d = 1 + int(rng() % 3); d > 0; --d)
      shape.push_back(1 + int64_t(rng() % 6));
    int axis = int(rng() % shape.size());
    std::vector<Box> boxes = randomBoxes(rng, shape, axis);
    std::vector<int64_t> local = boxes[0].size;
    local[axis] = 0;
    for (const Box &b : boxes)
      local[axis] += b.size[axis];
    int64_t elements = 1;
    for (int64_t n : local)
      elements *= n;
    // The walk: element i of the concatenation, its full index.
    std::vector<int64_t> full;
    for (int64_t i = 0; i < elements; ++i) {
      std::vector<int64_t> index(local.size());
      int64_t rest = i;
      for (size_t d = local.size(); d-- > 0;) {
        index[d] = rest % local[d];
        rest /= local[d];
      }
      size_t k = 0;
      while (index[axis] >= boxes[k].size[axis])
        index[axis] -= boxes[k++].size[axis];
      int64_t at = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        at = at * shape[d] + boxes[k].start[d] + index[d];
      full.push_back(at);
    }
    int64_t flatStart = 0, flatSize = -1;
    if (rng() % 2) {
      int64_t a = int64_t(rng() % uint32_t(elements + 1));
      int64_t b = int64_t(rng() % uint32_t(elements + 1));
      flatStart = std::min(a, b);
      flatSize = std::max(a, b) - flatStart;
      full = std::vector<int64_t>(full.begin() + flatStart,
                                  full.begin() + flatStart + flatSize);
    }
    std::vector<int64_t> walked;
    for (const FlatRun &r : boxRuns(shape, boxes, axis, flatStart, flatSize)) {
      ASSERT_EQ(r.local, int64_t(walked.size())) << "trial " << trial;
      for (int64_t i = 0; i < r.count; ++i)
        walked.push_back(r.full + i);
    }
    ASSERT_EQ(walked, full) << "trial " << trial;
    std::vector<FlatRun> sorted = sliceRuns(shape, boxes[0].start, local, boxes,
                                            axis, flatStart, flatSize);
    for (size_t i = 1; i < sorted.size(); ++i)
      ASSERT_LE(sorted[i - 1].full + sorted[i - 1].count, sorted[i].full);
    for (const FlatRun &r : sorted)
      for (int64_t i = 0; i < r.count; ++i)
        ASSERT_EQ(full[r.local + i], r.full + i) << "trial " << trial;
  }
}

// ZeRO-1's state: `w` [6, 4] split over 2 tensor ranks by columns, each
// half's 12 elements over 2 data ranks as flat ranges of 6 (crossing
// rows), and `b` [5] whole over 4 data ranks in chunks of 2 (the last
// empty: padding only). Boxes, flat ranges across the pieces, and whole
// tensors are assembled from them.
TEST(CheckpointSlices, FlatRangesFromAnySplit) {
  SplitCheckpoint ck;
  ck.files.assign(4, "");
  ck.tensors.assign(4, "");
  using C = SplitCheckpoint;
  for (int t = 0; t < 2; ++t)
    for (int d = 0; d < 2; ++d)
      ck.add(2 * t + d, "w", {6, 4}, {0, 2 * t}, {6, 2},
             C::range(0, 6, 2 * t, 2, 6 * d, 6), 6 * d, 6);
  for (int d = 0; d < 4; ++d) {
    int64_t start = std::min<int64_t>(2 * d, 5);
    int64_t size = std::min<int64_t>(2, 5 - start);
    std::vector<float> v;
    for (int64_t i = start; i < start + size; ++i)
      v.push_back(float(i));
    ck.add(d, "b", {5}, {0}, {5}, v, start, size);
  }
  ck.writeFiles();
  CheckpointManifest m;
  Status status = readCheckpointManifest(ck.folder, m);
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(m.version, 2);
  ASSERT_EQ(m.tensors["w"].pieces.size(), 4u);
  EXPECT_EQ(m.tensors["w"].pieces[1].flatStart, 6);

  std::vector<SliceRequest> requests(5);
  auto request = [&](int i, const char *name, std::vector<int64_t> start,
                     std::vector<int64_t> size, int64_t flatStart,
                     int64_t flatSize) {
    requests[i].tensor = &m.tensors[name];
    requests[i].start = std::move(start);
    requests[i].size = std::move(size);
    requests[i].flatStart = flatStart;
    requests[i].flatSize = flatSize;
  };
  request(0, "w", {0, 0}, {6, 4}, 0, -1); // whole: plain data parallel
  request(1, "w", {1, 1}, {4, 2}, 2, 5);  // a range across all four
  request(2, "w", {0, 0}, {6, 4}, 7, 10); // ZeRO-1 on 2 without tensor
  request(3, "b", {0}, {5}, 3, 2);        // chunks of another degree
  request(4, "b", {0}, {5}, 5, 0);        // padding only: nothing read
  for (SliceRequest &r : requests) {
    status = planSlice(m, -1, r);
    ASSERT_TRUE(status) << status.message();
  }
  EXPECT_EQ(requests[0].pieces.size(), 4u);
  EXPECT_EQ(requests[3].pieces.size(), 2u);
  EXPECT_TRUE(requests[4].pieces.empty());
  status = readSlices(m, requests);
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(floats(requests[0].bytes), C::range(0, 6, 0, 4, 0, -1));
  EXPECT_EQ(floats(requests[1].bytes), C::range(1, 4, 1, 2, 2, 5));
  EXPECT_EQ(floats(requests[2].bytes), C::range(0, 6, 0, 4, 7, 10));
  EXPECT_EQ(floats(requests[3].bytes), (std::vector<float>{3, 4}));
  EXPECT_TRUE(requests[4].bytes.empty());

  // Export: whole tensors.
  std::vector<NamedTensor> full;
  status = readFullTensors(m, false, full);
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(full.size(), 2u);
  EXPECT_EQ(floats(full[1].bytes), C::range(0, 6, 0, 4, 0, -1));
  EXPECT_EQ(floats(full[0].bytes), (std::vector<float>{0, 1, 2, 3, 4}));

  // A rank missing: its range is named.
  m.tensors["w"].pieces.erase(m.tensors["w"].pieces.begin() + 1);
  status = planSlice(m, -1, requests[2]);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("tensor 'w': 3 elements of the slice at "
                                  "[0, 0] of size [6, 4] (its elements [7, "
                                  "17)) are held by no rank"),
            std::string::npos)
      << status.message();
}

// A flipped byte names its tensor, its bytes and its file, by its
// CRC-32C and by the SHA-256 of older manifests.
TEST(CheckpointSlices, AFlippedByteNamesItsTensor) {
  for (bool crc : {true, false}) {
    SplitCheckpoint ck(crc);
    ck.write();
    CheckpointManifest m;
    ASSERT_TRUE(readCheckpointManifest(ck.folder, m));
    const CheckpointPiece &w = m.tensors["w"].pieces[2];
    ASSERT_EQ(w.crc32c.empty(), !crc);
    ASSERT_EQ(w.sha256.empty(), crc);
    std::string path = ck.folder + "/rank-2.bin";
    std::FILE *f = std::fopen(path.c_str(), "r+b");
    std::fseek(f, long(w.offset + 5), SEEK_SET);
    std::fputc(0x5a, f);
    std::fclose(f);
    std::vector<NamedTensor> full;
    Status status = readFullTensors(m, false, full);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(
                  path + ": bytes [" + std::to_string(w.offset) + ", " +
                  std::to_string(w.offset + w.bytes) + ") of tensor 'w' have " +
                  (crc ? "CRC-32C " : "SHA-256 ")),
              std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find(", the manifest says " +
                                    (crc ? w.crc32c : w.sha256) +
                                    ": the file is corrupt"),
              std::string::npos)
        << status.message();
    EXPECT_TRUE(full.empty());
  }
}

// A reader that needs one tensor of a file reads and checks only that
// tensor's bytes (its own SHA-256): a flipped byte in another tensor of the
// file goes unread. Without tensor hashes (older manifests) the whole file
// is read and its SHA-256 checked; an export checks every byte; a file of
// the wrong size is refused before anything is read.
TEST(CheckpointSlices, ReadsOnlyTheBytesItNeeds) {
  for (bool crc : {true, false}) {
    SCOPED_TRACE(crc ? "CRC-32C" : "SHA-256");
    const char *own = crc ? "CRC-32C " : "SHA-256 ";
    SplitCheckpoint ck(crc);
    ck.write();
    CheckpointManifest m;
    ASSERT_TRUE(readCheckpointManifest(ck.folder, m));
    const CheckpointPiece &w = m.tensors["w"].pieces[0]; // rank 0's, offset 0
    ASSERT_EQ(w.rankIndex, 0);
    std::string path = ck.folder + "/rank-0.bin";
    std::FILE *f = std::fopen(path.c_str(), "r+b");
    std::fseek(f, long(w.offset + 2), SEEK_SET);
    std::fputc(0x5a, f);
    std::fclose(f);
    auto readB = [&](const CheckpointManifest &manifest) {
      std::vector<SliceRequest> requests(1);
      requests[0].tensor = &manifest.tensors.at("b");
      requests[0].start = {0};
      requests[0].size = {4};
      Status status = planSlice(manifest, 0, requests[0]);
      if (status && requests[0].pieces.front()->rankIndex != 0)
        return Status::error("planned another rank's piece");
      if (status)
        status = readSlices(manifest, requests);
      if (status && floats(requests[0].bytes) != std::vector<float>{1, 2, 3, 4})
        return Status::error("wrong bytes");
      return status;
    };
    Status status = readB(m);
    EXPECT_TRUE(status) << status.message();
    // The damaged tensor itself is refused, by name.
    std::vector<SliceRequest> requests(1);
    requests[0].tensor = &m.tensors["w"];
    requests[0].start = {0, 0};
    requests[0].size = {3, 4};
    ASSERT_TRUE(planSlice(m, 0, requests[0]));
    status = readSlices(m, requests);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(
                  path + ": bytes [0, 48) of tensor 'w' have " + own),
              std::string::npos)
        << status.message();
    // An export reads every file whole: the flip is found.
    std::vector<NamedTensor> full;
    status = readFullTensors(m, false, full);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(std::string("of tensor 'w' have ") + own),
              std::string::npos)
        << status.message();
    // Without tensor hashes the file's own is all there is: read whole.
    CheckpointManifest old = m;
    for (auto &[name, t] : old.tensors)
      for (CheckpointPiece &p : t.pieces)
        p.sha256.clear(), p.crc32c.clear();
    status = readB(old);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(path + ": SHA-256 "), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("does not match the manifest's"),
              std::string::npos)
        << status.message();
    // A short file: refused by its size, whatever is read of it.
    ASSERT_EQ(truncate(path.c_str(), off_t(m.ranks[0].bytes - 4)), 0);
    status = readB(m);
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(path + ": " +
                                    std::to_string(m.ranks[0].bytes - 4) +
                                    " bytes, the manifest says " +
                                    std::to_string(m.ranks[0].bytes) +
                                    ": the file is truncated or was replaced"),
              std::string::npos)
        << status.message();
  }
}
