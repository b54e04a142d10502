//===- Backend.h - where a program's tensors live and its kernels run -*- C++ -*-===//
//
// The executor (Executor.cpp) runs the same program on any backend: `cpu`
// (host memory, the OpenMP/BLAS kernels of runtime/cpu/) or `cuda` (device
// memory, the kernels of runtime/cuda/ on a compute stream). A Backend owns
// the arenas it allocates and orders its own work: upload, zero, copy and
// runKernel are enqueued in program order; download and synchronize return
// once everything before them has finished.
//
// When tensor memory is not host memory (hostMemory() is false), the
// executor reads and writes tensors only through upload and download: the
// parameters it initializes, the token ids it fills, the STEP and LOSS_SCALE
// inputs, the losses it reads and the parameters it saves. Communication is
// then the Backend's deviceCommunication() (NCCL, one rank per GPU) or, when
// that is null, MPI on host copies of the tensors (ranks sharing a GPU).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_BACKEND_H
#define CLEAVE_RUNTIME_BACKEND_H

#include "runtime/Communicator.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/ops/OpTable.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave::runtime {

/// Collectives and point-to-point transfers on backend memory, ordered with
/// the backend's kernels (for CUDA: NCCL on a communication stream that waits
/// for the compute stream, and that the compute stream waits for). The
/// meaning of each call is Communicator's.
class DeviceCommunication {
public:
  virtual ~DeviceCommunication() = default;
  /// Makes group g of each list of world ranks, called names[g] in the
  /// program (collective over `world`).
  virtual Status createGroups(Communicator &world,
                              const std::vector<std::vector<int>> &groups,
                              const std::vector<std::string> &names) = 0;
  virtual Status allReduce(int group, Reduce op, const TensorRef &in,
                           const TensorRef &out) = 0;
  virtual Status allGather(int group, const TensorRef &in,
                           const TensorRef &out) = 0;
  virtual Status reduceScatter(int group, Reduce op, const TensorRef &in,
                               const TensorRef &out) = 0;
  virtual Status broadcast(int group, int root, const TensorRef &in,
                           const TensorRef &out) = 0;
  /// Enqueues a send that later kernels do not wait for; the next write of
  /// the tensor's bytes and finishSends() do.
  virtual Status startSend(int peer, int tag, const TensorRef &t) = 0;
  virtual Status recv(int peer, int tag, const TensorRef &t) = 0;
  /// Makes later work wait for the started sends that read bytes in
  /// [data, data + size): call before writing there.
  virtual Status finishSendsOverlapping(const void *data, size_t size) = 0;
  virtual Status finishSends() = 0;
  /// An in-place all-reduce that only finishCollective(event) waits for.
  virtual Status startAllReduce(int group, Reduce op, const TensorRef &t,
                                int event) = 0;
  /// A reduce-scatter of `in` into `out` (which may be this rank's part of
  /// `in`) that only finishCollective(event) waits for.
  virtual Status startReduceScatter(int group, Reduce op, const TensorRef &in,
                                    const TensorRef &out, int event) = 0;
  /// An all-gather of `in` into `out` that only finishCollective(event)
  /// waits for (ZeRO-3's prefetched parameters).
  virtual Status startAllGather(int group, const TensorRef &in,
                                const TensorRef &out, int event) = 0;
  virtual Status finishCollective(int event) = 0;
  virtual Status finishCollectives() = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu" or "cuda".
  virtual const char *name() const = 0;
  /// Whether tensor memory is host memory the executor may use directly.
  virtual bool hostMemory() const = 0;
  /// Whether its kernels run on the host's cores (the CPU backends): work
  /// the runtime adds beside a step then takes cores from it.
  virtual bool kernelsUseHostCores() const { return true; }
  /// Bytes of memory a plan may use, or 0 when unknown, and what has them
  /// ("this machine", "GPU 0").
  virtual uint64_t availableBytes() const = 0;
  virtual std::string memoryName() const = 0;

  /// A zero-filled arena of `bytes` (never empty) aligned to `alignment`.
  virtual Status allocate(uint64_t bytes, uint64_t alignment, void *&base) = 0;
  virtual void release(void *base) = 0;

  virtual Status upload(void *to, const void *from, size_t bytes) = 0;
  virtual Status download(void *to, const void *from, size_t bytes) = 0;
  virtual Status zero(void *to, size_t bytes) = 0;
  virtual Status copy(void *to, const void *from, size_t bytes) = 0;

  /// Host memory for a HOST buffer (offloaded activations): zero-filled,
  /// reachable by the runtime on every backend (by default the heap's;
  /// page-locked on CUDA, so that copies run asynchronously).
  virtual Status allocateHost(uint64_t bytes, uint64_t alignment, void *&base);
  virtual void releaseHost(void *base);
  /// Copies backend memory to host memory from allocateHost (an offload)
  /// and back (a fetch), ordered with the kernels as upload and download
  /// are, but free to return before the copy is done (CUDA: a copy stream
  /// that waits for the compute stream, and that later kernels wait for).
  virtual Status offload(void *to, const void *from, size_t bytes) {
    return download(to, from, bytes);
  }
  virtual Status fetch(void *to, const void *from, size_t bytes) {
    return upload(to, from, bytes);
  }
  virtual Status runKernel(const std::string &op, const Attributes &attributes,
                           const std::vector<TensorRef> &inputs,
                           const std::vector<TensorRef> &outputs) = 0;
  /// Loss scaling: `found` = whether any element of the f32 tensors is not
  /// finite.
  virtual Status anyNonFinite(const std::vector<TensorRef> &tensors,
                              bool &found) = 0;
  /// Multiplies every element of the f32 tensors by `factor`.
  virtual Status scale(const std::vector<TensorRef> &tensors, float factor) = 0;
  /// Waits for everything enqueued.
  virtual Status synchronize() = 0;

  /// Communication on backend memory, or null (MPI on host copies).
  virtual DeviceCommunication *deviceCommunication() { return nullptr; }
};

/// Host memory and the CPU kernels.
std::unique_ptr<Backend> makeCpuBackend();
/// The CPU kernels on memory the runtime can reach only through the
/// backend's calls, as on a GPU shared by ranks ("cpu-staged"; CpuBackend.cpp).
std::unique_ptr<Backend> makeStagedCpuBackend();

/// The backends by name: "cpu", "cpu-staged" and "cuda" (which a build
/// without nvcc refuses in makeBackend, saying so).
const std::vector<std::string> &backendNames();

/// One line per backend name: "cpu", "cpu-staged", and for CUDA either
/// "cuda: GPU 0 (NVIDIA H100 80GB HBM3), ..." or "cuda (no device: why)".
std::vector<std::string> describeBackends();

/// The backend called `name` for the rank with local rank `localRank` of
/// `ranksOnNode` ranks on its node. For "cuda": GPU localRank % devices;
/// with at least as many GPUs as ranks on the node each rank has its own and
/// talks NCCL (deviceCommunication), otherwise ranks share GPUs and
/// communicate through MPI on host copies. An error naming the backend and
/// what to do without a GPU or driver, or for a build without CUDA.
Status makeBackend(const std::string &name, int localRank, int ranksOnNode,
                   std::unique_ptr<Backend> &backend);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_BACKEND_H
