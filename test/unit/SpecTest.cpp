//===- SpecTest.cpp - units for the spec parser of cleave-compile ---------===//
//
// What lit cannot reach or cannot make deterministic: --set values nested
// too deep, the notes a spec carries, and the size rule of checkProgramsFit
// against given limits instead of this machine's.
//
//===----------------------------------------------------------------------===//

#include "frontend/Spec.h"

#include <gtest/gtest.h>

#include <string>

using namespace llvm;

namespace {

/// The error text of a spec that must fail.
std::string errorOf(StringRef json, std::vector<std::string> overrides = {}) {
  Expected<cleave::Spec> spec = cleave::parseSpec(json, "s.json", overrides);
  if (spec)
    return "";
  return toString(spec.takeError());
}

TEST(Spec, SetValueNestedTooDeep) {
  std::string deep(100000, '[');
  EXPECT_EQ(errorOf("{}", {"optimizer=" + deep}),
            "--set optimizer: nested more than 64 levels deep at byte 64; a "
            "spec nests 6 at most (distribution, smdistributed, "
            "modelparallel, parameters, optimizer, betas)");
  // Brackets inside strings are not nesting.
  EXPECT_EQ(errorOf("{\"frozen_parameters\": [\"" + deep + "\"]}"), "");
}

// Found by fuzz-spec: a --set key or value that is not UTF-8 reached
// llvm::json, which asserts on it.
TEST(Spec, SetTextNotUtf8) {
  EXPECT_EQ(errorOf("{}", {"wor\xb7" "d_size=2"}),
            "--set wor\xef\xbf\xbd" "d_size: expects UTF-8 text, but the "
            "argument has bytes that are not");
  EXPECT_EQ(errorOf("{}", {"pipeline=\xff"}),
            "--set pipeline: expects UTF-8 text, but the argument has bytes "
            "that are not");
}

TEST(Spec, NotesOfDistributionDictionary) {
  Expected<cleave::Spec> spec = cleave::parseSpec(
      R"({"smdistributed": {"modelparallel": {"enabled": true,
           "parameters": {"partitions": 2, "skip_tracing": true,
                          "ddp": true, "ddp_dist_backend": "nccl"}}},
          "mpi": {"enabled": true, "processes_per_host": 4}})",
      "s.json", {});
  ASSERT_TRUE(bool(spec)) << toString(spec.takeError());
  EXPECT_EQ(spec->pipelineParallelDegree, 2);
  EXPECT_EQ(spec->processesPerHost, 4);
  EXPECT_EQ(spec->worldSize, 4); // one host
  std::vector<std::string> keys;
  for (const cleave::SpecNote &note : spec->notes)
    keys.push_back(note.key + "=" + note.value);
  EXPECT_EQ(keys, (std::vector<std::string>{"world_size=4",
                                            "skip_tracing=true",
                                            "ddp_dist_backend=\"nccl\""}));
}

TEST(Spec, SetOverridesAnAlias) {
  Expected<cleave::Spec> spec = cleave::parseSpec(
      R"({"partitions": 2, "world_size": 4, "ddp": true})", "s.json",
      {"pipeline_parallel_degree=4"});
  ASSERT_TRUE(bool(spec)) << toString(spec.takeError());
  EXPECT_EQ(spec->pipelineParallelDegree, 4);
}

TEST(Spec, HybridShardDegreeZeroIsReplication) {
  Expected<cleave::Spec> spec = cleave::parseSpec(
      R"({"hybrid_shard_degree": 0, "world_size": 2})", "s.json", {});
  ASSERT_TRUE(bool(spec)) << toString(spec.takeError());
  EXPECT_EQ(spec->shardedDataParallelDegree, 1);
  EXPECT_TRUE(spec->ddp); // SMP v2 always averages over data ranks
}

TEST(Spec, ProgramsThatCannotFit) {
  Expected<cleave::Spec> spec =
      cleave::parseSpec(R"({"microbatches": 1000})", "s.json", {});
  ASSERT_TRUE(bool(spec));
  // 2000 steps of at least 2 bytes, and their microbatch indices.
  uint64_t bytes = cleave::programBytesLowerBound(*spec);
  EXPECT_GE(bytes, 2u * 2000u);
  cleave::HostLimits roomy{bytes, 2000 * 40, 40};
  EXPECT_FALSE(bool(cleave::checkProgramsFit(*spec, roomy, "out")));
  cleave::HostLimits smallDisk{bytes - 1, 2000 * 40, 40};
  std::string disk =
      toString(cleave::checkProgramsFit(*spec, smallDisk, "out"));
  EXPECT_NE(disk.find("spec key 'microbatches': the programs would take at "
                      "least"),
            std::string::npos)
      << disk;
  cleave::HostLimits smallMemory{bytes, 2000 * 40 - 1, 40};
  std::string memory =
      toString(cleave::checkProgramsFit(*spec, smallMemory, "out"));
  EXPECT_NE(memory.find("spec key 'microbatches': each program would hold "
                        "2000 schedule steps"),
            std::string::npos)
      << memory;

  // A million ranks each list the million of their data group: the square.
  Expected<cleave::Spec> world = cleave::parseSpec(
      R"({"world_size": 1000000, "ddp": true})", "s.json", {});
  ASSERT_TRUE(bool(world));
  EXPECT_GE(cleave::programBytesLowerBound(*world), 1000000ull * 1000000ull);
  std::string ranks = toString(cleave::checkProgramsFit(
      *world, cleave::HostLimits{1ull << 40, 1ull << 40, 40}, "out"));
  EXPECT_NE(ranks.find("spec key 'world_size': the programs would take at "
                       "least 2.7 TiB (1000000 programs, each listing its "
                       "1000000 data-parallel ranks), more than the 1.0 TiB "
                       "free in 'out'"),
            std::string::npos)
      << ranks;
}

TEST(Spec, MicrobatchSizeOverflow) {
  cleave::Spec spec;
  spec.worldSize = 1 << 30;
  spec.ddp = true;
  spec.microbatches = 1 << 30;
  Expected<int64_t> size = cleave::microbatchSize(spec, int64_t(1) << 20);
  ASSERT_FALSE(bool(size));
  EXPECT_EQ(toString(size.takeError()),
            "the model's batch 1048576 x 1073741824 microbatch(es) x "
            "1073741824 data-parallel rank(s) overflows 64 bits; lower "
            "'microbatches' or 'world_size'");
}

} // namespace
