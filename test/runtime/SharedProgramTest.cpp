//===- SharedProgramTest.cpp - joining a rank header with its shared program ===//
//
// runtime/SharedProgram.h on hand-built programs: the join gives the rank's
// mesh, batch, peers, slice starts and constants, and each way a header and
// its shared program can disagree is an error naming the header.
//
//===----------------------------------------------------------------------===//

#include "TestPrograms.h"
#include "runtime/ProgramSeal.h"
#include "runtime/ProgramSplice.h"
#include "runtime/SharedProgram.h"

#include <gtest/gtest.h>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

/// A shared program: a send to rank 1, a constant (tensor 0), a parameter
/// (tensor 1) sliced at [0, 0] with one piece.
pb::Program sharedProgram() {
  pb::Program p;
  p.set_magic("cleave-program");
  p.set_version(pb::VERSION_PIECES);
  p.mutable_mesh()->set_rank(0);
  p.mutable_batch()->set_first_sample(0);
  pb::Tensor *constant = p.add_tensors();
  constant->set_category(pb::CONSTANTS);
  constant->set_data(std::string(8, '\0'));
  p.add_tensors()->set_category(pb::PARAMETERS);
  pb::Parameter *param = p.add_parameters();
  param->set_tensor(1);
  param->add_slice_start(0);
  param->add_slice_start(0);
  pb::Box *box = param->add_pieces();
  box->add_start(0);
  box->add_start(0);
  pb::SendRecv *send = p.add_functions()->add_body()->mutable_send_recv();
  send->set_send(true);
  send->set_peer(1);
  return p;
}

/// Rank 5's header: peer 1 is its 7, its slice starts at [4, 0], its
/// constant holds 1.
pb::Program header() {
  pb::Program h;
  h.set_magic("cleave-program");
  h.set_version(pb::VERSION_SHARED);
  h.mutable_mesh()->set_rank(5);
  h.mutable_batch()->set_first_sample(12);
  pb::SharedProgram *shared = h.mutable_shared();
  shared->set_path("role-0.pb");
  pb::PeerMap *peer = shared->add_peers();
  peer->set_from(1);
  peer->set_to(7);
  pb::ParameterSlice *slice = shared->add_slices();
  slice->add_slice_start(4);
  slice->add_slice_start(0);
  slice->add_pieces_start(4);
  slice->add_pieces_start(0);
  pb::ConstantData *constant = shared->add_constants();
  constant->set_data(std::string("\1\0\0\0\0\0\0\0", 8));
  h.set_compile_fingerprint("f");
  return h;
}

std::string joinError(const pb::Program &h, pb::Program shared) {
  pb::Program joined;
  Status status = joinSharedProgram(h, std::move(shared), "rank-5.pb", joined);
  return status ? "" : status.message();
}

TEST(SharedProgram, JoinGivesTheRanksProgram) {
  pb::Program joined;
  ASSERT_TRUE(
      joinSharedProgram(header(), sharedProgram(), "rank-5.pb", joined));
  EXPECT_EQ(joined.version(), pb::VERSION_PIECES);
  EXPECT_EQ(joined.mesh().rank(), 5);
  EXPECT_EQ(joined.batch().first_sample(), 12);
  EXPECT_EQ(joined.functions(0).body(0).send_recv().peer(), 7);
  EXPECT_EQ(joined.parameters(0).slice_start(0), 4);
  EXPECT_EQ(joined.parameters(0).pieces(0).start(0), 4);
  EXPECT_EQ(joined.tensors(0).data()[0], '\1');
  EXPECT_EQ(joined.compile_fingerprint(), "f");
  EXPECT_FALSE(joined.has_shared());
}

TEST(SharedProgram, HeaderThatDoesNotFitIsRefused) {
  pb::Program h = header();
  h.mutable_shared()->clear_peers();
  EXPECT_EQ(joinError(h, sharedProgram()),
            "rank-5.pb: role-0.pb sends to or receives from rank 1, which "
            "shared.peers does not map to this rank's peer; copy the whole "
            "output folder of one compile (its rank-*.pb and role-*.pb files "
            "together), or recompile");
  h = header();
  h.mutable_shared()->mutable_constants(0)->set_tensor(1);
  EXPECT_EQ(joinError(h, sharedProgram()).find(
                "rank-5.pb: shared.constants names tensor 1, which is no "
                "constant of role-0.pb"),
            0u);
  h = header();
  h.mutable_shared()->mutable_slices(0)->add_slice_start(0);
  EXPECT_EQ(joinError(h, sharedProgram()).substr(0, 56),
            "rank-5.pb: shared.slices names parameter 0 of role-0.pb,");
  h = header();
  h.mutable_shared()->mutable_slices(0)->set_parameter(3);
  EXPECT_NE(joinError(h, sharedProgram()).find("names parameter 3"),
            std::string::npos);
}

TEST(SharedProgram, ReadChecksTheFileAndItsChecksum) {
  TempDir dir;
  std::string bytes;
  ASSERT_TRUE(serializeDeterministic(sharedProgram(), bytes));
  std::string sealed = sealProgram(bytes, "");
  writeFile(dir.file("role-0.pb"), sealed);
  pb::Program h = header(), shared;
  h.mutable_shared()->set_sha256(sealed.substr(sealed.size() - 64));
  EXPECT_TRUE(readSharedProgram(h, "rank-5.pb", dir.path(), shared));
  h.mutable_shared()->set_sha256(std::string(64, '0'));
  Status status = readSharedProgram(h, "rank-5.pb", dir.path(), shared);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("come from different compiles"),
            std::string::npos);
  h.set_version(pb::VERSION_PIECES);
  status = readSharedProgram(h, "rank-5.pb", dir.path(), shared);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("but is not of version 3"),
            std::string::npos);
}

} // namespace
