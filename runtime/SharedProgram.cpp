//===- SharedProgram.cpp - rank files that hold a shared program by reference //
#include "runtime/SharedProgram.h"
#include "runtime/ProgramSeal.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace cleave::runtime;
namespace pb = cleave::program;

namespace {

const char *kRecompile =
    "copy the whole output folder of one compile (its rank-*.pb and "
    "role-*.pb files together), or recompile";

} // namespace

std::string cleave::runtime::sharedProgramFileName(int role) {
  return "role-" + std::to_string(role) + ".pb";
}

Status cleave::runtime::readSharedProgram(const pb::Program &header,
                                          const std::string &name,
                                          const std::string &directory,
                                          pb::Program &shared) {
  if (header.version() != pb::VERSION_SHARED || !header.has_shared())
    return Status::error(
        name + ": " +
        (header.has_shared()
             ? "names a shared program (field 'shared') but is not of "
               "version " + std::to_string(pb::VERSION_SHARED)
             : "is of version " + std::to_string(pb::VERSION_SHARED) +
                   " (a rank file that holds a shared program by "
                   "reference) but names none (field 'shared')") +
        ": the file was changed after cleave-compile wrote it; " + kRecompile);
  const std::string &file = header.shared().path();
  if (file.empty() || file == "." || file == ".." ||
      file.find('/') != std::string::npos)
    return Status::error(name + ": shared.path '" + file.substr(0, 80) +
                         "' is not a file name in the program's folder "
                         "(cleave-compile writes role-<k>.pb); " +
                         kRecompile);
  std::string path = directory.empty() ? file : directory + "/" + file;
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  if (in)
    contents << in.rdbuf();
  if (!in)
    return Status::error(
        name + ": its program is shared with the other data-parallel ranks "
               "of its pipeline and tensor coordinate and is in " +
        path + ", which cannot be read (" + std::strerror(errno) +
        "): copy every role-*.pb of the compile beside its rank-*.pb "
        "files, or recompile");
  std::string bytes = contents.str();
  if (Status sealed = checkProgramSeal(bytes, path); !sealed)
    return Status::error(name + ": its shared program " + sealed.message());
  shared.Clear();
  if (!shared.ParseFromString(bytes) || shared.magic() != "cleave-program")
    return Status::error(name + ": its shared program " + path +
                         " is not a cleave program; " + kRecompile);
  if (isSharedHeader(shared))
    return Status::error(name + ": its shared program " + path +
                         " is itself a rank file that names a shared "
                         "program; " + kRecompile);
  if (shared.version() != pb::VERSION_CURRENT &&
      shared.version() != pb::VERSION_PIECES)
    return Status::error(
        name + ": its shared program " + path + " is of version " +
        std::to_string(shared.version()) + ", but this cleave-run reads " +
        std::to_string(pb::VERSION_CURRENT) + " and " +
        std::to_string(pb::VERSION_PIECES) +
        ": compile the model again with the cleave-compile of this release");
  if (shared.sha256() != header.shared().sha256())
    return Status::error(
        name + " was compiled with a shared program of SHA-256 " +
        header.shared().sha256().substr(0, 64) + ", but " + path +
        " has SHA-256 " + shared.sha256() +
        ": the two files come from different compiles; " + kRecompile);
  return Status::ok();
}

std::set<int> cleave::runtime::sendRecvPeers(const pb::Program &program) {
  std::set<int> peers;
  for (const pb::Function &fn : program.functions())
    for (const pb::Instruction &inst : fn.body())
      if (inst.has_send_recv())
        peers.insert(inst.send_recv().peer());
  return peers;
}

Status cleave::runtime::sharedPeerMap(const pb::Program &header,
                                      const std::set<int> &peers,
                                      const std::string &name,
                                      std::map<int, int> &peerOf) {
  peerOf.clear();
  const std::string &file = header.shared().path();
  for (const pb::PeerMap &entry : header.shared().peers()) {
    if (!peers.count(entry.from()))
      return Status::error(name + ": shared.peers maps rank " +
                           std::to_string(entry.from()) + ", but " + file +
                           " neither sends to nor receives from it; " +
                           kRecompile);
    if (!peerOf.emplace(entry.from(), entry.to()).second)
      return Status::error(name + ": shared.peers maps rank " +
                           std::to_string(entry.from()) + " twice; " +
                           kRecompile);
  }
  for (int peer : peers)
    if (!peerOf.count(peer))
      return Status::error(name + ": " + file +
                           " sends to or receives from rank " +
                           std::to_string(peer) +
                           ", which shared.peers does not map to this "
                           "rank's peer; " + kRecompile);
  return Status::ok();
}

Status cleave::runtime::joinSharedProgram(const pb::Program &header,
                                          pb::Program &&shared,
                                          const std::string &name,
                                          pb::Program &joined) {
  std::map<int, int> peerOf;
  CLEAVE_CHECK(sharedPeerMap(header, sendRecvPeers(shared), name, peerOf));
  for (const pb::ConstantData &constant : header.shared().constants())
    if (constant.tensor() < 0 || constant.tensor() >= shared.tensors_size() ||
        shared.tensors(constant.tensor()).category() != pb::CONSTANTS)
      return Status::error(
          name + ": shared.constants names tensor " +
          std::to_string(constant.tensor()) + ", which is no constant of " +
          header.shared().path() + "; " + kRecompile);
  for (const pb::ParameterSlice &slice : header.shared().slices()) {
    size_t starts = 0;
    if (slice.parameter() >= 0 && slice.parameter() < shared.parameters_size())
      for (const pb::Box &box : shared.parameters(slice.parameter()).pieces())
        starts += size_t(box.start_size());
    if (slice.parameter() < 0 ||
        slice.parameter() >= shared.parameters_size() ||
        slice.slice_start_size() !=
            shared.parameters(slice.parameter()).slice_start_size() ||
        (slice.slice_size_size() != 0 &&
         slice.slice_size_size() !=
             shared.parameters(slice.parameter()).slice_size_size()) ||
        size_t(slice.pieces_start_size()) != starts)
      return Status::error(
          name + ": shared.slices names parameter " +
          std::to_string(slice.parameter()) + " of " +
          header.shared().path() +
          ", which has no such parameter or another number of axes or "
          "pieces; " + kRecompile);
  }
  joined = std::move(shared);
  *joined.mutable_mesh() = header.mesh();
  if (header.has_batch())
    *joined.mutable_batch() = header.batch();
  else
    joined.clear_batch();
  for (pb::Function &fn : *joined.mutable_functions())
    for (pb::Instruction &inst : *fn.mutable_body())
      if (inst.has_send_recv())
        inst.mutable_send_recv()->set_peer(
            peerOf.at(inst.send_recv().peer()));
  for (const pb::ConstantData &constant : header.shared().constants())
    joined.mutable_tensors(constant.tensor())->set_data(constant.data());
  for (const pb::ParameterSlice &slice : header.shared().slices()) {
    pb::Parameter *param = joined.mutable_parameters(slice.parameter());
    *param->mutable_slice_start() = slice.slice_start();
    if (slice.slice_size_size())
      *param->mutable_slice_size() = slice.slice_size();
    int at = 0;
    for (pb::Box &box : *param->mutable_pieces())
      for (int64_t &start : *box.mutable_start())
        start = slice.pieces_start(at++);
  }
  joined.set_compile_fingerprint(header.compile_fingerprint());
  joined.set_sha256(header.sha256());
  joined.clear_shared();
  return Status::ok();
}
