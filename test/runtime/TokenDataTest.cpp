//===- TokenDataTest.cpp - token files and the batches they give ----------===//

#include "TestPrograms.h"
#include "runtime/TokenData.h"

#include <gtest/gtest.h>

#include <optional>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

/// An llm.c file of `tokens`; its header says `count` tokens if given.
std::string llmcFile(const std::vector<uint16_t> &tokens, int32_t version = 1,
                     std::optional<int32_t> count = std::nullopt) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count ? *count : int32_t(tokens.size());
  return bytesOf(header) + bytesOf(tokens);
}

std::string readError(const std::string &bytes) {
  TempDir dir;
  writeFile(dir.file("tokens.bin"), bytes);
  TokenData data;
  Status status = TokenData::read(dir.file("tokens.bin"), data);
  return status ? "" : status.message().substr(dir.path().size() + 1);
}

TEST(TokenData, FlatFile) {
  TempDir dir;
  writeFile(dir.file("t.bin"), bytesOf(std::vector<uint16_t>{1, 2, 65535}));
  TokenData data;
  ASSERT_TRUE(TokenData::read(dir.file("t.bin"), data));
  EXPECT_FALSE(data.isLlmc());
  ASSERT_EQ(data.size(), 3);
  EXPECT_EQ(data[0], 1);
  EXPECT_EQ(data[2], 65535);
}

TEST(TokenData, LlmcFile) {
  TempDir dir;
  writeFile(dir.file("t.bin"), llmcFile({7, 8, 9, 10}));
  TokenData data;
  ASSERT_TRUE(TokenData::read(dir.file("t.bin"), data));
  EXPECT_TRUE(data.isLlmc());
  ASSERT_EQ(data.size(), 4);
  EXPECT_EQ(data[0], 7);
  EXPECT_EQ(data[3], 10);
}

TEST(TokenData, TheRepositoryTokens) {
  TokenData data;
  ASSERT_TRUE(TokenData::read(CLEAVE_SOURCE_DIR "/data/tokens.bin", data));
  EXPECT_GT(data.size(), 1000);
}

TEST(TokenData, Errors) {
  TokenData data;
  Status missing = TokenData::read("/nonexistent/tokens.bin", data);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message(), "/nonexistent/tokens.bin: cannot open the "
                               "token file: No such file or directory");
  Status folder = TokenData::read("/tmp", data);
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.message(), "/tmp: not a token file (not a regular file)");
  EXPECT_EQ(readError(""), "tokens.bin: the token file is empty");
  EXPECT_EQ(readError("abc"),
            "tokens.bin: 3 bytes, an odd size for a file of uint16 tokens");
  EXPECT_EQ(readError(llmcFile({1, 2}, 2)),
            "tokens.bin: llm.c token file of version 2, expected 1");
  EXPECT_EQ(readError(llmcFile({1, 2}, 1, 5)),
            "tokens.bin: the llm.c header says 5 tokens (10 bytes), but 4 "
            "bytes follow the header");
  EXPECT_EQ(readError(llmcFile({1, 2}, 1, -1 - 0x7fff0000)),
            "tokens.bin: the llm.c header says -2147418113 tokens "
            "(-4294836226 bytes), but 4 bytes follow the header");
  EXPECT_EQ(readError(llmcFile({})),
            "tokens.bin: the token file holds no tokens");
}

TEST(TokenData, TooShortForOneWindow) {
  TokenData data = TokenData::fromTokens({1, 2, 3}, "t.bin");
  EXPECT_TRUE(data.checkWindow(2));
  Status status = data.checkWindow(3);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "t.bin: 3 tokens, fewer than one sample needs "
                              "(sequence length 3 + 1 = 4)");
}

TEST(TokenData, WindowsFollowTheBatchRule) {
  // Sample j of step s starts at (s*B + j)*T, wrapping at the end.
  std::vector<uint16_t> tokens(10);
  for (int i = 0; i < 10; ++i)
    tokens[i] = uint16_t(100 + i);
  TokenData data = TokenData::fromTokens(tokens);
  EXPECT_EQ(data.windowStart(0, 2, 3, 0), 0);
  EXPECT_EQ(data.windowStart(0, 2, 3, 1), 3);
  EXPECT_EQ(data.windowStart(1, 2, 3, 0), 6);
  EXPECT_EQ(data.windowStart(1, 2, 3, 1), 9);
  EXPECT_EQ(data.windowStart(2, 2, 3, 0), 2); // 12 mod 10
  // Far steps do not overflow.
  EXPECT_EQ(data.windowStart(int64_t(1) << 50, 4, 1024, 3),
            int64_t(((unsigned __int128)((int64_t(1) << 50) * 4 + 3) * 1024) %
                    10));

  std::vector<int64_t> ids(2 * 3), targets(2 * 3);
  TensorRef idsRef{ids.data(), {2, 3}, DType::I64};
  TensorRef targetsRef{targets.data(), {2, 3}, DType::I64};
  // Step 1, samples 0 and 1 of a batch of 2: windows at 6 and 9 (wraps).
  ASSERT_TRUE(data.fill(1, 2, 3, 0, 2, idsRef, targetsRef));
  EXPECT_EQ(ids, (std::vector<int64_t>{106, 107, 108, 109, 100, 101}));
  EXPECT_EQ(targets, (std::vector<int64_t>{107, 108, 109, 100, 101, 102}));

  // Only the targets, as i32, for sample 1 alone (a second data rank).
  std::vector<int32_t> narrow(3);
  TensorRef narrowRef{narrow.data(), {1, 3}, DType::I32};
  ASSERT_TRUE(data.fill(1, 2, 3, 1, 1, TensorRef(), narrowRef));
  EXPECT_EQ(narrow, (std::vector<int32_t>{100, 101, 102}));
}

TEST(TokenData, FillChecksTheTensors) {
  TokenData data = TokenData::fromTokens({1, 2, 3, 4, 5});
  std::vector<float> f(4);
  Status wrongType =
      data.fill(0, 2, 2, 0, 2, TensorRef{f.data(), {2, 2}, DType::F32}, {});
  ASSERT_FALSE(wrongType);
  EXPECT_EQ(wrongType.message(), "the token ids tensor has type f32, expected "
                                 "i32, i64, u16, u32 or u64");
  std::vector<int64_t> ids(4);
  Status wrongShape =
      data.fill(0, 2, 2, 0, 2, {}, TensorRef{ids.data(), {4}, DType::I64});
  ASSERT_FALSE(wrongShape);
  EXPECT_EQ(wrongShape.message(),
            "the targets tensor does not have shape [2, 2]");
}

} // namespace
