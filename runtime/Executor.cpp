//===- Executor.cpp - runs a validated per-rank program on a backend ------===//

#include "runtime/Executor.h"
#include "runtime/ProgramLoader.h"
#include "runtime/ops/KernelArgs.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

using namespace cleave::runtime;
namespace pb = cleave::program;

//===----------------------------------------------------------------------===//
// Free helpers
//===----------------------------------------------------------------------===//

namespace {

std::string str(int64_t v) { return std::to_string(v); }

AttrValue convertAttribute(const pb::Attribute &a) {
  AttrValue v;
  switch (a.value_case()) {
  case pb::Attribute::kI:
    v.kind = AttrValue::Kind::Int;
    v.i = a.i();
    break;
  case pb::Attribute::kF:
    v.kind = AttrValue::Kind::Float;
    v.f = a.f();
    break;
  case pb::Attribute::kS:
    v.kind = AttrValue::Kind::String;
    v.s = a.s();
    break;
  case pb::Attribute::kInts:
    v.kind = AttrValue::Kind::Ints;
    v.ints.assign(a.ints().values().begin(), a.ints().values().end());
    break;
  case pb::Attribute::VALUE_NOT_SET:
    break;
  }
  return v;
}

Reduce reduceOf(pb::ReduceOp op) {
  switch (op) {
  case pb::MEAN: return Reduce::Mean;
  case pb::MAX: return Reduce::Max;
  default: return Reduce::Sum;
  }
}

} // namespace

uint64_t cleave::runtime::processPeakRss() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return uint64_t(usage.ru_maxrss) * 1024; // Linux reports KiB
}

//===----------------------------------------------------------------------===//
// The runtime's pieces
//===----------------------------------------------------------------------===//

struct Runtime::Op {
  enum class Kind { Kernel, Collective, Send, Recv, Copy, Event, Free };
  Kind kind = Kind::Event;
  std::string where; // "functions[0].body[3].kernel 'matmul' (/head/MatMul)"
  // What the watchdog names while a communicating instruction waits:
  // where, the function's name and the tensor's ("... of '/h.0/attn/Add'").
  std::string place;
  std::string name;  // the kernel's op
  Attributes attributes;
  std::vector<TensorRef> inputs, outputs;
  std::vector<int> written; // tensors that become live
  int tensor = -1;          // Free
  int peer = 0, tag = 0, group = 0, root = 0;
  int event = 0; // a started all-reduce's id, or the id an Event waits for
  // Copy: from device to host memory (an offload) or back (a fetch).
  bool toHost = false, fromHost = false;
  pb::CollectiveKind collective = pb::ALL_REDUCE;
  Reduce reduce = Reduce::Sum;
  // Host copies of the operands, for communication on a backend whose
  // memory is not host memory (inputs then outputs).
  mutable std::vector<std::vector<char>> staging;
};

/// An all-reduce started on a host copy, uploaded when it completes.
struct Runtime::StagedReduce {
  int event;
  void *device;
  const std::vector<char> *host;
};

struct Runtime::Function {
  const pb::Function *source = nullptr;
  std::string where; // "functions[1] 'backward'"
  std::vector<Op> ops;
  double flops = 0;
  std::vector<int> tokens, targets; // TOKENS / TARGETS tensors it reads
  std::vector<int> losses;          // LOSS tensors it writes
};

Runtime::Runtime(const pb::Program &program, std::string directory,
                 Communicator &comm, RunOptions options,
                 std::unique_ptr<Backend> backend)
    : program_(program), directory_(std::move(directory)), comm_(comm),
      options_(options),
      backend_(backend ? std::move(backend) : makeCpuBackend()) {}

Runtime::~Runtime() {
  arenas_.reset(); // the buffers go first, while the backend lives
}

TensorRef Runtime::tensor(int id) const { return tensors_[id]; }

Status Runtime::readTensor(int id, std::vector<char> &bytes) {
  if (id < 0 || id >= int(tensors_.size()))
    return Status::error("readTensor: no tensor " + str(id));
  bytes.resize(tensorBytes_[id]);
  return backend_->download(bytes.data(), tensors_[id].data, bytes.size());
}

Status Runtime::writeTensor(int id, const void *bytes) {
  return backend_->upload(tensors_[id].data, bytes, tensorBytes_[id]);
}

bool Runtime::hasBackward() const {
  for (const pb::Step &s : program_.schedule())
    if (program_.functions(s.function()).kind() == pb::BACKWARD)
      return true;
  return false;
}

bool Runtime::hasLoss() const {
  for (const pb::Binding &b : program_.outputs())
    if (b.role() == pb::LOSS)
      return true;
  return false;
}

void Runtime::markLive(int id) {
  // A view's bytes are another tensor's (or its padding): counted there.
  if (live_[id] || program_.tensors(id).category() == pb::VIEW)
    return;
  live_[id] = 1;
  if (onHost_[id]) {
    hostLiveBytes_ += tensorBytes_[id];
    hostPeakBytes_ = std::max(hostPeakBytes_, hostLiveBytes_);
    return;
  }
  liveBytes_ += tensorBytes_[id];
  int category = peakCategory_[id];
  liveByCategory_[category] += tensorBytes_[id];
  categoryPeak_[category] =
      std::max(categoryPeak_[category], liveByCategory_[category]);
  if (liveBytes_ > peakBytes_) {
    peakBytes_ = liveBytes_;
    std::copy(std::begin(liveByCategory_), std::end(liveByCategory_),
              std::begin(atPeakByCategory_));
  }
}

void Runtime::markDead(int id) {
  if (!live_[id])
    return;
  live_[id] = 0;
  (onHost_[id] ? hostLiveBytes_ : liveBytes_) -= tensorBytes_[id];
  if (!onHost_[id])
    liveByCategory_[int(peakCategory_[id])] -= tensorBytes_[id];
}

const char *cleave::runtime::peakCategoryName(int category) {
  static const char *const names[kPeakCategories] = {
      "parameters", "gradients", "optimizer_state", "gathered_parameters",
      "activations", "other"};
  return category >= 0 && category < kPeakCategories ? names[category] : "?";
}

Status Runtime::allocateArenas() {
  arenas_ = std::make_unique<ProgramArenas>(*backend_);
  CLEAVE_CHECK(arenas_->allocate(program_));
  int n = program_.tensors_size();
  tensors_.resize(n);
  tensorBytes_.resize(n);
  live_.assign(n, 0);
  onHost_.assign(n, 0);
  // The gathered parameters: ACTIVATIONS that an ALL_GATHER of a forward
  // or backward function writes from a parameter's chunk (or, the second
  // hop of a hierarchical gather, from a view of the host's block);
  // sequence parallelism's gathers read activations.
  peakCategory_.assign(n, 5);
  for (const pb::Function &f : program_.functions()) {
    if (f.kind() == pb::OPTIMIZER)
      continue;
    for (const pb::Instruction &inst : f.body()) {
      if (!inst.has_collective())
        continue;
      const pb::Collective &c = inst.collective();
      if (c.kind() != pb::ALL_GATHER || c.inputs_size() != 1 ||
          c.outputs_size() != 1)
        continue;
      int in = c.inputs(0), out = c.outputs(0);
      if (in < 0 || in >= n || out < 0 || out >= n)
        continue;
      pb::Category from = program_.tensors(in).category();
      if ((from == pb::PARAMETERS || from == pb::VIEW) &&
          program_.tensors(out).category() == pb::ACTIVATIONS)
        peakCategory_[out] = 3;
    }
  }
  for (int i = 0; i < n; ++i) {
    const pb::Tensor &t = program_.tensors(i);
    switch (t.category()) {
    case pb::PARAMETERS: peakCategory_[i] = 0; break;
    case pb::GRADIENTS: peakCategory_[i] = 1; break;
    case pb::OPTIMIZER_STATE: peakCategory_[i] = 2; break;
    case pb::ACTIVATIONS:
      if (peakCategory_[i] != 3)
        peakCategory_[i] = 4;
      break;
    default: break;
    }
    onHost_[i] = program_.buffers(t.buffer()).space() == pb::HOST;
    TensorRef &ref = tensors_[i];
    ref.data = static_cast<char *>(arenas_->base(t.buffer())) + t.offset();
    ref.shape.assign(t.shape().begin(), t.shape().end());
    ref.dtype = tensorDType(t);
    tensorBytes_[i] = ref.sizeBytes();
    if (t.category() == pb::CONSTANTS)
      CLEAVE_CHECK(writeTensor(i, t.data().data()));
    if (t.category() == pb::CONSTANTS || t.category() == pb::PARAMETERS)
      markLive(i);
    if (t.category() == pb::GRADIENTS)
      gradientTensors_.push_back(i);
    // Views cover padding no other tensor writes (ZeRO-1's chunks), which
    // must read as zeros: before the parameters are initialized.
    if (t.category() == pb::VIEW)
      CLEAVE_CHECK(backend_->zero(ref.data, tensorBytes_[i]));
  }
  return Status::ok();
}

Status Runtime::prepare() {
  std::set<int> tokenIds, targetIds, lossIds, stepIds;
  for (const pb::Binding &b : program_.inputs()) {
    if (b.role() == pb::TOKENS)
      tokenIds.insert(b.tensor());
    if (b.role() == pb::TARGETS)
      targetIds.insert(b.tensor());
    if (b.role() == pb::STEP)
      stepIds.insert(b.tensor());
    if (b.role() == pb::LOSS_SCALE)
      lossScaleTensors_.push_back(b.tensor());
  }
  const pb::LossScaling &ls = program_.loss_scaling();
  if (ls.enabled())
    scaler_ = LossScaler(ls.initial_scale(), ls.scale_window(),
                         ls.min_scale(), ls.delayed_shift());
  stepTensors_.assign(stepIds.begin(), stepIds.end());
  for (const pb::Binding &b : program_.outputs())
    if (b.role() == pb::LOSS)
      lossIds.insert(b.tensor());
  lossTensors_.assign(lossIds.begin(), lossIds.end());

  // What each event's wait completes, for the trace.
  std::map<int, pb::CollectiveKind> startedKind;
  for (const pb::Function &source : program_.functions())
    for (const pb::Instruction &inst : source.body())
      if (inst.has_collective() && inst.collective().event() > 0)
        startedKind[inst.collective().event()] = inst.collective().kind();
  functions_.resize(program_.functions_size());
  for (int f = 0; f < program_.functions_size(); ++f) {
    const pb::Function &source = program_.functions(f);
    Function &fn = functions_[f];
    fn.source = &source;
    fn.where = "functions[" + str(f) + "] '" + source.name() + "'";
    std::set<int> reads, writes;
    for (int i = 0; i < source.body_size(); ++i) {
      const pb::Instruction &inst = source.body(i);
      Op op;
      op.where = "functions[" + str(f) + "].body[" + str(i) + "]";
      switch (inst.kind_case()) {
      case pb::Instruction::kKernel: {
        const pb::Kernel &k = inst.kernel();
        op.kind = Op::Kind::Kernel;
        op.name = k.op();
        op.where += ".kernel '" + k.op() + "'";
        if (!k.location().empty())
          op.where += " (" + k.location() + ")";
        for (const auto &[key, value] : k.attributes())
          op.attributes[key] = convertAttribute(value);
        for (int id : k.inputs()) {
          op.inputs.push_back(id == -1 ? TensorRef() : tensors_[id]);
          if (id != -1)
            reads.insert(id);
        }
        for (int id : k.outputs()) {
          op.outputs.push_back(tensors_[id]);
          op.written.push_back(id);
        }
        fn.flops += kernelFlops(op.name, op.attributes, op.inputs, op.outputs);
        break;
      }
      case pb::Instruction::kCollective: {
        const pb::Collective &c = inst.collective();
        op.kind = Op::Kind::Collective;
        op.where += ".collective " + pb::CollectiveKind_Name(c.kind());
        op.collective = c.kind();
        op.group = c.group();
        op.root = c.root();
        op.reduce = reduceOf(c.reduce());
        op.event = c.event();
        for (int id : c.inputs()) {
          op.inputs.push_back(tensors_[id]);
          reads.insert(id);
        }
        for (int id : c.outputs()) {
          op.outputs.push_back(tensors_[id]);
          op.written.push_back(id);
        }
        break;
      }
      case pb::Instruction::kSendRecv: {
        const pb::SendRecv &s = inst.send_recv();
        op.kind = s.send() ? Op::Kind::Send : Op::Kind::Recv;
        op.where += s.send() ? ".send" : ".receive";
        op.peer = s.peer();
        op.tag = s.tag();
        if (s.send()) {
          op.inputs.push_back(tensors_[s.tensor()]);
          reads.insert(s.tensor());
        } else {
          op.outputs.push_back(tensors_[s.tensor()]);
          op.written.push_back(s.tensor());
        }
        break;
      }
      case pb::Instruction::kCopy:
        op.kind = Op::Kind::Copy;
        op.where += ".copy";
        op.inputs.push_back(tensors_[inst.copy().source()]);
        op.outputs.push_back(tensors_[inst.copy().destination()]);
        op.written.push_back(inst.copy().destination());
        reads.insert(inst.copy().source());
        op.fromHost = onHost_[inst.copy().source()];
        op.toHost = onHost_[inst.copy().destination()];
        break;
      case pb::Instruction::kEvent:
        op.kind = Op::Kind::Event;
        op.where += ".event";
        op.event = inst.event().wait() ? inst.event().id() : 0;
        if (auto it = startedKind.find(op.event); it != startedKind.end())
          op.name = "wait for " + pb::CollectiveKind_Name(it->second) + " " +
                    str(op.event);
        break;
      case pb::Instruction::kFree:
        op.kind = Op::Kind::Free;
        op.where += ".free";
        op.tensor = inst.free().tensor();
        break;
      case pb::Instruction::KIND_NOT_SET:
        return Status::error(op.where + ": an instruction of no kind");
      }
      writes.insert(op.written.begin(), op.written.end());
      if (op.kind == Op::Kind::Collective || op.kind == Op::Kind::Send ||
          op.kind == Op::Kind::Recv || op.kind == Op::Kind::Event) {
        op.place = op.where + " of function '" + source.name() + "'";
        int id = -1;
        if (inst.has_collective() && inst.collective().inputs_size())
          id = inst.collective().inputs(0);
        else if (inst.has_send_recv())
          id = inst.send_recv().tensor();
        if (id >= 0 && !program_.tensors(id).name().empty())
          op.place += ", tensor '" + program_.tensors(id).name() + "'";
      }
      fn.ops.push_back(std::move(op));
    }
    // A collective that writes a view (the first hop of a hierarchical
    // gather, into the host's block) makes live the tensor whose bytes the
    // view is, which a later collective of the function writes from that
    // view (the second hop, into the gathered parameter's padded space):
    // the plan gives that space from the first hop on.
    auto covers = [&](int whole, int part) {
      const pb::Tensor &w = program_.tensors(whole), &p = program_.tensors(part);
      return w.category() != pb::VIEW && w.buffer() == p.buffer() &&
             w.offset() <= p.offset() &&
             p.offset() + tensorBytes_[part] <= w.offset() + tensorBytes_[whole];
    };
    for (size_t i = 0; i < fn.ops.size(); ++i) {
      Op &op = fn.ops[i];
      if (op.kind != Op::Kind::Collective || op.written.size() != 1 ||
          program_.tensors(op.written[0]).category() != pb::VIEW)
        continue;
      int view = op.written[0];
      for (size_t j = i + 1; j < fn.ops.size(); ++j) {
        const pb::Instruction &later = source.body(int(j));
        if (!later.has_collective() || later.collective().inputs_size() != 1 ||
            later.collective().inputs(0) != view ||
            later.collective().outputs_size() != 1)
          continue;
        int whole = later.collective().outputs(0);
        if (covers(whole, view))
          op.written.push_back(whole);
        break;
      }
    }
    for (int id : reads) {
      if (tokenIds.count(id))
        fn.tokens.push_back(id);
      if (targetIds.count(id))
        fn.targets.push_back(id);
    }
    for (int id : writes)
      if (lossIds.count(id))
        fn.losses.push_back(id);
  }
  return Status::ok();
}

Status Runtime::initialize() {
  if (initialized_)
    return Status::error("the runtime is initialized already");
  std::vector<std::vector<int>> groups;
  std::vector<std::string> names;
  for (const pb::Group &g : program_.mesh().groups()) {
    groups.emplace_back(g.ranks().begin(), g.ranks().end());
    names.push_back(g.name());
  }
  CLEAVE_CHECK(comm_.createGroups(groups));
  if (DeviceCommunication *device = backend_->deviceCommunication())
    CLEAVE_CHECK(device->createGroups(comm_, groups, names));
  CLEAVE_CHECK(allocateArenas());
  for (const pb::Parameter &param : program_.parameters())
    CLEAVE_CHECK(initializeParameter(param));
  CLEAVE_CHECK(prepare());
  if (options_.trace)
    CLEAVE_CHECK(trace_.start(comm_));
  initialized_ = true;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

/// A collective, send or receive: on host memory through MPI, on backend
/// memory through the backend's own communication or staged host copies.
Status Runtime::communicate(const Op &op) {
  if (!backend_->hostMemory()) {
    DeviceCommunication *device = backend_->deviceCommunication();
    if (!device)
      return communicateStaged(op);
    // The device's calls block where they wait for a peer (a receive, a
    // collective whose buffers are reused): one deadline for the lot.
    Watchdog::What what;
    what.call = op.kind == Op::Kind::Collective ? "a device collective"
                : op.kind == Op::Kind::Send    ? "a device send"
                                               : "a device receive";
    what.peer = op.kind == Op::Kind::Collective ? -1 : op.peer;
    what.fromPeer = op.kind == Op::Kind::Recv;
    what.group = op.kind == Op::Kind::Collective ? op.group : -1;
    Watchdog::Wait wait(comm_.watchdog(), what);
    if (op.kind == Op::Kind::Send)
      return device->startSend(op.peer, op.tag, op.inputs[0]);
    if (op.kind == Op::Kind::Recv)
      return device->recv(op.peer, op.tag, op.outputs[0]);
    Status status = Status::ok();
    for (size_t i = 0; status && i < op.inputs.size(); ++i) {
      const TensorRef &in = op.inputs[i], &out = op.outputs[i];
      switch (op.collective) {
      case pb::ALL_GATHER:
        status = op.event > 0
                     ? device->startAllGather(op.group, in, out, op.event)
                     : device->allGather(op.group, in, out);
        break;
      case pb::REDUCE_SCATTER:
        status = op.event > 0 ? device->startReduceScatter(
                                    op.group, op.reduce, in, out, op.event)
                              : device->reduceScatter(op.group, op.reduce,
                                                      in, out);
        break;
      case pb::BROADCAST:
        status = device->broadcast(op.group, op.root, in, out);
        break;
      default:
        status = op.event > 0 && in.data == out.data
                     ? device->startAllReduce(op.group, op.reduce, out, op.event)
                     : device->allReduce(op.group, op.reduce, in, out);
        break;
      }
    }
    return status;
  }
  switch (op.kind) {
  case Op::Kind::Send:
    return comm_.startSend(op.peer, op.tag, op.inputs[0]);
  case Op::Kind::Recv:
    return comm_.recv(op.peer, op.tag, op.outputs[0]);
  default:
    break;
  }
  Status status = Status::ok();
  for (size_t i = 0; status && i < op.inputs.size(); ++i) {
    const TensorRef &in = op.inputs[i], &out = op.outputs[i];
    switch (op.collective) {
    case pb::ALL_GATHER:
      status = op.event > 0 ? comm_.startAllGather(op.group, in, out, op.event)
                            : comm_.allGather(op.group, in, out);
      break;
    case pb::REDUCE_SCATTER:
      status = op.event > 0 ? comm_.startReduceScatter(op.group, op.reduce, in,
                                                       out, op.event)
                            : comm_.reduceScatter(op.group, op.reduce, in, out);
      break;
    case pb::BROADCAST:
      status = comm_.broadcast(op.group, op.root, in, out);
      break;
    default:
      status = op.event > 0 && in.data == out.data
                   ? comm_.startAllReduce(op.group, op.reduce, out, op.event)
                   : comm_.allReduce(op.group, op.reduce, in, out);
      break;
    }
  }
  return status;
}

Status Runtime::communicateStaged(const Op &op) {
  // One host copy per operand, kept with the instruction: a started send or
  // all-reduce still reads or writes it after this returns.
  size_t count = op.inputs.size() + op.outputs.size();
  op.staging.resize(count);
  auto host = [&](size_t slot, const TensorRef &t) {
    std::vector<char> &bytes = op.staging[slot];
    bytes.resize(std::max<size_t>(t.sizeBytes(), 1));
    TensorRef ref = t;
    ref.data = bytes.data();
    return ref;
  };
  size_t outputs = op.inputs.size();
  switch (op.kind) {
  case Op::Kind::Send: {
    TensorRef staged = host(0, op.inputs[0]);
    // The same instruction may have sent from this copy before.
    CLEAVE_CHECK(comm_.finishSendsOverlapping(staged.data, staged.sizeBytes()));
    CLEAVE_CHECK(backend_->download(staged.data, op.inputs[0].data,
                                    staged.sizeBytes()));
    return comm_.startSend(op.peer, op.tag, staged);
  }
  case Op::Kind::Recv: {
    TensorRef staged = host(outputs, op.outputs[0]);
    CLEAVE_CHECK(comm_.recv(op.peer, op.tag, staged));
    return backend_->upload(op.outputs[0].data, staged.data,
                            staged.sizeBytes());
  }
  default:
    break;
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorRef &in = op.inputs[i], &out = op.outputs[i];
    TensorRef hostIn = host(i, in);
    CLEAVE_CHECK(backend_->download(hostIn.data, in.data, hostIn.sizeBytes()));
    if ((op.collective == pb::REDUCE_SCATTER ||
         op.collective == pb::ALL_GATHER) &&
        op.event > 0) {
      // Started: its host result is uploaded when the event is waited for.
      TensorRef hostOut = host(outputs + i, out);
      CLEAVE_CHECK(op.collective == pb::ALL_GATHER
                       ? comm_.startAllGather(op.group, hostIn, hostOut,
                                              op.event)
                       : comm_.startReduceScatter(op.group, op.reduce, hostIn,
                                                  hostOut, op.event));
      stagedReduces_.push_back({op.event, out.data, &op.staging[outputs + i]});
      continue;
    }
    bool started = op.collective == pb::ALL_REDUCE && op.event > 0 &&
                   in.data == out.data;
    if (started) {
      CLEAVE_CHECK(comm_.startAllReduce(op.group, op.reduce, hostIn, op.event));
      stagedReduces_.push_back({op.event, out.data, &op.staging[i]});
      continue;
    }
    TensorRef hostOut = host(outputs + i, out);
    switch (op.collective) {
    case pb::ALL_GATHER:
      CLEAVE_CHECK(comm_.allGather(op.group, hostIn, hostOut));
      break;
    case pb::REDUCE_SCATTER:
      CLEAVE_CHECK(comm_.reduceScatter(op.group, op.reduce, hostIn, hostOut));
      break;
    case pb::BROADCAST:
      CLEAVE_CHECK(comm_.broadcast(op.group, op.root, hostIn, hostOut));
      break;
    default:
      CLEAVE_CHECK(comm_.allReduce(op.group, op.reduce, hostIn, hostOut));
      break;
    }
    CLEAVE_CHECK(
        backend_->upload(out.data, hostOut.data, hostOut.sizeBytes()));
  }
  return Status::ok();
}

Status Runtime::finishCollectives(int event) {
  if (DeviceCommunication *device = backend_->deviceCommunication()) {
    Watchdog::What what;
    what.call = "the device's started all-reduces";
    Watchdog::Wait wait(comm_.watchdog(), what);
    return event > 0 ? device->finishCollective(event)
                     : device->finishCollectives();
  }
  CLEAVE_CHECK(event > 0 ? comm_.finishCollective(event)
                         : comm_.finishCollectives());
  size_t kept = 0;
  for (const StagedReduce &r : stagedReduces_) {
    if (event > 0 && r.event != event) {
      stagedReduces_[kept++] = r;
      continue;
    }
    CLEAVE_CHECK(backend_->upload(r.device, r.host->data(), r.host->size()));
  }
  stagedReduces_.resize(kept);
  return Status::ok();
}

Status Runtime::runOp(const Op &op) {
  Status status = Status::ok();
  if (comm_.collecting())
    comm_.progress();
  // A send still reading a tensor finishes before anything overwrites it
  // (sends from host copies need nothing: communicateStaged).
  DeviceCommunication *device = backend_->deviceCommunication();
  if (op.kind != Op::Kind::Send && (device || comm_.sending()))
    for (const TensorRef &out : op.outputs)
      CLEAVE_CHECK(device ? device->finishSendsOverlapping(out.data,
                                                           out.sizeBytes())
                   : backend_->hostMemory()
                       ? comm_.finishSendsOverlapping(out.data, out.sizeBytes())
                       : Status::ok());
  bool communicates = op.kind == Op::Kind::Collective ||
                      op.kind == Op::Kind::Send || op.kind == Op::Kind::Recv ||
                      (op.kind == Op::Kind::Event && op.event > 0);
  double began = communicates && trace_.active() ? trace_.nowUs() : 0;
  Watchdog *watchdog = comm_.watchdog();
  if (communicates && watchdog)
    watchdog->setPlace(&op.place);
  switch (op.kind) {
  case Op::Kind::Kernel:
    if (op.name == "dropout") {
      // Which draws of its stream the mask is: the step's and this
      // microbatch's samples' (Executor.h).
      Attributes attributes = op.attributes;
      attributes["step"].i = randomAt_.step;
      attributes["first_sample"].i = randomAt_.firstSample;
      attributes["samples"].i = randomAt_.samples;
      status = backend_->runKernel(op.name, attributes, op.inputs, op.outputs);
      break;
    }
    status = backend_->runKernel(op.name, op.attributes, op.inputs, op.outputs);
    break;
  case Op::Kind::Collective:
  case Op::Kind::Send:
  case Op::Kind::Recv:
    status = communicate(op);
    break;
  case Op::Kind::Copy:
    // Host arenas are host memory on every backend: an offload is the
    // backend's download, a fetch its upload.
    if (op.toHost && !op.fromHost)
      status = backend_->offload(op.outputs[0].data, op.inputs[0].data,
                                 op.outputs[0].sizeBytes());
    else if (op.fromHost && !op.toHost)
      status = backend_->fetch(op.outputs[0].data, op.inputs[0].data,
                               op.outputs[0].sizeBytes());
    else if (op.fromHost)
      std::memmove(op.outputs[0].data, op.inputs[0].data,
                   op.outputs[0].sizeBytes());
    else
      status = backend_->copy(op.outputs[0].data, op.inputs[0].data,
                              op.outputs[0].sizeBytes());
    break;
  case Op::Kind::Event:
    // Kernels run in order on one stream; a wait completes the all-reduces
    // started under its id.
    if (op.event > 0)
      status = finishCollectives(op.event);
    break;
  case Op::Kind::Free:
    markDead(op.tensor);
    break;
  }
  if (communicates && watchdog)
    watchdog->setPlace(nullptr);
  if (!status)
    return Status::error(op.where + ": " + status.message());
  if (communicates && trace_.active())
    trace_.add(op.kind == Op::Kind::Event ? op.name
               : op.kind == Op::Kind::Collective
                   ? pb::CollectiveKind_Name(op.collective) +
                         (op.event > 0 ? " " + str(op.event) + " started"
                                       : std::string())
                   : op.kind == Op::Kind::Send ? "send to " + str(op.peer)
                                               : "receive from " + str(op.peer),
               1, began);
  for (int id : op.written)
    markLive(id);
  return Status::ok();
}

Status Runtime::runFunction(const Function &fn, int64_t step,
                            int64_t microbatch, const TokenData *data) {
  const pb::Batch &batch = program_.batch();
  randomAt_.step = step;
  randomAt_.firstSample =
      batch.first_sample() +
      (microbatch >= 0 ? microbatch * batch.microbatch_size() : 0);
  randomAt_.samples = std::max<int64_t>(batch.microbatch_size(), 1);
  if (microbatch >= 0 && (!fn.tokens.empty() || !fn.targets.empty())) {
    if (!data)
      return Status::error(fn.where +
                           " reads token ids, but no token data was given");
    const pb::Batch &b = program_.batch();
    // The rank's part of the microbatch (prescaled_batch false): the
    // tensor-parallel group gathers the parts.
    int64_t samples = samplesRead(b);
    int64_t first = b.first_sample() + microbatch * b.microbatch_size() +
                    b.read_part() * samples;
    for (int pass = 0; pass < 2; ++pass)
      for (int id : pass == 0 ? fn.tokens : fn.targets) {
        // Filled in host memory, then written to the backend's.
        TensorRef none, into = tensors_[id];
        std::vector<char> host;
        if (!backend_->hostMemory()) {
          host.resize(std::max<size_t>(tensorBytes_[id], 1));
          into.data = host.data();
        }
        CLEAVE_CHECK(data->fill(step, b.global_batch(), b.seq_len(), first,
                                samples, pass == 0 ? into : none,
                                pass == 0 ? none : into));
        if (!host.empty())
          CLEAVE_CHECK(writeTensor(id, host.data()));
        markLive(id);
      }
  }
  for (const Op &op : fn.ops)
    CLEAVE_CHECK(runOp(op));
  return Status::ok();
}

Status Runtime::runStep(int64_t step, const TokenData *data,
                        StepResult &result) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  auto start = std::chrono::steady_clock::now();
  result = StepResult();
  if (Watchdog *watchdog = comm_.watchdog())
    watchdog->setStep(step);
  if (!options_.forwardOnly)
    for (int id : gradientTensors_)
      CLEAVE_CHECK(backend_->zero(tensors_[id].data, tensorBytes_[id]));
  for (int id : stepTensors_) {
    int64_t taken = optimizerSteps_ + 1;
    CLEAVE_CHECK(writeTensor(id, &taken));
    markLive(id);
  }
  bool scaling = program_.loss_scaling().enabled();
  for (int id : lossScaleTensors_) {
    char scale[8];
    storeElement(scale, tensors_[id].dtype, 0, scaler_.scale());
    CLEAVE_CHECK(writeTensor(id, scale));
    markLive(id);
  }
  result.lossScaled = scaling;
  result.lossScale = scaler_.scale();
  bool checked = false, optimized = false;

  double lossSum = 0, lossCount = 0, flops = 0;
  for (int s = 0; s < program_.schedule_size(); ++s) {
    const pb::Step &entry = program_.schedule(s);
    const Function &fn = functions_[entry.function()];
    if (options_.forwardOnly && fn.source->kind() != pb::FORWARD &&
        fn.source->kind() != pb::REFRESH)
      continue;
    if (fn.source->kind() == pb::OPTIMIZER) {
      if (scaling && !checked) {
        CLEAVE_CHECK(finishCollectives(0));
        CLEAVE_CHECK(unscaleGradients(result.skipped));
        checked = true;
      }
      if (result.skipped)
        continue;
      optimized = true;
    }
    double began = trace_.active() ? trace_.nowUs() : 0;
    Status status = runFunction(fn, step, entry.microbatch(), data);
    if (trace_.active())
      trace_.add(fn.source->name() +
                     (entry.microbatch() >= 0
                          ? " mb" + str(entry.microbatch())
                          : std::string()) +
                     " (step " + str(step) + ")",
                 0, began);
    if (!status)
      return Status::error(
          "step " + str(step) + ", schedule[" + str(s) + "] (" + fn.where +
          (entry.microbatch() >= 0
               ? ", microbatch " + str(entry.microbatch())
               : std::string()) +
          "): " + status.message());
    flops += fn.flops;
    for (int id : fn.losses) {
      char loss[8];
      // On a device, the copy waits for everything queued before it, its
      // communication included.
      Watchdog::What what;
      what.call = "the device (reading the loss)";
      Watchdog::Wait wait(backend_->hostMemory() ? nullptr : comm_.watchdog(),
                          what);
      CLEAVE_CHECK(backend_->download(loss, tensors_[id].data,
                                      dtypeSize(tensors_[id].dtype)));
      lossSum += loadElement(loss, tensors_[id].dtype, 0);
      lossCount += 1;
    }
  }

  // A rank that runs no optimizer (a pipeline stage holding no parameter)
  // still takes part in the world-wide overflow check of the others.
  if (scaling && !checked && !options_.forwardOnly) {
    CLEAVE_CHECK(finishCollectives(0));
    CLEAVE_CHECK(unscaleGradients(result.skipped));
    checked = true;
  }
  {
    Watchdog::What what;
    what.call = "the device (its sends and kernels) at the end of the step";
    Watchdog::Wait wait(backend_->hostMemory() ? nullptr : comm_.watchdog(),
                        what);
    if (DeviceCommunication *device = backend_->deviceCommunication())
      CLEAVE_CHECK(device->finishSends());
    CLEAVE_CHECK(comm_.finishSends());
    CLEAVE_CHECK(finishCollectives(0));
    CLEAVE_CHECK(backend_->synchronize());
  }
  if (optimized)
    ++optimizerSteps_;
  if (scaling && checked)
    scaler_.update(result.skipped);

  std::vector<double> sums = {lossSum, lossCount, flops};
  CLEAVE_CHECK(comm_.sumAll(sums));
  std::vector<uint64_t> peaks = {peakBytes_, program_.memory().peak_bytes(),
                                 processPeakRss(), hostPeakBytes_,
                                 program_.memory().host_activations()};
  CLEAVE_CHECK(comm_.maxAll(peaks));
  result.hasLoss = sums[1] > 0;
  result.loss = result.hasLoss ? sums[0] / sums[1] : 0;
  result.flops = sums[2];
  result.peakBytes = peaks[0];
  result.predictedPeakBytes = peaks[1];
  result.rssPeakBytes = peaks[2];
  result.hostPeakBytes = peaks[3];
  result.predictedHostPeakBytes = peaks[4];
  // Each rank's own live peaks and the plan's, gathered (a max over
  // vectors that only the rank's own entries make non-zero).
  size_t world = size_t(std::max(comm_.size(), 1)), me = size_t(comm_.rank());
  std::vector<uint64_t> byRank(4 * world, 0);
  byRank[me] = peakBytes_;
  byRank[world + me] = program_.memory().live_peak_bytes();
  byRank[2 * world + me] = hostPeakBytes_;
  byRank[3 * world + me] = program_.memory().host_live_peak_bytes();
  CLEAVE_CHECK(comm_.maxAll(byRank));
  auto part = [&](size_t k) {
    return std::vector<uint64_t>(byRank.begin() + k * world,
                                 byRank.begin() + (k + 1) * world);
  };
  result.livePeakByRank = part(0);
  result.predictedLivePeakByRank = part(1);
  result.hostLivePeakByRank = part(2);
  result.predictedHostLivePeakByRank = part(3);
  result.peakCategoriesByRank.assign(kPeakCategories * world, 0);
  for (int c = 0; c < kPeakCategories; ++c)
    result.peakCategoriesByRank[me * kPeakCategories + c] =
        atPeakByCategory_[c];
  CLEAVE_CHECK(comm_.maxAll(result.peakCategoriesByRank));
  result.categoryPeaksByRank.assign(kPeakCategories * world, 0);
  for (int c = 0; c < kPeakCategories; ++c)
    result.categoryPeaksByRank[me * kPeakCategories + c] = categoryPeak_[c];
  CLEAVE_CHECK(comm_.maxAll(result.categoryPeaksByRank));
  result.seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  return Status::ok();
}

Status Runtime::unscaleGradients(bool &overflow) {
  // Any element that is not finite, on any rank, skips the step everywhere.
  std::vector<TensorRef> gradients;
  for (int id : gradientTensors_) {
    if (tensors_[id].dtype != DType::F32)
      return Status::error("gradient '" + program_.tensors(id).name() +
                           "' is not f32; loss scaling keeps f32 gradients");
    gradients.push_back(tensors_[id]);
  }
  bool found = false;
  CLEAVE_CHECK(backend_->anyNonFinite(gradients, found));
  std::vector<uint64_t> flag = {found ? 1u : 0u};
  CLEAVE_CHECK(comm_.maxAll(flag));
  overflow = flag[0] != 0;
  if (overflow)
    return Status::ok();
  // As torch's GradScaler: multiply by the fp32 reciprocal of the scale.
  return backend_->scale(gradients, float(1.0 / scaler_.scale()));
}
