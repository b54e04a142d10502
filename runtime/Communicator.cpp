//===- Communicator.cpp - MPI for the CPU backend -------------------------===//

#include "runtime/Communicator.h"
#include "runtime/ops/KernelArgs.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

using namespace cleave::runtime;
using ops::BFloat16;
using ops::Half;

namespace {

// Elements per MPI call: MPI counts are int.
constexpr int64_t kMaxCount = int64_t(1) << 30;

std::string hostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0)
    return "unknown";
  return name;
}

bool overlaps(const TensorRef &a, const TensorRef &b) {
  auto *pa = static_cast<const char *>(a.data);
  auto *pb = static_cast<const char *>(b.data);
  if (!pa || !pb)
    return false;
  return pa < pb + b.sizeBytes() && pb < pa + a.sizeBytes();
}

std::string describe(const TensorRef &t) {
  return std::string(dtypeName(t.dtype)) + ops::shapeString(t.shape);
}

// MPI user reductions for the 16-bit floats: through float, rounded back.
template <typename T, bool IsMax>
void reduce16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const T *>(in);
  auto *b = static_cast<T *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = ops::load(a[i]), y = ops::load(b[i]);
    b[i] = ops::store<T>(IsMax ? std::max(x, y) : x + y);
  }
}

} // namespace

Status cleave::runtime::mpiError(int code, const char *call, const char *file,
                                 int line) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int rank = -1;
  if (initialized && !finalized)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "MPI error %d", code);
  const char *base = std::strrchr(file, '/');
  return Status::error("rank " + std::to_string(rank) + " (host " +
                       hostName() + "): " + call + " failed at " +
                       (base ? base + 1 : file) + ":" + std::to_string(line) +
                       ": " + text);
}

Communicator::Communicator() : host_(hostName()) {}

Watchdog::What Communicator::over(const char *call, int group,
                                  uint64_t bytes) const {
  Watchdog::What what;
  what.call = call;
  what.group = group;
  if (group >= 0 && group < int(groups_.size()))
    what.ranks = &groups_[group].ranks;
  what.bytes = bytes;
  return what;
}

Watchdog::What Communicator::with(const char *call, int peer, bool from,
                                  int tag, uint64_t bytes) const {
  Watchdog::What what;
  what.call = call;
  what.peer = peer;
  what.fromPeer = from;
  what.tag = tag;
  what.bytes = bytes;
  return what;
}

Communicator::~Communicator() {
  if (!mpi_)
    return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  std::vector<MPI_Comm> freed;
  for (Group &g : groups_)
    if (g.comm != MPI_COMM_NULL &&
        std::find(freed.begin(), freed.end(), g.comm) == freed.end()) {
      freed.push_back(g.comm);
      MPI_Comm_free(&g.comm);
    }
  for (MPI_Op *op : {&halfSum_, &halfMax_, &bf16Sum_, &bf16Max_})
    if (*op != MPI_OP_NULL)
      MPI_Op_free(op);
}

Status Communicator::initMpi() {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized)
    return Status::error("MPI is not initialized");
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_CHECK(MPI_Op_create(reduce16<Half, false>, 1, &halfSum_));
  MPI_CHECK(MPI_Op_create(reduce16<Half, true>, 1, &halfMax_));
  MPI_CHECK(MPI_Op_create(reduce16<BFloat16, false>, 1, &bf16Sum_));
  MPI_CHECK(MPI_Op_create(reduce16<BFloat16, true>, 1, &bf16Max_));
  mpi_ = true;
  return Status::ok();
}

Status Communicator::createGroups(const std::vector<std::vector<int>> &groups) {
  if (!groups_.empty())
    return Status::error("the communicator groups exist already");
  std::vector<Group> made(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int> &ranks = groups[g];
    auto self = std::find(ranks.begin(), ranks.end(), rank_);
    if (self == ranks.end())
      return Status::error("group " + std::to_string(g) +
                           " does not hold this rank (" +
                           std::to_string(rank_) + ")");
    for (int r : ranks)
      if (r < 0 || r >= size_)
        return Status::error("group " + std::to_string(g) + " holds rank " +
                             std::to_string(r) + ", but the world has " +
                             std::to_string(size_));
    made[g].ranks = ranks;
    made[g].self = int(self - ranks.begin());
  }
  if (mpi_) {
    // MPI_Comm_create_group is collective over the group's members only, so
    // a rank in two groups could wait on one while its peer waits on the
    // other. Creating them in one global order (by rank list) avoids that;
    // equal lists share one communicator.
    std::map<std::vector<int>, MPI_Comm> byRanks;
    for (const Group &g : made)
      if (g.ranks.size() > 1)
        byRanks.emplace(g.ranks, MPI_COMM_NULL);
    MPI_Group world;
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    for (auto &[ranks, comm] : byRanks) {
      MPI_Group group;
      MPI_CHECK(MPI_Group_incl(world, int(ranks.size()), ranks.data(), &group));
      Watchdog::What what;
      what.call = "MPI_Comm_create_group (making the program's groups)";
      what.group = Watchdog::kWorld;
      Watchdog::Wait wait(watchdog_, what);
      int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, /*tag=*/0x1eaf,
                                     &comm);
      MPI_Group_free(&group);
      MPI_CHECK(rc);
      MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    }
    MPI_Group_free(&world);
    for (Group &g : made)
      if (g.ranks.size() > 1)
        g.comm = byRanks[g.ranks];
  }
  groups_ = std::move(made);
  return Status::ok();
}

Status Communicator::datatype(DType dtype, MPI_Datatype &type) const {
  switch (dtype) {
  case DType::F32: type = MPI_FLOAT; break;
  case DType::F64: type = MPI_DOUBLE; break;
  case DType::F16: case DType::BF16: case DType::U16: type = MPI_UINT16_T; break;
  case DType::I64: type = MPI_INT64_T; break;
  case DType::I32: type = MPI_INT32_T; break;
  case DType::I16: type = MPI_INT16_T; break;
  case DType::I8: type = MPI_INT8_T; break;
  case DType::U8: case DType::Bool: type = MPI_UINT8_T; break;
  case DType::U32: type = MPI_UINT32_T; break;
  case DType::U64: type = MPI_UINT64_T; break;
  case DType::Undefined:
    return Status::error("no MPI type for an undefined element type");
  }
  return Status::ok();
}

Status Communicator::reduceOp(DType dtype, Reduce op, MPI_Op &mpiOp) const {
  bool isMax = op == Reduce::Max;
  if (dtype == DType::F16)
    mpiOp = isMax ? halfMax_ : halfSum_;
  else if (dtype == DType::BF16)
    mpiOp = isMax ? bf16Max_ : bf16Sum_;
  else
    mpiOp = isMax ? MPI_MAX : MPI_SUM;
  return Status::ok();
}

Status Communicator::scaleMean(const TensorRef &t, int count) const {
  int64_t n = t.numElements();
  switch (t.dtype) {
  case DType::F32: {
    float *p = t.as<float>();
    for (int64_t i = 0; i < n; ++i)
      p[i] /= float(count);
    return Status::ok();
  }
  case DType::F64: {
    double *p = t.as<double>();
    for (int64_t i = 0; i < n; ++i)
      p[i] /= double(count);
    return Status::ok();
  }
  case DType::F16: {
    Half *p = t.as<Half>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = ops::store<Half>(ops::load(p[i]) / float(count));
    return Status::ok();
  }
  case DType::BF16: {
    BFloat16 *p = t.as<BFloat16>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = ops::store<BFloat16>(ops::load(p[i]) / float(count));
    return Status::ok();
  }
  default:
    return Status::error(std::string("a mean of ") + dtypeName(t.dtype) +
                         " values: mean is for floating-point types only");
  }
}

Status Communicator::allReduce(int group, Reduce op, const TensorRef &in,
                               const TensorRef &out) {
  if (in.dtype != out.dtype || in.numElements() != out.numElements())
    return Status::error("all-reduce of " + describe(in) + " into " +
                         describe(out) + ": the sizes differ");
  if (in.data != out.data)
    std::memmove(out.data, in.data, out.sizeBytes());
  const Group &g = groups_[group];
  if (g.ranks.size() == 1)
    return Status::ok();
  MPI_Datatype type;
  MPI_Op mpiOp;
  CLEAVE_CHECK(datatype(out.dtype, type));
  CLEAVE_CHECK(reduceOp(out.dtype, op, mpiOp));
  size_t elementSize = dtypeSize(out.dtype);
  char *base = static_cast<char *>(out.data);
  for (int64_t done = 0, n = out.numElements(); done < n;) {
    int count = int(std::min(kMaxCount, n - done));
    Watchdog::Wait wait(watchdog_, over("MPI_Allreduce", group,
                                        uint64_t(count) * elementSize));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, base + done * elementSize, count,
                            type, mpiOp, g.comm));
    done += count;
  }
  if (op == Reduce::Mean)
    return scaleMean(out, int(g.ranks.size()));
  return Status::ok();
}

Status Communicator::startAllReduce(int group, Reduce op, const TensorRef &t,
                                    int event) {
  const Group &g = groups_[group];
  if (g.ranks.size() == 1)
    return Status::ok();
  MPI_Datatype type;
  MPI_Op mpiOp;
  CLEAVE_CHECK(datatype(t.dtype, type));
  CLEAVE_CHECK(reduceOp(t.dtype, op, mpiOp));
  StartedReduce started{event, {}, t, op, int(g.ranks.size()), group, {}};
  size_t elementSize = dtypeSize(t.dtype);
  char *base = static_cast<char *>(t.data);
  for (int64_t done = 0, n = t.numElements(); done < n;) {
    int count = int(std::min(kMaxCount, n - done));
    started.requests.push_back(MPI_REQUEST_NULL);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, base + done * elementSize, count,
                             type, mpiOp, g.comm, &started.requests.back()));
    done += count;
  }
  started_.push_back(std::move(started));
  return Status::ok();
}

Status Communicator::prepareReduceScatter(int group, Reduce op,
                                          const TensorRef &in,
                                          const TensorRef &out,
                                          ReduceScatterCall &call) const {
  const Group &g = groups_[group];
  int64_t n = out.numElements();
  if (in.dtype != out.dtype || in.numElements() != n * int64_t(g.ranks.size()))
    return Status::error("reduce-scatter of " + describe(in) + " into " +
                         describe(out) + " over " +
                         std::to_string(g.ranks.size()) +
                         " ranks: the input must hold one result per rank");
  call.local = g.ranks.size() == 1;
  if (call.local) {
    if (in.data != out.data)
      std::memmove(out.data, in.data, out.sizeBytes());
    return Status::ok();
  }
  if (n > INT_MAX)
    return Status::error("reduce-scatter into " + describe(out) +
                         ": more elements than one MPI call takes");
  call.count = int(n);
  CLEAVE_CHECK(datatype(in.dtype, call.type));
  CLEAVE_CHECK(reduceOp(in.dtype, op, call.op));
  call.send = in.data;
  if (overlaps(in, out)) {
    call.staged.assign(static_cast<char *>(in.data),
                       static_cast<char *>(in.data) + in.sizeBytes());
    call.send = call.staged.data();
  }
  return Status::ok();
}

Status Communicator::startReduceScatter(int group, Reduce op,
                                        const TensorRef &in,
                                        const TensorRef &out, int event) {
  ReduceScatterCall call;
  CLEAVE_CHECK(prepareReduceScatter(group, op, in, out, call));
  if (call.local)
    return Status::ok();
  const Group &g = groups_[group];
  StartedReduce started{event, {}, out, op, int(g.ranks.size()), group, {}};
  started.staged = std::move(call.staged);
  const void *send = started.staged.empty() ? call.send : started.staged.data();
  started.requests.push_back(MPI_REQUEST_NULL);
  MPI_CHECK(MPI_Ireduce_scatter_block(send, out.data, call.count, call.type,
                                      call.op, g.comm,
                                      &started.requests.back()));
  started_.push_back(std::move(started));
  return Status::ok();
}

Status Communicator::finishCollective(int event) {
  for (size_t i = 0; i < started_.size();) {
    if (started_[i].event != event) {
      ++i;
      continue;
    }
    StartedReduce s = std::move(started_[i]);
    started_.erase(started_.begin() + i);
    Watchdog::Wait wait(watchdog_, over("MPI_Waitall (a started collective)",
                                        s.group, s.tensor.sizeBytes()));
    MPI_CHECK(MPI_Waitall(int(s.requests.size()), s.requests.data(),
                          MPI_STATUSES_IGNORE));
    if (s.op == Reduce::Mean)
      CLEAVE_CHECK(scaleMean(s.tensor, s.count));
  }
  return Status::ok();
}

Status Communicator::finishCollectives() {
  while (!started_.empty())
    CLEAVE_CHECK(finishCollective(started_.front().event));
  return Status::ok();
}

void Communicator::progress() {
  for (StartedReduce &s : started_) {
    int done = 0;
    MPI_Testall(int(s.requests.size()), s.requests.data(), &done,
                MPI_STATUSES_IGNORE);
  }
}

Status Communicator::allGather(int group, const TensorRef &in,
                               const TensorRef &out) {
  const Group &g = groups_[group];
  int64_t n = in.numElements();
  if (in.dtype != out.dtype || out.numElements() != n * int64_t(g.ranks.size()))
    return Status::error("all-gather of " + describe(in) + " into " +
                         describe(out) + " over " +
                         std::to_string(g.ranks.size()) +
                         " ranks: the result must hold one input per rank");
  if (g.ranks.size() == 1) {
    if (in.data != out.data)
      std::memmove(out.data, in.data, out.sizeBytes());
    return Status::ok();
  }
  if (n > INT_MAX)
    return Status::error("all-gather of " + describe(in) +
                         ": more elements than one MPI call takes");
  MPI_Datatype type;
  CLEAVE_CHECK(datatype(in.dtype, type));
  std::vector<char> staged;
  const void *send = in.data;
  if (overlaps(in, out)) {
    staged.assign(static_cast<char *>(in.data),
                  static_cast<char *>(in.data) + in.sizeBytes());
    send = staged.data();
  }
  Watchdog::Wait wait(watchdog_, over("MPI_Allgather", group, out.sizeBytes()));
  MPI_CHECK(MPI_Allgather(send, int(n), type, out.data, int(n), type, g.comm));
  return Status::ok();
}

Status Communicator::startAllGather(int group, const TensorRef &in,
                                    const TensorRef &out, int event) {
  const Group &g = groups_[group];
  int64_t n = in.numElements();
  if (in.dtype != out.dtype || out.numElements() != n * int64_t(g.ranks.size()))
    return Status::error("all-gather of " + describe(in) + " into " +
                         describe(out) + " over " +
                         std::to_string(g.ranks.size()) +
                         " ranks: the result must hold one input per rank");
  if (g.ranks.size() == 1) {
    if (in.data != out.data)
      std::memmove(out.data, in.data, out.sizeBytes());
    return Status::ok();
  }
  if (n > INT_MAX)
    return Status::error("all-gather of " + describe(in) +
                         ": more elements than one MPI call takes");
  MPI_Datatype type;
  CLEAVE_CHECK(datatype(in.dtype, type));
  StartedReduce started{event, {}, out, Reduce::Sum, int(g.ranks.size()),
                        group, {}};
  const void *send = in.data;
  if (overlaps(in, out)) {
    started.staged.assign(static_cast<char *>(in.data),
                          static_cast<char *>(in.data) + in.sizeBytes());
    send = started.staged.data();
  }
  started.requests.push_back(MPI_REQUEST_NULL);
  MPI_CHECK(MPI_Iallgather(send, int(n), type, out.data, int(n), type, g.comm,
                           &started.requests.back()));
  started_.push_back(std::move(started));
  return Status::ok();
}

Status Communicator::reduceScatter(int group, Reduce op, const TensorRef &in,
                                   const TensorRef &out) {
  ReduceScatterCall call;
  CLEAVE_CHECK(prepareReduceScatter(group, op, in, out, call));
  if (call.local)
    return Status::ok();
  const Group &g = groups_[group];
  Watchdog::Wait wait(watchdog_,
                      over("MPI_Reduce_scatter_block", group, in.sizeBytes()));
  MPI_CHECK(MPI_Reduce_scatter_block(call.send, out.data, call.count,
                                     call.type, call.op, g.comm));
  if (op == Reduce::Mean)
    return scaleMean(out, int(g.ranks.size()));
  return Status::ok();
}

Status Communicator::broadcast(int group, int root, const TensorRef &in,
                               const TensorRef &out) {
  const Group &g = groups_[group];
  if (in.dtype != out.dtype || in.numElements() != out.numElements())
    return Status::error("broadcast of " + describe(in) + " into " +
                         describe(out) + ": the sizes differ");
  if (root < 0 || root >= int(g.ranks.size()))
    return Status::error("broadcast from group rank " + std::to_string(root) +
                         " in a group of " + std::to_string(g.ranks.size()));
  if (g.self == root && in.data != out.data)
    std::memmove(out.data, in.data, out.sizeBytes());
  if (g.ranks.size() == 1)
    return Status::ok();
  MPI_Datatype type;
  CLEAVE_CHECK(datatype(out.dtype, type));
  size_t elementSize = dtypeSize(out.dtype);
  char *base = static_cast<char *>(out.data);
  for (int64_t done = 0, n = out.numElements(); done < n;) {
    int count = int(std::min(kMaxCount, n - done));
    Watchdog::Wait wait(watchdog_, over("MPI_Bcast", group,
                                        uint64_t(count) * elementSize));
    MPI_CHECK(MPI_Bcast(base + done * elementSize, count, type, root, g.comm));
    done += count;
  }
  return Status::ok();
}

Status Communicator::checkPointToPoint(int peer, const TensorRef &t,
                                       const char *what) const {
  if (!mpi_ || peer < 0 || peer >= size_ || peer == rank_)
    return Status::error(std::string(what) + " rank " + std::to_string(peer) +
                         ": not another rank of this world of " +
                         std::to_string(size_));
  if (t.sizeBytes() > size_t(INT_MAX))
    return Status::error(std::string(what) + " rank " + std::to_string(peer) +
                         " of " + describe(t) +
                         ": more bytes than one MPI call takes");
  return Status::ok();
}

Status Communicator::send(int peer, int tag, const TensorRef &t) {
  CLEAVE_CHECK(checkPointToPoint(peer, t, "send to"));
  Watchdog::Wait wait(watchdog_,
                      with("MPI_Send", peer, false, tag, t.sizeBytes()));
  MPI_CHECK(MPI_Send(t.data, int(t.sizeBytes()), MPI_BYTE, peer, tag,
                     MPI_COMM_WORLD));
  return Status::ok();
}

Status Communicator::startSend(int peer, int tag, const TensorRef &t) {
  CLEAVE_CHECK(checkPointToPoint(peer, t, "send to"));
  PendingSend p{MPI_REQUEST_NULL, static_cast<const char *>(t.data),
                t.sizeBytes()};
  MPI_CHECK(MPI_Isend(t.data, int(t.sizeBytes()), MPI_BYTE, peer, tag,
                      MPI_COMM_WORLD, &p.request));
  pending_.push_back(p);
  return Status::ok();
}

Status Communicator::finishSendsOverlapping(const void *data, size_t size) {
  const char *begin = static_cast<const char *>(data), *end = begin + size;
  for (size_t i = 0; i < pending_.size();) {
    PendingSend &p = pending_[i];
    if (p.data < end && begin < p.data + p.size) {
      MPI_Request request = p.request;
      Watchdog::Wait wait(watchdog_, with("MPI_Wait (a started send)", -1,
                                          false, -1, p.size));
      pending_.erase(pending_.begin() + i);
      MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
      continue;
    }
    ++i;
  }
  return Status::ok();
}

Status Communicator::finishSends() {
  while (!pending_.empty()) {
    MPI_Request request = pending_.back().request;
    Watchdog::Wait wait(watchdog_, with("MPI_Wait (a started send)", -1, false,
                                        -1, pending_.back().size));
    pending_.pop_back();
    MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
  }
  return Status::ok();
}

Status Communicator::recv(int peer, int tag, const TensorRef &t) {
  CLEAVE_CHECK(checkPointToPoint(peer, t, "receive from"));
  MPI_Status status;
  Watchdog::Wait wait(watchdog_,
                      with("MPI_Recv", peer, true, tag, t.sizeBytes()));
  MPI_CHECK(MPI_Recv(t.data, int(t.sizeBytes()), MPI_BYTE, peer, tag,
                     MPI_COMM_WORLD, &status));
  int count = 0;
  MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  if (size_t(count) != t.sizeBytes())
    return Status::error("received " + std::to_string(count) +
                         " bytes from rank " + std::to_string(peer) +
                         " (tag " + std::to_string(tag) + "), expected " +
                         std::to_string(t.sizeBytes()) + " for " + describe(t));
  return Status::ok();
}

Status Communicator::sumAll(std::vector<double> &values) {
  if (!mpi_ || size_ == 1 || values.empty())
    return Status::ok();
  Watchdog::Wait wait(watchdog_, over("MPI_Allreduce (sum of the step's "
                                      "loss and FLOPs)",
                                      Watchdog::kWorld, 0));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()),
                          MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return Status::ok();
}

Status Communicator::maxAll(std::vector<uint64_t> &values) {
  if (!mpi_ || size_ == 1 || values.empty())
    return Status::ok();
  Watchdog::Wait wait(watchdog_,
                      over("MPI_Allreduce (a maximum)", Watchdog::kWorld, 0));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()),
                          MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  return Status::ok();
}

Status Communicator::agree(bool ok, bool &all) {
  all = ok;
  if (!mpi_ || size_ == 1)
    return Status::ok();
  int value = ok ? 1 : 0;
  Watchdog::Wait wait(watchdog_, over("MPI_Allreduce (all ranks agreeing)",
                                      Watchdog::kWorld, 0));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN,
                          MPI_COMM_WORLD));
  all = value == 1;
  return Status::ok();
}

Status Communicator::gatherToRoot(const std::string &mine,
                                  std::vector<std::string> &all) {
  all.clear();
  if (!mpi_ || size_ == 1) {
    all.push_back(mine);
    return Status::ok();
  }
  // Point to point, in chunks, so no count exceeds an int.
  constexpr int kTag = 0x5afe;
  Watchdog::Wait wait(watchdog_, rank_ != 0
                                     ? with("MPI_Send (gathering to rank 0)",
                                            0, false, kTag, mine.size())
                                     : over("MPI_Recv (gathering to rank 0)",
                                            Watchdog::kWorld, 0));
  if (rank_ != 0) {
    uint64_t size = mine.size();
    MPI_CHECK(MPI_Send(&size, 1, MPI_UINT64_T, 0, kTag, MPI_COMM_WORLD));
    for (uint64_t done = 0; done < size;) {
      int count = int(std::min<uint64_t>(kMaxCount, size - done));
      MPI_CHECK(MPI_Send(mine.data() + done, count, MPI_BYTE, 0, kTag,
                         MPI_COMM_WORLD));
      done += count;
    }
    return Status::ok();
  }
  all.resize(size_);
  all[0] = mine;
  for (int r = 1; r < size_; ++r) {
    uint64_t size = 0;
    MPI_CHECK(MPI_Recv(&size, 1, MPI_UINT64_T, r, kTag, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
    all[r].resize(size);
    for (uint64_t done = 0; done < size;) {
      int count = int(std::min<uint64_t>(kMaxCount, size - done));
      MPI_CHECK(MPI_Recv(&all[r][done], count, MPI_BYTE, r, kTag,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      done += count;
    }
  }
  return Status::ok();
}

Status Communicator::allGatherSmall(const std::string &mine,
                                    std::vector<std::string> &all) {
  all.clear();
  if (!mpi_ || size_ == 1) {
    all.push_back(mine);
    return Status::ok();
  }
  if (int64_t(mine.size()) > kMaxCount)
    return Status::error("allGatherSmall: " + std::to_string(mine.size()) +
                         " bytes is too many for one call");
  int size = int(mine.size());
  std::vector<int> sizes(size_), offsets(size_);
  Watchdog::Wait wait(watchdog_,
                      over("MPI_Allgather", Watchdog::kWorld, mine.size()));
  MPI_CHECK(MPI_Allgather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT,
                          MPI_COMM_WORLD));
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = int(total);
    total += sizes[r];
  }
  if (total > int64_t(kMaxCount))
    return Status::error("allGatherSmall: " + std::to_string(total) +
                         " bytes in all is too many for one call");
  std::string bytes(size_t(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), size, MPI_BYTE, bytes.data(),
                           sizes.data(), offsets.data(), MPI_BYTE,
                           MPI_COMM_WORLD));
  for (int r = 0; r < size_; ++r)
    all.push_back(bytes.substr(offsets[r], sizes[r]));
  return Status::ok();
}
