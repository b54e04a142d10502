//===- CheckpointTest.cpp - checkpoint pieces: SHA-256, JSON, folders
//------===//

#include "runtime/Checkpoint.h"
#include "runtime/Json.h"
#include "runtime/LossScaler.h"
#include "runtime/Sha256.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace cleave::runtime;

namespace {

std::string sha(const std::string &text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return h.hexDigest();
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
  std::string text;
  uint32_t x = 12345;
  for (int i = 0; i < (1 << 20) + 77; ++i) {
    x = x * 1664525u + 1013904223u;
    text += char(x >> 24);
  }
  for (size_t n :
       std::initializer_list<size_t>{0, 1, 55, 56, 63, 64, 65, 127, 128, 129,
                                     1000, 4096, (1 << 20) + 77}) {
    Sha256 fast, slow(/*allowHardware=*/false);
    fast.update(text.data(), n);
    slow.update(text.data(), n);
    EXPECT_EQ(fast.hexDigest(), slow.hexDigest()) << n << " bytes";
  }
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
