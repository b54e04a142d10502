//===- CommunicationCheckTest.cpp - the cross-rank communication proof ----===//
//
// Small multi-rank programs, built in C++, that communicate consistently or
// are planted with one mismatch each: a different element count, reduction
// or tag, a crossed order of two groups, a send nobody receives, a send
// buffer overwritten before its receive. Every failure must name both ranks
// and the operation.
//
//===----------------------------------------------------------------------===//
#include "runtime/CommunicationCheck.h"
#include "runtime/ProgramSeal.h"
#include "test/runtime/TestPrograms.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace cleave::runtime;
using cleave::test::ProgramBuilder;
namespace pb = cleave::program;

namespace {

Status check(const std::vector<ProgramBuilder> &ranks,
             CommunicationCheckOptions options = {}) {
  std::vector<const pb::Program *> programs;
  for (const ProgramBuilder &b : ranks)
    programs.push_back(&b.p);
  return checkCommunication(programs, options);
}

Status checkAll(const std::vector<ProgramBuilder> &ranks) {
  std::vector<const pb::Program *> programs;
  for (const ProgramBuilder &b : ranks)
    programs.push_back(&b.p);
  return checkCommunicationAllModes(programs);
}

pb::Collective *collective(ProgramBuilder &b, int fn, pb::CollectiveKind kind,
                           int group, int in, int out) {
  pb::Collective *c = b.p.mutable_functions(fn)->add_body()->mutable_collective();
  c->set_kind(kind);
  c->set_group(group);
  c->add_inputs(in);
  c->add_outputs(out);
  return c;
}

void sendRecv(ProgramBuilder &b, int fn, bool send, int peer, int tensor,
              int tag) {
  pb::SendRecv *s = b.p.mutable_functions(fn)->add_body()->mutable_send_recv();
  s->set_send(send);
  s->set_peer(peer);
  s->set_tensor(tensor);
  s->set_tag(tag);
}

/// `world` ranks, each with one backward function that all-reduces a
/// gradient of `sizes[r]` floats over all ranks, then an optimizer.
std::vector<ProgramBuilder> dataParallel(std::vector<int64_t> sizes) {
  int world = int(sizes.size());
  std::vector<ProgramBuilder> ranks;
  std::vector<int> all;
  for (int r = 0; r < world; ++r)
    all.push_back(r);
  for (int r = 0; r < world; ++r) {
    ProgramBuilder b(r, world);
    int group = b.group("data", all);
    int grad = b.f32({sizes[r]}, "grad", pb::GRADIENTS);
    int fw = b.function("forward", pb::FORWARD);
    int bw = b.function("backward", pb::BACKWARD);
    int opt = b.function("optimizer", pb::OPTIMIZER);
    b.kernel(bw, "fill", {}, {grad});
    collective(b, bw, pb::ALL_REDUCE, group, grad, grad)->set_reduce(pb::MEAN);
    b.kernel(opt, "sgd", {grad}, {});
    for (int mb = 0; mb < 2; ++mb) {
      b.step(fw, mb);
      b.step(bw, mb);
    }
    b.step(opt, -1);
    ranks.push_back(std::move(b));
  }
  return ranks;
}

/// A two-stage pipeline: stage 0 sends its activation (tag 1) and receives
/// the gradient back (tag 2), stage 1 the other way round.
std::vector<ProgramBuilder> pipeline(int recvTag = 1) {
  std::vector<ProgramBuilder> ranks;
  for (int r = 0; r < 2; ++r) {
    ProgramBuilder b(r, 2);
    b.group("data", {r});
    int act = b.f32({4, 8}, "act");
    int grad = b.f32({4, 8}, "grad");
    int fw = b.function("forward", pb::FORWARD);
    int bw = b.function("backward", pb::BACKWARD);
    if (r == 0) {
      b.kernel(fw, "matmul", {}, {act});
      sendRecv(b, fw, true, 1, act, 1);
      sendRecv(b, bw, false, 1, grad, 2);
    } else {
      sendRecv(b, fw, false, 0, act, recvTag);
      b.kernel(bw, "matmul_grad", {act}, {grad});
      sendRecv(b, bw, true, 0, grad, 2);
    }
    for (int mb = 0; mb < 3; ++mb) {
      b.step(fw, mb);
      b.step(bw, mb);
    }
    ranks.push_back(std::move(b));
  }
  return ranks;
}

TEST(CommunicationCheck, MatchingDataParallelProgramsPass) {
  Status s = checkAll(dataParallel({64, 64, 64, 64}));
  EXPECT_TRUE(s) << s.message();
}

TEST(CommunicationCheck, AnElementCountMismatchNamesBothRanks) {
  Status s = check(dataParallel({64, 64, 32, 64}));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("ranks 0 and 2 disagree on collective #1"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("element counts differ: 64 F32 ('grad') against "
                             "32 F32 ('grad')"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("ALL_REDUCE MEAN of 32 F32 ('grad')"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("'backward' body[1] (microbatch 0)"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, AReductionMismatchIsCaught) {
  std::vector<ProgramBuilder> ranks = dataParallel({16, 16});
  ranks[1].p.mutable_functions(1)->mutable_body(1)->mutable_collective()
      ->set_reduce(pb::SUM);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("reductions differ"), std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, AStartedAllReduceMustBeStartedEverywhere) {
  std::vector<ProgramBuilder> ranks = dataParallel({16, 16});
  for (ProgramBuilder &b : ranks) {
    b.p.mutable_functions(1)->mutable_body(1)->mutable_collective()->set_event(3);
    pb::Event *wait = b.p.mutable_functions(2)->add_body()->mutable_event();
    wait->set_id(3);
    wait->set_wait(true);
  }
  Status ok = checkAll(ranks);
  EXPECT_TRUE(ok) << ok.message();
  ranks[1].p.mutable_functions(1)->mutable_body(1)->mutable_collective()->set_event(0);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("one is started"), std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, MatchingPipelinePasses) {
  Status s = checkAll(pipeline());
  EXPECT_TRUE(s) << s.message();
}

TEST(CommunicationCheck, AReceiveWithTheWrongTagDeadlocks) {
  Status s = check(pipeline(/*recvTag=*/7));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("can deadlock"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 0 at functions[1] 'backward' body[0] "
                             "(microbatch 0): receive 32 F32 ('grad') from "
                             "rank 1 (tag 2)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 1 at functions[0] 'forward' body[0] "
                             "(microbatch 0): receive 32 F32 ('act') from "
                             "rank 0 (tag 7)"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, AMessageOfTheWrongSizeIsCaught) {
  std::vector<ProgramBuilder> ranks = pipeline();
  ranks[1].p.mutable_tensors(0)->set_shape(1, 4);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("ranks 0 and 1 disagree on a message (tag 1)"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, ASendNobodyReceivesIsCaught) {
  std::vector<ProgramBuilder> ranks = pipeline();
  // Stage 0 sends a tensor (tag 5) that stage 1 never receives.
  int extra = ranks[0].f32({4, 8}, "extra");
  sendRecv(ranks[0], 0, true, 1, extra, 5);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("rank 0 at the end of its step: wait for its "
                             "sends to be received: its send 32 F32 ('extra') "
                             "to rank 1 (tag 5)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 1 at the end of its step: the step's loss "
                             "sum: waits for rank 0 to reach it"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, CrossedGroupOrdersDeadlock) {
  // Ranks 0 and 1 share groups A = [0,1,2] and B = [0,1], entered in
  // opposite orders: each waits in the group the other has not reached.
  std::vector<ProgramBuilder> ranks;
  for (int r = 0; r < 3; ++r) {
    ProgramBuilder b(r, 3);
    int a = b.group("a", {0, 1, 2});
    int g = r < 2 ? b.group("b", {0, 1}) : -1;
    int t = b.f32({8}, "t");
    int fw = b.function("forward", pb::FORWARD);
    if (r == 1) {
      collective(b, fw, pb::ALL_REDUCE, g, t, t);
      collective(b, fw, pb::ALL_REDUCE, a, t, t);
    } else {
      collective(b, fw, pb::ALL_REDUCE, a, t, t);
      if (r == 0)
        collective(b, fw, pb::ALL_REDUCE, g, t, t);
    }
    b.step(fw, 0);
    ranks.push_back(std::move(b));
  }
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("can deadlock: 3 rank(s) wait"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 1 at functions[0] 'forward' body[0] "
                             "(microbatch 0): ALL_REDUCE SUM of 8 F32 ('t') "
                             "on group 'b' [0,1]"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, OverwritingAPendingSendWaitsForItsReceive) {
  // Both ranks send, overwrite the sent tensor, then receive: on host
  // memory each overwrite waits for the other's receive (a deadlock); with
  // sends staged through host copies it runs.
  std::vector<ProgramBuilder> ranks;
  for (int r = 0; r < 2; ++r) {
    ProgramBuilder b(r, 2);
    b.group("data", {r});
    int out = b.f32({16}, "out");
    int in = b.f32({16}, "in");
    int fw = b.function("forward", pb::FORWARD);
    sendRecv(b, fw, true, 1 - r, out, 1);
    b.kernel(fw, "fill", {}, {out});
    sendRecv(b, fw, false, 1 - r, in, 1);
    b.step(fw, 0);
    ranks.push_back(std::move(b));
  }
  Status host = check(ranks);
  ASSERT_FALSE(host);
  EXPECT_NE(host.message().find("must be received before it can overwrite "
                                "16 F32 ('out')"),
            std::string::npos)
      << host.message();
  CommunicationCheckOptions staged;
  staged.stagedSends = true;
  Status s = check(ranks, staged);
  EXPECT_TRUE(s) << s.message();
}

TEST(CommunicationCheck, ProgramsFromDifferentCompilesAreRefused) {
  std::vector<ProgramBuilder> ranks = dataParallel({8, 8});
  ranks[1].p.mutable_mesh()->set_world_size(4);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not from one compile"), std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, AGroupAMemberDoesNotHoldIsRefused) {
  std::vector<ProgramBuilder> ranks = dataParallel({8, 8});
  ranks[1].p.mutable_mesh()->mutable_groups(0)->set_ranks(0, 1);
  ranks[1].p.mutable_mesh()->mutable_groups(0)->set_ranks(1, 1);
  Status s = check(ranks);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("which rank 1's program does not have"),
            std::string::npos)
      << s.message();
}

} // namespace

namespace {

/// Writes the ranks' programs, sealed as the emitter does, to files of a
/// fresh folder; their paths in rank order.
std::vector<std::string> writeFiles(const std::vector<ProgramBuilder> &ranks,
                                    const std::string &name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> programs, paths;
  for (const ProgramBuilder &b : ranks)
    programs.push_back(b.p.SerializeAsString());
  std::string fingerprint = compileFingerprint(programs);
  for (size_t r = 0; r < ranks.size(); ++r) {
    paths.push_back(dir + "/rank-" + std::to_string(r) + ".pb");
    std::ofstream(paths.back(), std::ios::binary)
        << sealProgram(programs[r], fingerprint);
  }
  return paths;
}

} // namespace

TEST(CommunicationCheck, FilesEqualUpToTheirRankShareOneProgram) {
  size_t read = 0;
  Status s = checkCommunicationOfFiles(
      writeFiles(dataParallel({64, 64, 64, 64}), "shared"), &read);
  EXPECT_TRUE(s) << s.message();
  EXPECT_EQ(read, 1u);
}

TEST(CommunicationCheck, AFileThatDiffersFromItsRoleIsCheckedInFull) {
  size_t read = 0;
  Status s = checkCommunicationOfFiles(
      writeFiles(dataParallel({64, 64, 32, 64}), "differs"), &read);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("ranks 0 and 2 disagree on collective #1"),
            std::string::npos)
      << s.message();
}

TEST(CommunicationCheck, PipelineFilesMapTheirPeersThroughTheirGroups) {
  // Two data replicas of a two-stage pipeline: ranks 2 and 3 are ranks 0
  // and 1 with their peers and pipeline group moved by two.
  std::vector<ProgramBuilder> ranks;
  for (int r = 0; r < 4; ++r) {
    int stage = r % 2, replica = r / 2, peer = replica * 2 + 1 - stage;
    ProgramBuilder b(r, 4);
    b.p.mutable_mesh()->set_pipeline_rank(stage);
    b.group("data", {stage, stage + 2});
    b.group("pipeline", {replica * 2, replica * 2 + 1});
    int act = b.f32({4, 8}, "act");
    int fw = b.function("forward", pb::FORWARD);
    if (stage == 0) {
      b.kernel(fw, "matmul", {}, {act});
      sendRecv(b, fw, true, peer, act, 1);
    } else {
      sendRecv(b, fw, false, peer, act, 1);
    }
    b.step(fw, 0);
    ranks.push_back(std::move(b));
  }
  size_t read = 0;
  Status s = checkCommunicationOfFiles(writeFiles(ranks, "pipeline"), &read);
  EXPECT_TRUE(s) << s.message();
  EXPECT_EQ(read, 2u);
  // Rank 3 receiving with another tag is no shift of rank 1: read in full,
  // and the check finds the receive that waits forever.
  ranks[3].p.mutable_functions(0)->mutable_body(0)->mutable_send_recv()->set_tag(
      7);
  s = checkCommunicationOfFiles(writeFiles(ranks, "pipeline-tag"), &read);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("can deadlock"), std::string::npos) << s.message();
  EXPECT_EQ(read, 3u);
}
