//===- NcclCommunication.h - NCCL for the CUDA backend ---------*- C++ -*-===//
//
// One NCCL communicator per program group, plus two over the world for
// point-to-point transfers: "up" carries every message from a lower to a
// higher rank, "down" the others, each on its own stream. A pipeline stage
// then sends activations up while it receives gradients from above on the
// other communicator, so the exchange of 1F1B's steady state (both
// neighbours send, then receive) cannot block, as MPI's started sends do
// not. NCCL has no tags: messages between two ranks on one communicator
// match in the order they are posted, which the schedule makes the same on
// both sides.
//
// The unique ids are made by each group's first rank and exchanged in one
// all-gather over MPI, and all communicators are created in one NCCL group
// call, so no order of creation across ranks is needed.
//
// Ordering: every operation's stream first waits for the compute stream's
// work so far. A collective the program does not start early (no event) and
// every receive are then waited for by the compute stream at once; a
// started all-reduce only when its event is waited for, and a send only
// before its bytes are written again (finishSendsOverlapping) or at the
// end of the step (finishSends).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CUDA_NCCLCOMMUNICATION_H
#define CLEAVE_RUNTIME_CUDA_NCCLCOMMUNICATION_H

#include "runtime/Backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <vector>

namespace cleave::runtime {

class NcclCommunication final : public DeviceCommunication {
public:
  explicit NcclCommunication(cudaStream_t compute) : compute_(compute) {}
  ~NcclCommunication() override;

  Status createGroups(Communicator &world,
                      const std::vector<std::vector<int>> &groups,
                      const std::vector<std::string> &names) override;
  Status allReduce(int group, Reduce op, const TensorRef &in,
                   const TensorRef &out) override;
  Status allGather(int group, const TensorRef &in,
                   const TensorRef &out) override;
  Status reduceScatter(int group, Reduce op, const TensorRef &in,
                       const TensorRef &out) override;
  Status broadcast(int group, int root, const TensorRef &in,
                   const TensorRef &out) override;
  Status startSend(int peer, int tag, const TensorRef &t) override;
  Status recv(int peer, int tag, const TensorRef &t) override;
  Status finishSendsOverlapping(const void *data, size_t size) override;
  Status finishSends() override;
  Status startAllReduce(int group, Reduce op, const TensorRef &t,
                        int event) override;
  Status startReduceScatter(int group, Reduce op, const TensorRef &in,
                            const TensorRef &out, int event) override;
  Status startAllGather(int group, const TensorRef &in, const TensorRef &out,
                        int event) override;
  Status finishCollective(int event) override;
  Status finishCollectives() override;

private:
  /// An operation in flight: the compute stream waits for `done` when it
  /// needs the operation finished.
  struct Pending {
    cudaEvent_t done;
    int event = 0;             // started all-reduces
    const char *data = nullptr; // sends
    size_t size = 0;
  };
  Status checkGroup(int group, const char *what) const;
  /// Makes `stream` wait for the compute stream's work so far.
  Status afterCompute(cudaStream_t stream);
  /// Records the end of the work on `stream` so far.
  Status record(cudaStream_t stream, Pending &p);
  Status collective(int group, Reduce op, const TensorRef &in,
                    const TensorRef &out, int kind, int root, int event);

  cudaStream_t compute_;
  cudaStream_t collectives_ = nullptr, up_ = nullptr, down_ = nullptr;
  std::vector<ncclComm_t> groups_;
  ncclComm_t upComm_ = nullptr, downComm_ = nullptr;
  int rank_ = 0, worldSize_ = 1;
  std::vector<Pending> sends_, started_;
  std::vector<cudaEvent_t> spare_; // finished events, for reuse
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_CUDA_NCCLCOMMUNICATION_H
