//===- NcclCommunication.cpp - NCCL groups, collectives and transfers -----===//

#include "runtime/cuda/NcclCommunication.h"
#include "runtime/cuda/CudaCheck.h"

#include <cstring>
#include <map>

using namespace cleave::runtime;

namespace {

enum Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast };

Status ncclType(DType dtype, ncclDataType_t &type) {
  switch (dtype) {
  case DType::F32: type = ncclFloat32; return Status::ok();
  case DType::F16: type = ncclFloat16; return Status::ok();
  case DType::BF16: type = ncclBfloat16; return Status::ok();
  case DType::F64: type = ncclFloat64; return Status::ok();
  case DType::I64: type = ncclInt64; return Status::ok();
  case DType::I32: type = ncclInt32; return Status::ok();
  case DType::U64: type = ncclUint64; return Status::ok();
  case DType::U32: type = ncclUint32; return Status::ok();
  case DType::I8: type = ncclInt8; return Status::ok();
  case DType::U8:
  case DType::Bool: type = ncclUint8; return Status::ok();
  default:
    return Status::error(std::string("NCCL has no element type ") +
                         dtypeName(dtype));
  }
}

ncclRedOp_t ncclOp(Reduce op) {
  switch (op) {
  case Reduce::Mean: return ncclAvg;
  case Reduce::Max: return ncclMax;
  default: return ncclSum;
  }
}

/// The key every member of a group computes alike: its name and ranks.
std::string groupKey(const std::string &name, const std::vector<int> &ranks) {
  std::string key = name + ":";
  for (int r : ranks)
    key += std::to_string(r) + ",";
  return key;
}

void appendId(std::string &to, const std::string &key,
              const ncclUniqueId &id) {
  uint32_t n = uint32_t(key.size());
  to.append(reinterpret_cast<const char *>(&n), sizeof n);
  to += key;
  to.append(reinterpret_cast<const char *>(&id), sizeof id);
}

} // namespace

NcclCommunication::~NcclCommunication() {
  for (ncclComm_t c : groups_)
    if (c)
      (void)ncclCommDestroy(c);
  for (ncclComm_t c : {upComm_, downComm_})
    if (c)
      (void)ncclCommDestroy(c);
  for (std::vector<Pending> *list : {&sends_, &started_})
    for (Pending &p : *list)
      (void)cudaEventDestroy(p.done);
  for (cudaEvent_t e : spare_)
    (void)cudaEventDestroy(e);
  for (cudaStream_t s : {collectives_, up_, down_})
    if (s)
      (void)cudaStreamDestroy(s);
}

Status NcclCommunication::createGroups(
    Communicator &world, const std::vector<std::vector<int>> &groups,
    const std::vector<std::string> &names) {
  rank_ = world.rank();
  worldSize_ = world.size();
  for (cudaStream_t *s : {&collectives_, &up_, &down_})
    CLEAVE_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));

  // Each group's first member makes its id; rank 0 those of the world's.
  std::string mine;
  for (size_t g = 0; g < groups.size(); ++g)
    if (!groups[g].empty() && groups[g][0] == rank_) {
      ncclUniqueId id;
      CLEAVE_CUDA_CHECK(ncclGetUniqueId(&id));
      appendId(mine, groupKey(names[g], groups[g]), id);
    }
  if (rank_ == 0)
    for (const char *key : {"world:up", "world:down"}) {
      ncclUniqueId id;
      CLEAVE_CUDA_CHECK(ncclGetUniqueId(&id));
      appendId(mine, key, id);
    }
  std::vector<std::string> all;
  CLEAVE_CHECK(world.allGatherSmall(mine, all));
  std::map<std::string, ncclUniqueId> ids;
  for (const std::string &bytes : all)
    for (size_t at = 0; at + sizeof(uint32_t) <= bytes.size();) {
      uint32_t n;
      std::memcpy(&n, bytes.data() + at, sizeof n);
      at += sizeof n;
      if (at + n + sizeof(ncclUniqueId) > bytes.size())
        return Status::error("NCCL bootstrap: a malformed id list");
      ncclUniqueId id;
      std::memcpy(&id, bytes.data() + at + n, sizeof id);
      ids[bytes.substr(at, n)] = id;
      at += n + sizeof id;
    }

  groups_.assign(groups.size(), nullptr);
  CLEAVE_CUDA_CHECK(ncclGroupStart());
  for (size_t g = 0; g < groups.size(); ++g) {
    auto it = ids.find(groupKey(names[g], groups[g]));
    int self = -1;
    for (size_t i = 0; i < groups[g].size(); ++i)
      if (groups[g][i] == rank_)
        self = int(i);
    if (it == ids.end() || self < 0) {
      (void)ncclGroupEnd();
      return Status::error("NCCL bootstrap: no id for group '" + names[g] +
                           "' (or this rank is not in it)");
    }
    CLEAVE_CUDA_CHECK(ncclCommInitRank(&groups_[g], int(groups[g].size()),
                                       it->second, self));
  }
  CLEAVE_CUDA_CHECK(
      ncclCommInitRank(&upComm_, worldSize_, ids["world:up"], rank_));
  CLEAVE_CUDA_CHECK(
      ncclCommInitRank(&downComm_, worldSize_, ids["world:down"], rank_));
  CLEAVE_CUDA_CHECK(ncclGroupEnd());
  return Status::ok();
}

Status NcclCommunication::checkGroup(int group, const char *what) const {
  if (group < 0 || group >= int(groups_.size()))
    return Status::error(std::string(what) + ": no group " +
                         std::to_string(group));
  return Status::ok();
}

Status NcclCommunication::afterCompute(cudaStream_t stream) {
  cudaEvent_t e;
  if (spare_.empty())
    CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  else {
    e = spare_.back();
    spare_.pop_back();
  }
  CLEAVE_CUDA_CHECK(cudaEventRecord(e, compute_));
  CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0));
  spare_.push_back(e); // recorded and waited for: free to record again
  return Status::ok();
}

Status NcclCommunication::record(cudaStream_t stream, Pending &p) {
  if (spare_.empty())
    CLEAVE_CUDA_CHECK(
        cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming));
  else {
    p.done = spare_.back();
    spare_.pop_back();
  }
  CLEAVE_CUDA_CHECK(cudaEventRecord(p.done, stream));
  return Status::ok();
}

Status NcclCommunication::collective(int group, Reduce op, const TensorRef &in,
                                     const TensorRef &out, int kind, int root,
                                     int event) {
  CLEAVE_CHECK(checkGroup(group, "NCCL collective"));
  ncclDataType_t type;
  CLEAVE_CHECK(ncclType(in.dtype, type));
  ncclComm_t comm = groups_[group];
  CLEAVE_CHECK(afterCompute(collectives_));
  switch (kind) {
  case kAllGather:
    CLEAVE_CUDA_CHECK(ncclAllGather(in.data, out.data, in.numElements(), type,
                                    comm, collectives_));
    break;
  case kReduceScatter:
    CLEAVE_CUDA_CHECK(ncclReduceScatter(in.data, out.data, out.numElements(),
                                        type, ncclOp(op), comm, collectives_));
    break;
  case kBroadcast:
    CLEAVE_CUDA_CHECK(ncclBroadcast(in.data, out.data, out.numElements(), type,
                                    root, comm, collectives_));
    break;
  default:
    CLEAVE_CUDA_CHECK(ncclAllReduce(in.data, out.data, in.numElements(), type,
                                    ncclOp(op), comm, collectives_));
    break;
  }
  Pending p;
  p.event = event;
  CLEAVE_CHECK(record(collectives_, p));
  if (event > 0) {
    started_.push_back(p);
    return Status::ok();
  }
  CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));
  spare_.push_back(p.done);
  return Status::ok();
}

Status NcclCommunication::allReduce(int group, Reduce op, const TensorRef &in,
                                    const TensorRef &out) {
  return collective(group, op, in, out, kAllReduce, 0, 0);
}
Status NcclCommunication::allGather(int group, const TensorRef &in,
                                    const TensorRef &out) {
  return collective(group, Reduce::Sum, in, out, kAllGather, 0, 0);
}
Status NcclCommunication::reduceScatter(int group, Reduce op,
                                        const TensorRef &in,
                                        const TensorRef &out) {
  return collective(group, op, in, out, kReduceScatter, 0, 0);
}
Status NcclCommunication::broadcast(int group, int root, const TensorRef &in,
                                    const TensorRef &out) {
  return collective(group, Reduce::Sum, in, out, kBroadcast, root, 0);
}
Status NcclCommunication::startAllReduce(int group, Reduce op,
                                         const TensorRef &t, int event) {
  return collective(group, op, t, t, kAllReduce, 0, event);
}

Status NcclCommunication::startReduceScatter(int group, Reduce op,
                                             const TensorRef &in,
                                             const TensorRef &out, int event) {
  return collective(group, op, in, out, kReduceScatter, 0, event);
}

Status NcclCommunication::startAllGather(int group, const TensorRef &in,
                                         const TensorRef &out, int event) {
  return collective(group, Reduce::Sum, in, out, kAllGather, 0, event);
}

Status NcclCommunication::startSend(int peer, int tag, const TensorRef &t) {
  (void)tag;
  if (peer < 0 || peer >= worldSize_ || peer == rank_)
    return Status::error("NCCL send: peer " + std::to_string(peer) +
                         " is not another rank of the world of " +
                         std::to_string(worldSize_));
  bool upward = peer > rank_;
  cudaStream_t stream = upward ? up_ : down_;
  CLEAVE_CHECK(afterCompute(stream));
  CLEAVE_CUDA_CHECK(ncclSend(t.data, t.sizeBytes(), ncclUint8, peer,
                             upward ? upComm_ : downComm_, stream));
  Pending p;
  p.data = static_cast<const char *>(t.data);
  p.size = t.sizeBytes();
  CLEAVE_CHECK(record(stream, p));
  sends_.push_back(p);
  return Status::ok();
}

Status NcclCommunication::recv(int peer, int tag, const TensorRef &t) {
  (void)tag;
  if (peer < 0 || peer >= worldSize_ || peer == rank_)
    return Status::error("NCCL receive: peer " + std::to_string(peer) +
                         " is not another rank of the world of " +
                         std::to_string(worldSize_));
  // A message from below travels on "up".
  bool upward = peer < rank_;
  cudaStream_t stream = upward ? up_ : down_;
  CLEAVE_CHECK(afterCompute(stream));
  CLEAVE_CUDA_CHECK(ncclRecv(t.data, t.sizeBytes(), ncclUint8, peer,
                             upward ? upComm_ : downComm_, stream));
  Pending p;
  CLEAVE_CHECK(record(stream, p));
  CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));
  spare_.push_back(p.done);
  return Status::ok();
}

Status NcclCommunication::finishSendsOverlapping(const void *data,
                                                 size_t size) {
  const char *begin = static_cast<const char *>(data), *end = begin + size;
  size_t kept = 0;
  for (Pending &p : sends_) {
    if (p.data < end && begin < p.data + p.size) {
      CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));
      spare_.push_back(p.done);
      continue;
    }
    sends_[kept++] = p;
  }
  sends_.resize(kept);
  return Status::ok();
}

Status NcclCommunication::finishSends() {
  for (Pending &p : sends_) {
    CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));
    spare_.push_back(p.done);
  }
  sends_.clear();
  return Status::ok();
}

Status NcclCommunication::finishCollective(int event) {
  size_t kept = 0;
  for (Pending &p : started_) {
    if (event == 0 || p.event == event) {
      CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));
      spare_.push_back(p.done);
      continue;
    }
    started_[kept++] = p;
  }
  started_.resize(kept);
  return Status::ok();
}

Status NcclCommunication::finishCollectives() { return finishCollective(0); }
