//===- ProgramLoader.cpp - read and validate a per-rank program -----------===//

#include "runtime/ProgramLoader.h"
#include "runtime/ProgramSeal.h"
#include "runtime/SharedProgram.h"
#include "runtime/Sha256.h"
#include "runtime/ops/OpTable.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/wire_format_lite.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

using namespace cleave::runtime;
namespace pb = cleave::program;
using google::protobuf::internal::WireFormatLite;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

std::string cleave::runtime::directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

std::string cleave::runtime::resolveProgramPath(const std::string &directory,
                                                const std::string &path) {
  if (path.empty() || path[0] == '/' || directory.empty())
    return path;
  return directory + "/" + path;
}

int64_t cleave::runtime::samplesRead(const pb::Batch &batch) {
  return batch.microbatch_size() / std::max<int64_t>(batch.read_parts(), 1);
}

DType cleave::runtime::tensorDType(const pb::Tensor &tensor) {
  return DType(int(tensor.dtype()));
}

int64_t cleave::runtime::tensorElements(const pb::Tensor &tensor) {
  int64_t n = 1;
  for (int64_t d : tensor.shape())
    n *= d;
  return n;
}

uint64_t cleave::runtime::tensorBytes(const pb::Tensor &tensor) {
  return uint64_t(tensorElements(tensor)) * dtypeSize(tensorDType(tensor));
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }
std::string ustr(uint64_t v) { return std::to_string(v); }

std::string shapeText(const google::protobuf::RepeatedField<int64_t> &shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + str(shape[i]);
  return s + "]";
}

bool isPowerOfTwo(uint64_t v) { return v && !(v & (v - 1)); }

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

bool isTokenType(DType t) {
  return t == DType::I32 || t == DType::I64 || t == DType::U16 ||
         t == DType::U32 || t == DType::U64;
}

/// Elements of `shape`, or -1 if a dimension is negative or the product
/// does not fit in 2^62 (so that bytes never overflow either).
int64_t checkedElements(const google::protobuf::RepeatedField<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > (int64_t(1) << 62) / d)
      return -1;
    n *= d;
  }
  return n;
}

/// The name of field `number` of Program, for messages about bad bytes.
std::string programFieldName(int number) {
  const google::protobuf::FieldDescriptor *field =
      pb::Program::descriptor()->FindFieldByNumber(number);
  return field ? "'" + field->name() + "'" : "number " + str(number);
}

/// Walks the top-level fields of a serialized Program, so a bad or cut file
/// is reported with the byte where it goes wrong, which ParseFromString does
/// not say.
Status checkWireFormat(const std::string &bytes, const std::string &name) {
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  int size = int(bytes.size());
  google::protobuf::io::CodedInputStream in(data, size);
  while (true) {
    int offset = in.CurrentPosition();
    if (offset == size)
      return Status::ok();
    uint32_t tag = in.ReadTag();
    int number = int(WireFormatLite::GetTagFieldNumber(tag));
    auto wireType = WireFormatLite::GetTagWireType(tag);
    if (tag == 0 || number == 0)
      return Status::error(name + ": not a cleave program: invalid protobuf "
                                  "field tag at byte " +
                           str(offset) + " of " + str(size));
    if (wireType == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length))
        return Status::error(name + ": truncated or not a cleave program: "
                                    "field " +
                             programFieldName(number) + " at byte " +
                             str(offset) + " has no valid length");
      int at = in.CurrentPosition();
      if (uint64_t(at) + length > uint64_t(size))
        return Status::error(
            name + ": truncated or not a cleave program: field " +
            programFieldName(number) + " at byte " + str(offset) + " needs " +
            ustr(length) + " bytes after byte " + str(at) +
            ", but the file ends at byte " + str(size));
      if (!in.Skip(int(length)))
        return Status::error(name + ": truncated at byte " + str(at));
      continue;
    }
    if (wireType == WireFormatLite::WIRETYPE_START_GROUP ||
        wireType == WireFormatLite::WIRETYPE_END_GROUP ||
        !WireFormatLite::SkipField(&in, tag))
      return Status::error(name + ": truncated or not a cleave program: bad "
                                  "protobuf field " +
                           programFieldName(number) + " at byte " +
                           str(offset) + " of " + str(size));
  }
}

//===----------------------------------------------------------------------===//
// The validator
//===----------------------------------------------------------------------===//

class Validator {
public:
  Validator(const pb::Program &program, const std::string &name,
            const std::string &directory)
      : p(program), name(name), directory(directory) {}

  Status run() {
    if (!p.has_memory())
      return Status::error(
          name + ": the program has no memory plan (field 'memory', the "
                 "last one written): the file is truncated or was not "
                 "written by cleave-compile");
    CLEAVE_CHECK(checkMesh());
    CLEAVE_CHECK(checkBuffers());
    CLEAVE_CHECK(checkTensors());
    CLEAVE_CHECK(checkBatch());
    CLEAVE_CHECK(checkFunctions());
    CLEAVE_CHECK(checkSchedule());
    CLEAVE_CHECK(checkParameters());
    CLEAVE_CHECK(checkBindings());
    return Status::ok();
  }

private:
  Status fail(const std::string &where, const std::string &message) const {
    return Status::error(name + ": " + where + ": " + message);
  }

  /// "input 3 is tensor 999, but the program has 310 tensors".
  Status tensorId(int64_t id, const std::string &where,
                  const std::string &what) const {
    if (id < 0 || id >= p.tensors_size())
      return fail(where, what + " is tensor " + str(id) +
                             ", but the program has " + str(p.tensors_size()) +
                             " tensors");
    return Status::ok();
  }

  /// A tensor an instruction writes: in range and not a constant.
  Status writable(int64_t id, const std::string &where,
                  const std::string &what) const {
    CLEAVE_CHECK(tensorId(id, where, what));
    if (p.tensors(id).category() == pb::CONSTANTS)
      return fail(where, what + " is tensor " + str(id) + " '" +
                             p.tensors(id).name() +
                             "', a constant, which nothing may write");
    return Status::ok();
  }

  /// Kernels, collectives and transfers work on device memory: a tensor
  /// of a HOST buffer (offloaded activations) is only a copy's.
  Status onDevice(const pb::Instruction &inst, const std::string &at) const {
    std::vector<int64_t> ids;
    auto add = [&](const auto &list) {
      ids.insert(ids.end(), list.begin(), list.end());
    };
    if (inst.has_kernel()) {
      add(inst.kernel().inputs());
      add(inst.kernel().outputs());
    }
    if (inst.has_collective()) {
      add(inst.collective().inputs());
      add(inst.collective().outputs());
    }
    if (inst.has_send_recv())
      ids.push_back(inst.send_recv().tensor());
    for (int64_t id : ids) {
      if (id < 0 || id >= p.tensors_size())
        continue; // out of range: the instruction's own check says so
      int b = p.tensors(id).buffer();
      if (b >= 0 && b < p.buffers_size() && p.buffers(b).space() == pb::HOST)
        return fail(at, "reads or writes " + tensorText(id) + " '" +
                            p.tensors(id).name() + "' of HOST buffer " +
                            str(b) + "; only a copy moves host tensors");
    }
    return Status::ok();
  }

  std::string tensorText(int64_t id) const {
    const pb::Tensor &t = p.tensors(id);
    return "tensor " + str(id) + " (" + dtypeName(tensorDType(t)) +
           shapeText(t.shape()) + ")";
  }

  Status checkMesh() {
    const pb::Mesh &m = p.mesh();
    if (m.world_size() < 1)
      return fail("mesh.world_size", "is " + str(m.world_size()) +
                                         ", expected at least 1");
    if (m.rank() < 0 || m.rank() >= m.world_size())
      return fail("mesh.rank", "is " + str(m.rank()) + ", outside [0, " +
                                   str(m.world_size()) + ")");
    struct Axis {
      const char *name;
      int32_t degree, rank;
    } axes[] = {{"data", m.data_degree(), m.data_rank()},
                {"pipeline", m.pipeline_degree(), m.pipeline_rank()},
                {"tensor", m.tensor_degree(), m.tensor_rank()}};
    int64_t product = 1;
    for (const Axis &a : axes) {
      if (a.degree < 1)
        return fail(std::string("mesh.") + a.name + "_degree",
                    "is " + str(a.degree) + ", expected at least 1");
      if (a.rank < 0 || a.rank >= a.degree)
        return fail(std::string("mesh.") + a.name + "_rank",
                    "is " + str(a.rank) + ", outside [0, " + str(a.degree) +
                        ")");
      product *= a.degree;
    }
    if (product != m.world_size())
      return fail("mesh", "data_degree " + str(m.data_degree()) +
                              " x pipeline_degree " +
                              str(m.pipeline_degree()) + " x tensor_degree " +
                              str(m.tensor_degree()) + " = " + str(product) +
                              ", but world_size is " + str(m.world_size()));
    std::set<std::string> names;
    for (int g = 0; g < m.groups_size(); ++g) {
      const pb::Group &group = m.groups(g);
      std::string where = "mesh.groups[" + str(g) + "] '" + group.name() + "'";
      if (group.name().empty())
        return fail(where, "has no name");
      if (!names.insert(group.name()).second)
        return fail(where, "a second group of this name");
      if (group.ranks_size() == 0)
        return fail(where, "has no ranks");
      std::set<int> seen;
      for (int r : group.ranks()) {
        if (r < 0 || r >= m.world_size())
          return fail(where, "holds rank " + str(r) + ", outside [0, " +
                                 str(m.world_size()) + ")");
        if (!seen.insert(r).second)
          return fail(where, "holds rank " + str(r) + " twice");
      }
      if (!seen.count(m.rank()))
        return fail(where, "does not hold this rank (" + str(m.rank()) +
                               "); a program lists only its own groups");
    }
    return Status::ok();
  }

  Status checkBuffers() {
    for (int b = 0; b < p.buffers_size(); ++b) {
      const pb::Buffer &buffer = p.buffers(b);
      std::string where = "buffers[" + str(b) + "]";
      if (!pb::MemorySpace_IsValid(buffer.space()))
        return fail(where, "unknown memory space " + str(buffer.space()));
      if (!isPowerOfTwo(buffer.alignment()) ||
          buffer.alignment() > (uint64_t(1) << 30))
        return fail(where, "alignment " + ustr(buffer.alignment()) +
                               " is not a power of two up to 2^30");
    }
    return Status::ok();
  }

  Status checkTensors() {
    for (int i = 0; i < p.tensors_size(); ++i) {
      const pb::Tensor &t = p.tensors(i);
      std::string where = "tensors[" + str(i) + "]";
      if (!t.name().empty())
        where += " '" + t.name() + "'";
      if (t.buffer() < 0 || t.buffer() >= p.buffers_size())
        return fail(where, "buffer " + str(t.buffer()) +
                               ", but the program has " +
                               str(p.buffers_size()) + " buffers");
      if (t.dtype() == pb::DTYPE_UNSPECIFIED || !pb::DType_IsValid(t.dtype()))
        return fail(where, "unknown element type " + str(t.dtype()));
      if (!pb::Category_IsValid(t.category()))
        return fail(where, "unknown category " + str(t.category()));
      for (int d = 0; d < t.shape_size(); ++d)
        if (t.shape(d) < 0)
          return fail(where, "dimension " + str(d) + " of shape " +
                                 shapeText(t.shape()) + " is negative");
      int64_t n = checkedElements(t.shape());
      if (n < 0)
        return fail(where, "shape " + shapeText(t.shape()) + " is too large");
      uint64_t bytes = uint64_t(n) * dtypeSize(tensorDType(t));
      const pb::Buffer &buffer = p.buffers(t.buffer());
      if (t.offset() % buffer.alignment())
        return fail(where, "offset " + ustr(t.offset()) +
                               " is not a multiple of buffer " +
                               str(t.buffer()) + "'s alignment " +
                               ustr(buffer.alignment()));
      if (t.offset() > buffer.size_bytes() ||
          bytes > buffer.size_bytes() - t.offset())
        return fail(where, "bytes [" + ustr(t.offset()) + ", " +
                               ustr(t.offset() + bytes) + ") of buffer " +
                               str(t.buffer()) + " are outside its " +
                               ustr(buffer.size_bytes()) + " bytes");
      if (t.category() == pb::CONSTANTS) {
        if (t.data().size() != bytes)
          return fail(where, "a constant of " + ustr(bytes) +
                                 " bytes, but its data holds " +
                                 ustr(t.data().size()));
      } else if (!t.data().empty()) {
        return fail(where, "has data, but only constants carry data");
      }
    }
    return Status::ok();
  }

  Status checkBatch() {
    const pb::Batch &b = p.batch();
    struct Field {
      const char *name;
      int64_t value;
    } fields[] = {{"global_batch", b.global_batch()},
                  {"microbatch_size", b.microbatch_size()},
                  {"microbatches", b.microbatches()},
                  {"seq_len", b.seq_len()},
                  {"first_sample", b.first_sample()},
                  {"read_parts", b.read_parts()},
                  {"read_part", b.read_part()}};
    for (const Field &f : fields)
      if (f.value < 0 || f.value > (int64_t(1) << 40))
        return fail(std::string("batch.") + f.name,
                    "is " + str(f.value) + ", outside [0, 2^40]");
    if (b.first_sample() + b.microbatches() * b.microbatch_size() >
        b.global_batch())
      return fail("batch", "samples [" + str(b.first_sample()) + ", " +
                               str(b.first_sample() +
                                   b.microbatches() * b.microbatch_size()) +
                               ") of this rank (" + str(b.microbatches()) +
                               " microbatches of " + str(b.microbatch_size()) +
                               ") are not within the global batch of " +
                               str(b.global_batch()));
    int64_t parts = std::max<int64_t>(b.read_parts(), 1);
    if (b.microbatch_size() % parts != 0)
      return fail("batch.read_parts",
                  "is " + str(parts) + ", which does not divide the " +
                      "microbatch of " + str(b.microbatch_size()) +
                      " samples into equal parts");
    if (b.read_part() >= parts)
      return fail("batch.read_part",
                  "is " + str(b.read_part()) + ", not a part of the " +
                      str(parts) + " a microbatch is read in");
    return Status::ok();
  }

  Status checkKernel(const pb::Kernel &k, const std::string &at) {
    std::string where = at + ".kernel '" + k.op() + "'";
    if (!k.location().empty())
      where += " (" + k.location() + ")";
    // The shared op table (runtime/ops/), which every backend implements
    // in full (their kernel tests check it), not one backend's list.
    const std::vector<std::string> &ops = tableOps();
    if (k.op().empty())
      return fail(at + ".kernel", "has no op");
    if (!std::binary_search(ops.begin(), ops.end(), k.op()))
      return fail(where, "unknown op: it is not in the runtime's op table, "
                         "so no backend has a kernel for it");
    for (int i = 0; i < k.inputs_size(); ++i)
      if (k.inputs(i) != -1)
        CLEAVE_CHECK(tensorId(k.inputs(i), where, "input " + str(i)));
    if (k.outputs_size() == 0)
      return fail(where, "has no outputs");
    for (int i = 0; i < k.outputs_size(); ++i)
      CLEAVE_CHECK(writable(k.outputs(i), where, "output " + str(i)));
    for (const auto &[key, value] : k.attributes())
      if (value.value_case() == pb::Attribute::VALUE_NOT_SET)
        return fail(where, "attribute '" + key + "' has no value");
    return Status::ok();
  }

  Status checkCollective(const pb::Collective &c, const std::string &at) {
    std::string where = at + ".collective";
    if (!pb::CollectiveKind_IsValid(c.kind()))
      return fail(where, "unknown kind " + str(c.kind()));
    where += " " + pb::CollectiveKind_Name(c.kind());
    if (!pb::ReduceOp_IsValid(c.reduce()))
      return fail(where, "unknown reduction " + str(c.reduce()));
    if (c.group() < 0 || c.group() >= p.mesh().groups_size())
      return fail(where, "group " + str(c.group()) + ", but the mesh has " +
                             str(p.mesh().groups_size()) + " groups");
    int64_t members = p.mesh().groups(c.group()).ranks_size();
    if (c.inputs_size() == 0 || c.inputs_size() != c.outputs_size())
      return fail(where, str(c.inputs_size()) + " inputs and " +
                             str(c.outputs_size()) +
                             " outputs; expected one output per input");
    if (c.event() < 0)
      return fail(where, "negative event " + str(c.event()));
    if (c.event() > 0 && c.kind() == pb::BROADCAST)
      return fail(where, "only an ALL_REDUCE, a REDUCE_SCATTER or an "
                         "ALL_GATHER can be started without waiting (event " +
                             str(c.event()) + ")");
    for (int i = 0; c.event() > 0 && c.kind() == pb::ALL_REDUCE &&
                    i < c.inputs_size();
         ++i)
      if (c.inputs(i) != c.outputs(i))
        return fail(where, "a started all-reduce works in place, but input " +
                               str(i) + " is tensor " + str(c.inputs(i)) +
                               " and output " + str(i) + " is " +
                               str(c.outputs(i)));
    if (c.kind() == pb::BROADCAST && (c.root() < 0 || c.root() >= members))
      return fail(where, "root " + str(c.root()) + " is not a rank of group " +
                             str(c.group()) + " (" + str(members) +
                             " ranks)");
    for (int i = 0; i < c.inputs_size(); ++i) {
      CLEAVE_CHECK(tensorId(c.inputs(i), where, "input " + str(i)));
      CLEAVE_CHECK(writable(c.outputs(i), where, "output " + str(i)));
      const pb::Tensor &in = p.tensors(c.inputs(i));
      const pb::Tensor &out = p.tensors(c.outputs(i));
      int64_t nIn = tensorElements(in), nOut = tensorElements(out);
      bool fits = in.dtype() == out.dtype() &&
                  (c.kind() == pb::ALL_GATHER      ? nOut == nIn * members
                   : c.kind() == pb::REDUCE_SCATTER ? nIn == nOut * members
                                                    : nIn == nOut);
      if (!fits)
        return fail(where, "input " + str(i) + " is " + tensorText(c.inputs(i)) +
                               " and output " + str(i) + " is " +
                               tensorText(c.outputs(i)) +
                               ", which do not fit over " + str(members) +
                               " ranks");
      bool reduces = c.kind() == pb::ALL_REDUCE ||
                     c.kind() == pb::REDUCE_SCATTER;
      if (reduces && c.reduce() == pb::MEAN && !isFloat(tensorDType(in)))
        return fail(where, "a MEAN of " + tensorText(c.inputs(i)) +
                               ": mean is for floating-point tensors only");
    }
    return Status::ok();
  }

  Status checkInstruction(const pb::Instruction &inst, const std::string &at) {
    CLEAVE_CHECK(onDevice(inst, at));
    switch (inst.kind_case()) {
    case pb::Instruction::kKernel:
      return checkKernel(inst.kernel(), at);
    case pb::Instruction::kCollective:
      return checkCollective(inst.collective(), at);
    case pb::Instruction::kSendRecv: {
      const pb::SendRecv &s = inst.send_recv();
      std::string where = at + (s.send() ? ".send" : ".receive");
      if (s.peer() < 0 || s.peer() >= p.mesh().world_size() ||
          s.peer() == p.mesh().rank())
        return fail(where, "peer " + str(s.peer()) +
                               " is not another rank of the world of " +
                               str(p.mesh().world_size()));
      if (s.tag() < 0 || s.tag() > 32767)
        return fail(where, "tag " + str(s.tag()) + " is outside [0, 32767]");
      if (s.send())
        return tensorId(s.tensor(), where, "the tensor");
      return writable(s.tensor(), where, "the tensor");
    }
    case pb::Instruction::kCopy: {
      const pb::Copy &c = inst.copy();
      std::string where = at + ".copy";
      CLEAVE_CHECK(tensorId(c.source(), where, "the source"));
      CLEAVE_CHECK(writable(c.destination(), where, "the destination"));
      if (tensorBytes(p.tensors(c.source())) !=
          tensorBytes(p.tensors(c.destination())))
        return fail(where, "the source " + tensorText(c.source()) +
                               " and the destination " +
                               tensorText(c.destination()) +
                               " differ in size");
      return Status::ok();
    }
    case pb::Instruction::kEvent:
      if (inst.event().id() < 0)
        return fail(at + ".event", "negative id " + str(inst.event().id()));
      return Status::ok();
    case pb::Instruction::kFree: {
      std::string where = at + ".free";
      int id = inst.free().tensor();
      CLEAVE_CHECK(tensorId(id, where, "the tensor"));
      pb::Category category = p.tensors(id).category();
      if (category == pb::PARAMETERS || category == pb::CONSTANTS ||
          category == pb::VIEW)
        return fail(where, "tensor " + str(id) + " '" + p.tensors(id).name() +
                               "' is a " +
                               (category == pb::PARAMETERS ? "parameter"
                                : category == pb::CONSTANTS
                                    ? "constant"
                                    : "view of another tensor's bytes") +
                               ", which lives for the whole run");
      return Status::ok();
    }
    case pb::Instruction::KIND_NOT_SET:
      break;
    }
    return fail(at, "an instruction of no kind (kernel, collective, "
                    "send_recv, copy, event or free)");
  }

  Status checkFunctions() {
    for (int f = 0; f < p.functions_size(); ++f) {
      const pb::Function &fn = p.functions(f);
      std::string at = "functions[" + str(f) + "]";
      if (!pb::FunctionKind_IsValid(fn.kind()))
        return fail(at, "unknown function kind " + str(fn.kind()));
      for (int i = 0; i < fn.body_size(); ++i)
        CLEAVE_CHECK(checkInstruction(fn.body(i),
                                      at + ".body[" + str(i) + "]"));
    }
    return Status::ok();
  }

  Status checkSchedule() {
    if (p.schedule_size() == 0)
      return fail("schedule", "is empty: the program runs nothing");
    for (int s = 0; s < p.schedule_size(); ++s) {
      const pb::Step &step = p.schedule(s);
      std::string where = "schedule[" + str(s) + "]";
      if (step.function() < 0 || step.function() >= p.functions_size())
        return fail(where, "function " + str(step.function()) +
                               ", but the program has " +
                               str(p.functions_size()) + " functions");
      if (step.microbatch() < -1 ||
          step.microbatch() >= p.batch().microbatches())
        return fail(where, "microbatch " + str(step.microbatch()) +
                               ", but a step has " +
                               str(p.batch().microbatches()) +
                               " microbatches (-1: once per step)");
    }
    return Status::ok();
  }

  Status fileSize(const std::string &path, const std::string &where,
                  uint64_t &size) {
    auto it = fileSizes.find(path);
    if (it != fileSizes.end()) {
      size = it->second;
      return Status::ok();
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0)
      return fail(where, "cannot open its data file " + path + ": " +
                             std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return fail(where, "its data file " + path + " is not a regular file");
    size = fileSizes[path] = uint64_t(st.st_size);
    return Status::ok();
  }

  Status checkGenerator(const std::string &generator, DType dtype,
                        const std::string &where) {
    if (generator == "zeros" || generator == "ones")
      return Status::ok();
    const std::string prefix = "normal:";
    if (generator.compare(0, prefix.size(), prefix) == 0) {
      const char *text = generator.c_str() + prefix.size();
      char *end = nullptr;
      double stddev = std::strtod(text, &end);
      if (end == text || *end || !std::isfinite(stddev) || stddev < 0)
        return fail(where, "generator '" + generator +
                               "': the standard deviation is not a "
                               "non-negative number");
      if (!isFloat(dtype))
        return fail(where, "generator '" + generator + "' for a tensor of " +
                               dtypeName(dtype) +
                               ": normal is for floating-point tensors");
      return Status::ok();
    }
    return fail(where, "unknown generator '" + generator +
                           "' (expected zeros, ones or normal:STD)");
  }

  /// ZeRO-1: the range of the slice a parameter's optimizer state covers
  /// lies in the slice, and every state tensor ("<name>.exp_avg"...) is
  /// flat and holds it.
  Status checkStateRange(const pb::Parameter &param, const std::string &where) {
    if (!param.has_state_range())
      return Status::ok();
    const pb::StateRange &range = param.state_range();
    int64_t elements = checkedElements(param.slice_size());
    if (range.start() < 0 || range.size() < 0 ||
        range.start() > elements - range.size())
      return fail(where, "state_range start " + str(range.start()) +
                             " size " + str(range.size()) +
                             " is not within its slice's " + str(elements) +
                             " elements (slice_size " +
                             shapeText(param.slice_size()) +
                             "): start and size must be >= 0 and start + "
                             "size at most the slice's element count");
    for (int i = 0; i < p.tensors_size(); ++i) {
      const pb::Tensor &t = p.tensors(i);
      const std::string &name = t.name();
      if (t.category() != pb::OPTIMIZER_STATE ||
          name.compare(0, param.name().size(), param.name()) != 0)
        continue;
      std::string state = name.substr(param.name().size());
      if (state != ".exp_avg" && state != ".exp_avg_sq" &&
          state != ".momentum_buffer")
        continue;
      if (t.shape_size() != 1 || t.shape(0) < range.size())
        return fail(where, "state_range size " + str(range.size()) +
                               ", but its optimizer state tensor " + str(i) +
                               " '" + name + "' is " + shapeText(t.shape()) +
                               ": expected one dimension of at least " +
                               str(range.size()) + " elements");
    }
    return Status::ok();
  }

  /// Sharded data parallelism: the parameter's tensor is one flat chunk
  /// holding a range of the slice's elements (then padding).
  Status checkFlatRange(const pb::Parameter &param, const pb::Tensor &t,
                        const std::string &where) {
    const pb::StateRange &range = param.flat_range();
    int64_t elements = checkedElements(param.slice_size());
    if (range.start() < 0 || range.size() < 0 || elements < 0 ||
        range.start() > elements - range.size())
      return fail(where, "flat_range start " + str(range.start()) + " size " +
                             str(range.size()) +
                             " is not within its slice's " + str(elements) +
                             " elements (slice_size " +
                             shapeText(param.slice_size()) + ")");
    if (t.shape_size() != 1 || t.shape(0) < range.size())
      return fail(where, "flat_range size " + str(range.size()) +
                             ", but its tensor " + str(param.tensor()) +
                             " is " + shapeText(t.shape()) +
                             ": expected one dimension of at least " +
                             str(range.size()) + " elements");
    return Status::ok();
  }

  /// A padded vocabulary (cleave-pad-vocabulary): the tensor holds the
  /// slice's rows, then zero rows; every other dimension is the slice's.
  /// One box only (no pieces); a state range (ZeRO-1) counts the slice's
  /// elements, as always.
  static bool paddedRows(const pb::Parameter &param, const pb::Tensor &t) {
    if (param.pieces_size() || param.slice_size_size() == 0 ||
        param.slice_size_size() != t.shape_size())
      return false;
    for (int d = 1; d < t.shape_size(); ++d)
      if (param.slice_size(d) != t.shape(d))
        return false;
    return param.slice_size(0) >= 0 && param.slice_size(0) < t.shape(0);
  }

  /// Whether `t` holds the parameter's slice: its shape, or a padded
  /// vocabulary's rows first.
  static bool holdsSlice(const pb::Parameter &param, const pb::Tensor &t) {
    return shapeText(param.slice_size()) == shapeText(t.shape()) ||
           paddedRows(param, t);
  }

  /// Tensor parallelism with a blocked sharding: the boxes lie in the full
  /// tensor, do not overlap, and concatenated along pieces_axis make the
  /// slice (slice_size; slice_start the first box's start).
  Status checkPieces(const pb::Parameter &param, const std::string &where) {
    if (param.pieces_size() == 0) {
      if (param.pieces_axis() != 0)
        return fail(where, "pieces_axis " + str(param.pieces_axis()) +
                               " without pieces");
      return Status::ok();
    }
    if (p.version() != pb::VERSION_PIECES)
      return fail(where, "has pieces (boxes), which need program version " +
                             str(pb::VERSION_PIECES) + ", but the program is "
                             "version " + str(p.version()));
    int rank = param.full_shape_size();
    int axis = param.pieces_axis();
    if (axis < 0 || axis >= rank)
      return fail(where, "pieces_axis " + str(axis) +
                             " is not an axis of full_shape " +
                             shapeText(param.full_shape()));
    int64_t along = 0;
    for (int i = 0; i < param.pieces_size(); ++i) {
      const pb::Box &box = param.pieces(i);
      std::string what = "box " + str(i) + " (from " +
                         shapeText(box.start()) + " of size " +
                         shapeText(box.size()) + ")";
      if (box.start_size() != rank || box.size_size() != rank)
        return fail(where, what + " has not the " + str(rank) +
                               " dimensions of full_shape " +
                               shapeText(param.full_shape()));
      for (int d = 0; d < rank; ++d) {
        if (box.size(d) < 1 || box.start(d) < 0 ||
            box.start(d) > param.full_shape(d) - box.size(d))
          return fail(where, what + " is not within full_shape " +
                                 shapeText(param.full_shape()) +
                                 " (dimension " + str(d) + ")");
        if (d != axis && box.size(d) != param.slice_size(d))
          return fail(where, what + " differs from slice_size " +
                                 shapeText(param.slice_size()) +
                                 " in dimension " + str(d) + ", which is not "
                                 "pieces_axis " + str(axis) +
                                 ": boxes are concatenated along that axis");
      }
      along += box.size(axis);
      for (int j = 0; j < i; ++j) {
        const pb::Box &other = param.pieces(j);
        bool overlap = true;
        for (int d = 0; d < rank; ++d)
          overlap &= box.start(d) < other.start(d) + other.size(d) &&
                     other.start(d) < box.start(d) + box.size(d);
        if (overlap)
          return fail(where, what + " overlaps box " + str(j) + " (from " +
                                 shapeText(other.start()) + " of size " +
                                 shapeText(other.size()) +
                                 "): a rank holds each element once");
      }
    }
    if (along != param.slice_size(axis))
      return fail(where, "its boxes concatenated along axis " + str(axis) +
                             " have " + str(along) +
                             " elements there, but slice_size " +
                             shapeText(param.slice_size()) + " has " +
                             str(param.slice_size(axis)));
    if (shapeText(param.slice_start()) != shapeText(param.pieces(0).start()))
      return fail(where, "slice_start " + shapeText(param.slice_start()) +
                             " is not its first box's start " +
                             shapeText(param.pieces(0).start()));
    return Status::ok();
  }

  /// ZeRO-1's split masters: the parameter's tensor is an fp32 master
  /// chunk (flat_range, within its state_range's group), and the working
  /// copy a PARAMETERS tensor of the slice's shape in 16 bits, which no
  /// other parameter names.
  Status checkWorkingCopy(const pb::Parameter &param, const pb::Tensor &t,
                          const std::string &where,
                          std::vector<int> &initializedBy, int index) {
    if (!param.has_working_tensor())
      return Status::ok();
    CLEAVE_CHECK(tensorId(param.working_tensor(), where, "its working copy"));
    const pb::Tensor &w = p.tensors(param.working_tensor());
    if (!param.has_flat_range() || !param.has_state_range() ||
        t.dtype() != pb::F32)
      return fail(where, "has a working copy (working_tensor " +
                             str(param.working_tensor()) +
                             "), so its tensor must be an F32 master chunk "
                             "with flat_range and state_range");
    if (w.category() != pb::PARAMETERS ||
        (w.dtype() != pb::BF16 && w.dtype() != pb::F16))
      return fail(where, "working_tensor " + str(param.working_tensor()) +
                             " is " + pb::DType_Name(w.dtype()) + " " +
                             pb::Category_Name(w.category()) +
                             ": expected a BF16 or F16 PARAMETERS tensor");
    if (!holdsSlice(param, w))
      return fail(where, "slice_size " + shapeText(param.slice_size()) +
                             " differs from the shape of its working copy, "
                             "tensor " + str(param.working_tensor()) + ", " +
                             shapeText(w.shape()));
    if (initializedBy[param.working_tensor()] != -1)
      return fail(where, "working_tensor " + str(param.working_tensor()) +
                             " is parameters[" +
                             str(initializedBy[param.working_tensor()]) +
                             "]'s already");
    initializedBy[param.working_tensor()] = index;
    return Status::ok();
  }

  Status checkParameters() {
    std::vector<int> initializedBy(p.tensors_size(), -1);
    std::set<std::string> names;
    for (int i = 0; i < p.parameters_size(); ++i) {
      const pb::Parameter &param = p.parameters(i);
      std::string where = "parameters[" + str(i) + "] '" + param.name() + "'";
      if (param.name().empty())
        return fail("parameters[" + str(i) + "]", "has no name");
      if (!names.insert(param.name()).second)
        return fail(where, "a second parameter of this name");
      CLEAVE_CHECK(tensorId(param.tensor(), where, "its slice"));
      const pb::Tensor &t = p.tensors(param.tensor());
      if (t.category() != pb::PARAMETERS)
        return fail(where, "tensor " + str(param.tensor()) + " has category " +
                               pb::Category_Name(t.category()) +
                               ", expected PARAMETERS");
      if (initializedBy[param.tensor()] != -1)
        return fail(where, "tensor " + str(param.tensor()) +
                               " is parameters[" +
                               str(initializedBy[param.tensor()]) +
                               "] already");
      initializedBy[param.tensor()] = i;
      int rank = param.full_shape_size();
      if (param.slice_start_size() != rank || param.slice_size_size() != rank)
        return fail(where, "full_shape " + shapeText(param.full_shape()) +
                               " has " + str(rank) + " dimensions, slice_start " +
                               str(param.slice_start_size()) +
                               " and slice_size " +
                               str(param.slice_size_size()));
      int64_t fullElements = checkedElements(param.full_shape());
      if (fullElements < 0)
        return fail(where, "full_shape " + shapeText(param.full_shape()) +
                               " is negative or too large");
      if (param.has_flat_range()) {
        CLEAVE_CHECK(checkFlatRange(param, t, where));
      } else if (!holdsSlice(param, t)) {
        return fail(where, "slice_size " + shapeText(param.slice_size()) +
                               " differs from the shape of tensor " +
                               str(param.tensor()) + ", " +
                               shapeText(t.shape()) +
                               " (only a slice of fewer rows, the rest "
                               "padding, may)");
      }
      CLEAVE_CHECK(checkPieces(param, where));
      for (int d = 0; d < rank && param.pieces_size() == 0; ++d)
        if (param.slice_start(d) < 0 ||
            param.slice_start(d) > param.full_shape(d) - param.slice_size(d))
          return fail(where, "the slice from " + shapeText(param.slice_start()) +
                                 " of size " + shapeText(param.slice_size()) +
                                 " is not within full_shape " +
                                 shapeText(param.full_shape()) +
                                 " (dimension " + str(d) + ")");
      CLEAVE_CHECK(checkStateRange(param, where));
      CLEAVE_CHECK(checkWorkingCopy(param, t, where, initializedBy, i));
      DType dtype = tensorDType(t);
      switch (param.init_case()) {
      case pb::Parameter::kGenerator:
        CLEAVE_CHECK(checkGenerator(param.generator(), dtype, where));
        break;
      case pb::Parameter::kFile: {
        const pb::FileData &file = param.file();
        if (file.path().empty())
          return fail(where, "its file data has no path");
        uint64_t expected = uint64_t(fullElements) * dtypeSize(dtype);
        if (file.size_bytes() != expected)
          return fail(where, "its file data is " + ustr(file.size_bytes()) +
                                 " bytes, but the full tensor " +
                                 dtypeName(dtype) +
                                 shapeText(param.full_shape()) + " is " +
                                 ustr(expected));
        std::string path = resolveProgramPath(directory, file.path());
        uint64_t size = 0;
        CLEAVE_CHECK(fileSize(path, where, size));
        if (file.offset() > size || file.size_bytes() > size - file.offset())
          return fail(where, "bytes [" + ustr(file.offset()) + ", " +
                                 ustr(file.offset() + file.size_bytes()) +
                                 ") of " + path + " are past its end (" +
                                 ustr(size) +
                                 " bytes): the parameter file is truncated "
                                 "or not this program's");
        break;
      }
      case pb::Parameter::INIT_NOT_SET:
        return fail(where, "has no init (file data or a generator)");
      }
    }
    for (int i = 0; i < p.tensors_size(); ++i)
      if (p.tensors(i).category() == pb::PARAMETERS && initializedBy[i] == -1)
        return fail("tensors[" + str(i) + "] '" + p.tensors(i).name() + "'",
                    "a PARAMETERS tensor that no parameter initializes");
    return Status::ok();
  }

  Status checkBindings() {
    for (int list = 0; list < 2; ++list) {
      const auto &bindings = list == 0 ? p.inputs() : p.outputs();
      const char *field = list == 0 ? "inputs" : "outputs";
      for (int i = 0; i < bindings.size(); ++i) {
        const pb::Binding &b = bindings[i];
        std::string where =
            std::string(field) + "[" + str(i) + "] '" + b.name() + "'";
        if (!pb::BindingRole_IsValid(b.role()))
          return fail(where, "unknown role " + str(b.role()));
        CLEAVE_CHECK(tensorId(b.tensor(), where, "the binding"));
        const pb::Tensor &t = p.tensors(b.tensor());
        DType dtype = tensorDType(t);
        switch (b.role()) {
        case pb::TOKENS:
        case pb::TARGETS: {
          const char *role = b.role() == pb::TOKENS ? "TOKENS" : "TARGETS";
          if (list != 0)
            return fail(where, std::string("a ") + role +
                                   " binding among the outputs");
          // The rank's part of the microbatch (batch.read_parts).
          std::string expected = "[" + str(samplesRead(p.batch())) + ", " +
                                 str(p.batch().seq_len()) + "]";
          if (!isTokenType(dtype) || shapeText(t.shape()) != expected)
            return fail(where, std::string(role) + " is " +
                                   tensorText(b.tensor()) +
                                   ", expected an i32, i64, u16, u32 or u64 "
                                   "tensor of shape [microbatch_size / "
                                   "read_parts, seq_len] = " +
                                   expected);
          if (p.batch().microbatch_size() < 1 || p.batch().seq_len() < 1 ||
              p.batch().microbatches() < 1)
            return fail(where, std::string(role) +
                                   " needs a batch of at least one "
                                   "microbatch of one sample of one token");
          break;
        }
        case pb::LOSS:
          if (list != 1)
            return fail(where, "a LOSS binding among the inputs");
          if (!isFloat(dtype) || tensorElements(t) != 1)
            return fail(where, "LOSS is " + tensorText(b.tensor()) +
                                   ", expected a floating-point scalar");
          break;
        case pb::STEP:
          if (list != 0)
            return fail(where, "a STEP binding among the outputs");
          if (dtype != DType::I64 || t.shape_size() != 0)
            return fail(where, "STEP is " + tensorText(b.tensor()) +
                                   ", expected an i64 scalar (the runtime "
                                   "writes the step's 1-based number)");
          if (t.category() == pb::CONSTANTS)
            return fail(where, "STEP is tensor " + str(b.tensor()) + " '" +
                                   t.name() +
                                   "', a constant, which nothing may write");
          break;
        default:
          break;
        }
      }
    }
    return Status::ok();
  }

  const pb::Program &p;
  const std::string &name;
  const std::string &directory;
  std::map<std::string, uint64_t> fileSizes;
};

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

Status cleave::runtime::parseProgram(const std::string &bytes,
                                     const std::string &name,
                                     pb::Program &program) {
  if (bytes.empty())
    return Status::error(name + ": the program file is empty");
  if (bytes.size() > size_t(INT32_MAX))
    return Status::error(name + ": " + ustr(bytes.size()) +
                         " bytes, larger than a protobuf message may be");
  CLEAVE_CHECK(checkWireFormat(bytes, name));
  program.Clear();
  // Protobuf logs why a message does not parse (a string that is not
  // UTF-8, say) to stderr; the reason belongs in our one-line error. Its log
  // handler is a plain function, hence the thread-local.
  static thread_local std::string parseLog;
  parseLog.clear();
  auto capture = [](google::protobuf::LogLevel level, const char *,
                    int, const std::string &message) {
    if (level >= google::protobuf::LOGLEVEL_ERROR && parseLog.empty())
      parseLog = message;
  };
  google::protobuf::LogHandler *previous =
      google::protobuf::SetLogHandler(capture);
  bool parsed = program.ParseFromString(bytes);
  google::protobuf::SetLogHandler(previous);
  if (!parsed)
    return Status::error(name + ": not a cleave program: the protobuf data "
                                "does not parse as a Program (" +
                         (parseLog.empty() ? "a nested field is malformed"
                                           : parseLog.substr(0, 200)) +
                         ")");
  if (program.magic() != "cleave-program")
    return Status::error(name + ": not a cleave program: magic is '" +
                         program.magic().substr(0, 40) +
                         "', expected 'cleave-program'");
  if (program.version() != pb::VERSION_CURRENT &&
      program.version() != pb::VERSION_PIECES &&
      program.version() != pb::VERSION_SHARED)
    return Status::error(
        name + ": program version " + str(program.version()) +
        ", but this cleave-run reads versions " + str(pb::VERSION_CURRENT) +
        " to " + str(pb::VERSION_SHARED) +
        " only: compile the model again with the cleave-compile of this "
        "release");
  return Status::ok();
}

Status cleave::runtime::validateProgram(const pb::Program &program,
                                        const std::string &name,
                                        const std::string &directory) {
  return Validator(program, name, directory).run();
}

Status cleave::runtime::loadProgram(const std::string &path,
                                    pb::Program &program) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open the program: " +
                         std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return Status::error(path + ": a folder, not a program file");
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": not a program file (not a regular file)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open the program: " +
                         std::strerror(errno));
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (!in.read(&bytes[0], std::streamsize(bytes.size())))
    return Status::error(path + ": reading the program failed");
  CLEAVE_CHECK(parseProgram(bytes, path, program));
  // Before validating: a changed byte is named as such, not as whatever
  // it happens to break.
  CLEAVE_CHECK(checkProgramSeal(bytes, path));
  if (isSharedHeader(program)) {
    // A header: the program is the role's shared file, joined with this
    // rank's mesh, batch and peers (SharedProgram.h).
    pb::Program shared;
    CLEAVE_CHECK(readSharedProgram(program, path, directoryOf(path), shared));
    pb::Program header = std::move(program);
    CLEAVE_CHECK(joinSharedProgram(header, std::move(shared), path, program));
  }
  return validateProgram(program, path, directoryOf(path));
}

Status cleave::runtime::verifyParameterData(const pb::Program &program,
                                            const std::string &name,
                                            const std::string &directory) {
  // A tied parameter may appear twice; each range is read once.
  std::set<std::tuple<std::string, uint64_t, uint64_t>> checked;
  std::vector<char> chunk(size_t(1) << 20);
  for (int i = 0; i < program.parameters_size(); ++i) {
    const pb::Parameter &param = program.parameters(i);
    if (!param.has_file() || param.file().sha256().empty())
      continue;
    const pb::FileData &file = param.file();
    std::string path = resolveProgramPath(directory, file.path());
    if (!checked.insert({path, file.offset(), file.size_bytes()}).second)
      continue;
    std::string where = name + ": parameters[" + str(i) + "] '" +
                        param.name() + "'";
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return Status::error(where + ": cannot open " + path + ": " +
                           std::strerror(errno));
    Sha256 hash;
    uint64_t at = file.offset(), end = file.offset() + file.size_bytes();
    while (at < end) {
      size_t want = size_t(std::min<uint64_t>(chunk.size(), end - at));
      ssize_t got = pread(fd, chunk.data(), want, off_t(at));
      if (got <= 0) {
        close(fd);
        return Status::error(
            where + ": reading " + path + " at byte " + ustr(at) + " failed: " +
            (got == 0 ? "unexpected end of file" : std::strerror(errno)));
      }
      hash.update(chunk.data(), size_t(got));
      at += uint64_t(got);
    }
    close(fd);
    std::string actual = hash.hexDigest();
    if (actual != file.sha256())
      return Status::error(
          path + ": checksum mismatch in bytes [" + ustr(file.offset()) + ", " +
          ustr(end) + "), the initial value of parameter '" + param.name() +
          "' (" + name + ", parameters[" + str(i) + "]): their SHA-256 is " +
          actual + ", the program says " + file.sha256() +
          ": the file changed after cleave-compile wrote it (a flipped byte, "
          "a partial copy); copy the compile's output again or recompile");
  }
  return Status::ok();
}
