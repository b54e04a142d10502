//===- ProgramSplice.cpp - a program's bytes for many ranks at once -------===//
#include "runtime/ProgramSplice.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

using namespace cleave::runtime;
namespace pb = cleave::program;
using google::protobuf::internal::WireFormatLite;

bool cleave::runtime::serializeDeterministic(
    const google::protobuf::MessageLite &message, std::string &out) {
  out.clear();
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  bool ok = message.SerializeToCodedStream(&coded);
  coded.Trim();
  return ok && !coded.HadError();
}

namespace {

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(char(uint8_t(value) | 0x80));
    value >>= 7;
  }
  out.push_back(char(value));
}

/// Appends field `number` holding `message`, as its parent writes it.
bool appendMessage(std::string &out, int number,
                   const google::protobuf::MessageLite &message) {
  std::string bytes;
  if (!serializeDeterministic(message, bytes))
    return false;
  appendVarint(out, (uint64_t(number) << 3) |
                        WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  appendVarint(out, bytes.size());
  out += bytes;
  return true;
}

/// The offset of the first top-level field numbered above `number` in
/// serialized `bytes` (its size if none).
size_t offsetAfter(const std::string &bytes, int number) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t *>(bytes.data()), int(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  for (;;) {
    size_t at = size_t(in.CurrentPosition());
    uint32_t tag = in.ReadTag();
    if (!tag || WireFormatLite::GetTagFieldNumber(tag) > number ||
        !WireFormatLite::SkipField(&in, tag))
      return tag ? at : bytes.size();
  }
}

} // namespace

ProgramSplice::ProgramSplice(const pb::Program &program) {
  pb::Program rest = program;
  rest.clear_mesh();
  rest.clear_batch();
  rest.clear_functions();
  std::string bytes;
  if (!serializeDeterministic(rest, bytes))
    return;
  size_t cut1 = offsetAfter(bytes, pb::Program::kBatchFieldNumber);
  size_t cut2 = offsetAfter(bytes, pb::Program::kFunctionsFieldNumber);
  before_ = bytes.substr(0, cut1);
  between_ = bytes.substr(cut1, cut2 - cut1);
  after_ = bytes.substr(cut2);
  // Fields numbered below the mesh's come first, those between the batch's
  // and the functions' next: the cut is right only if none lies between.
  if (offsetAfter(before_, pb::Program::kMeshFieldNumber - 1) !=
      before_.size())
    return;
  *functions_.mutable_functions() = program.functions();
  peers_.resize(program.functions_size());
  for (int f = 0; f < program.functions_size(); ++f) {
    pb::Function *fn = functions_.mutable_functions(f);
    for (pb::Instruction &inst : *fn->mutable_body())
      if (inst.has_send_recv())
        peers_[f].emplace_back(inst.mutable_send_recv(),
                               inst.send_recv().peer());
    std::string encoded;
    if (peers_[f].empty() &&
        !appendMessage(encoded, pb::Program::kFunctionsFieldNumber, *fn))
      return;
    encoded_.push_back(std::move(encoded));
  }
  ok_ = true;
}

bool ProgramSplice::write(const pb::Mesh &mesh, const pb::Batch *batch,
                          const std::function<int(int)> &peerOf,
                          std::string &out) {
  out = before_;
  if (!appendMessage(out, pb::Program::kMeshFieldNumber, mesh) ||
      (batch && !appendMessage(out, pb::Program::kBatchFieldNumber, *batch)))
    return false;
  out += between_;
  for (size_t f = 0; f < encoded_.size(); ++f) {
    if (peers_[f].empty()) {
      out += encoded_[f];
      continue;
    }
    for (auto &[sendRecv, peer] : peers_[f])
      sendRecv->set_peer(peerOf(peer));
    if (!appendMessage(out, pb::Program::kFunctionsFieldNumber,
                       functions_.functions(int(f))))
      return false;
  }
  out += after_;
  return true;
}
