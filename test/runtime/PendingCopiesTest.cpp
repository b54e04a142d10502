//===- PendingCopiesTest.cpp - which copies in flight an op waits for -----===//

#include "runtime/PendingCopies.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace cleave::runtime;
using Access = PendingCopies::Access;

namespace {

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class PendingCopiesTest : public ::testing::Test {
protected:
  char device[1024] = {};
  ByteSpan at(size_t offset, size_t size) { return {device + offset, size}; }
};

TEST_F(PendingCopiesTest, OffloadSourceMayBeReadButNotOverwritten) {
  PendingCopies copies;
  copies.add(at(0, 256), Access::Reads, 7); // an offload of [0, 256)
  // Reading the offloaded activation again does not wait.
  EXPECT_TRUE(copies.due({at(0, 256)}, {at(512, 64)}).empty());
  // Writing next to it does not wait either; [256, 320) is not its bytes.
  EXPECT_TRUE(copies.due({}, {at(256, 64)}).empty());
  EXPECT_FALSE(copies.empty());
  // A kernel whose result reuses its last byte waits, and the copy is
  // then no longer pending.
  EXPECT_EQ(copies.due({}, {at(255, 16)}), std::vector<int>{7});
  EXPECT_TRUE(copies.empty());
}

TEST_F(PendingCopiesTest, FetchDestinationMayNeitherBeReadNorWritten) {
  PendingCopies copies;
  copies.add(at(128, 128), Access::Writes, 3); // a fetch into [128, 256)
  EXPECT_TRUE(copies.due({at(0, 128)}, {at(256, 128)}).empty());
  EXPECT_EQ(copies.due({at(200, 4)}, {}), std::vector<int>{3});
  copies.add(at(128, 128), Access::Writes, 4);
  EXPECT_EQ(copies.due({}, {at(0, 129)}), std::vector<int>{4});
}

TEST_F(PendingCopiesTest, OnlyTheCopiesTouchedAreDue) {
  PendingCopies copies;
  copies.add(at(0, 100), Access::Reads, 1);
  copies.add(at(100, 100), Access::Writes, 2);
  copies.add(at(300, 100), Access::Reads, 3);
  // Reads [50, 150): only the fetch into [100, 200) is due.
  EXPECT_EQ(copies.due({at(50, 100)}, {}), std::vector<int>{2});
  // Writes over both offloads.
  EXPECT_EQ(sorted(copies.due({}, {at(0, 400)})), (std::vector<int>{1, 3}));
  EXPECT_TRUE(copies.empty());
}

TEST_F(PendingCopiesTest, EmptySpansTouchNothing) {
  PendingCopies copies;
  copies.add(at(0, 0), Access::Writes, 1); // nothing to track
  copies.add({nullptr, 64}, Access::Writes, 2);
  EXPECT_TRUE(copies.empty());
  copies.add(at(0, 64), Access::Writes, 3);
  EXPECT_TRUE(copies.due({at(0, 0), {nullptr, 64}}, {at(10, 0)}).empty());
  EXPECT_EQ(copies.all(), std::vector<int>{3});
  EXPECT_TRUE(copies.all().empty());
}

} // namespace
