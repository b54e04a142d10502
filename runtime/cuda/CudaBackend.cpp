//===- CudaBackend.cpp - device memory, streams and kernels for the executor ===//
//
// Three kinds of work, each on its own stream and ordered by events:
//  - kernels, zeroing and device-to-device copies on the compute stream;
//  - host copies (upload, download) on the copy stream, which first waits
//    for the compute stream's work so far, and which the compute stream
//    waits for before its next work;
//  - activation offloads and fetches on the copy stream too, after the
//    compute so far, but the compute stream waits for one only before the
//    first work that touches its device bytes (PendingCopies: writing what
//    an offload reads, reading or writing what a fetch writes; every copy
//    before communication, whose streams wait for the compute stream), so
//    the copies overlap the kernels between;
//  - communication (NcclCommunication) on its streams.
// A download returns when its bytes are on the host; nothing else waits
// for the device except synchronize().
//
// The kernels share one CudaContext (matmul's cuBLASLt handle, workspace
// and plans), made in start() for the compute stream.
//
// adamw ops are batched: the executor runs one per parameter, and
// runKernel("adamw") checks the op (same errors as runCudaKernel's) and
// defers it; consecutive adamw ops with the same attributes, step and
// sum_squares then run as one adamwMultiTensor launch (per 512). Each
// element is computed by the same kernel code either way, and the deferred
// ops run in program order with respect to everything else, so the results
// are the unbatched ones bit for bit. The ordering rule:
//  - the deferred ops are enqueued (flushed) at the start of every other
//    Backend call (any other kernel, upload, download, zero, copy,
//    anyNonFinite, scale, synchronize, allocate, release), before an adamw
//    with other attributes, step or sum_squares, at 512 ops, and before an
//    adamw whose bytes overlap theirs in a way that running together could
//    change (it writes what they read or write, or reads what they write):
//    ops that run in one launch must be independent;
//  - deviceCommunication() is a thin wrapper of NcclCommunication that
//    flushes before every call but finishSendsOverlapping. The collectives,
//    sends and receives make their streams wait for the compute stream's
//    work so far, so the deferred ops must be enqueued first. The finish
//    calls only make the compute stream wait for communication;
//    finishSendsOverlapping is called before every op the executor runs,
//    adamw included, so flushing there would undo the batching. A deferred
//    op enqueued after such a wait only starts later: it reads and writes
//    no bytes the send reads (the executor calls finishSendsOverlapping for
//    an op's results before the op), and the send it now waits for was
//    started before it was deferred (a send flushes), so it cannot wait
//    for the op: the wait adds no cycle and changes no value.
// The executor reaches the backend only through these calls, so nothing
// can see a tensor of a deferred op before it has run.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/PendingCopies.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/NcclCommunication.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>

using namespace cleave::runtime;

namespace {

/// A set of byte ranges [begin, end) of device memory, kept as disjoint
/// ranges.
class ByteRanges {
public:
  void add(const void *data, size_t bytes) {
    uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
    if (!data || !bytes)
      return;
    auto it = ranges_.upper_bound(begin); // the first starting after begin
    if (it != ranges_.begin() && std::prev(it)->second >= begin) {
      --it;
      begin = it->first;
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    while (it != ranges_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_[begin] = end;
  }
  bool overlaps(const void *data, size_t bytes) const {
    uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
    if (!data || !bytes)
      return false;
    auto it = ranges_.lower_bound(end); // the first starting at or after end
    return it != ranges_.begin() && std::prev(it)->second > begin;
  }
  void clear() { ranges_.clear(); }

private:
  std::map<uintptr_t, uintptr_t> ranges_; // begin -> end
};

bool sameAttributes(const Attributes &x, const Attributes &y) {
  return std::equal(
      x.begin(), x.end(), y.begin(), y.end(), [](const auto &a, const auto &b) {
        const AttrValue &u = a.second, &v = b.second;
        return a.first == b.first && u.kind == v.kind && u.i == v.i &&
               u.f == v.f && u.s == v.s && u.ints == v.ints;
      });
}

/// The adamw ops deferred so far, run as one adamwMultiTensor.
class AdamWBatch {
public:
  explicit AdamWBatch(cudaStream_t stream) : stream_(stream) {}

  /// Checks one cleave.adamw op and defers it (after running the deferred
  /// ones first when it cannot join them).
  Status add(const Attributes &attributes, const std::vector<TensorRef> &inputs,
             const std::vector<TensorRef> &outputs) {
    static const std::string op = "adamw";
    CLEAVE_CHECK(checkKernelOperands(op, inputs, outputs));
    const TensorRef &step = inputs[1];
    TensorRef sumSquares = inputs.size() > 2 ? inputs[2] : TensorRef();
    AdamWTensors t{inputs[0], outputs[0], outputs[1], outputs[2]};
    CLEAVE_CHECK(checkAdamW(attributes, step, sumSquares, t));
    if (!params_.empty() &&
        (step.data != step_.data || sumSquares.data != sumSquares_.data ||
         !sameAttributes(attributes, attributes_) ||
         conflicts(t, step, sumSquares)))
      CLEAVE_CHECK(flush());
    if (params_.empty()) {
      attributes_ = attributes;
      step_ = step;
      sumSquares_ = sumSquares;
      reads_.add(step.data, step.sizeBytes());
      reads_.add(sumSquares.data, sumSquares.sizeBytes());
    }
    reads_.add(t.grad.data, t.grad.sizeBytes());
    for (const TensorRef *w : {&t.param, &t.expAvg, &t.expAvgSq})
      writes_.add(w->data, w->sizeBytes());
    params_.push_back(std::move(t));
    return params_.size() >= kMostParams ? flush() : Status::ok();
  }

  /// Enqueues the deferred ops.
  Status flush() {
    if (params_.empty())
      return Status::ok();
    std::vector<AdamWTensors> params;
    params.swap(params_);
    reads_.clear();
    writes_.clear();
    return adamwMultiTensor(attributes_, step_, sumSquares_, params, stream_);
  }

private:
  /// One launch's worth (optimizer.cu's table).
  static constexpr size_t kMostParams = 512;

  /// Whether op `t` depends on a deferred op or one depends on it.
  bool conflicts(const AdamWTensors &t, const TensorRef &step,
                 const TensorRef &sumSquares) const {
    for (const TensorRef *r : {&t.grad, &step, &sumSquares})
      if (writes_.overlaps(r->data, r->sizeBytes()))
        return true;
    for (const TensorRef *w : {&t.param, &t.expAvg, &t.expAvgSq})
      if (writes_.overlaps(w->data, w->sizeBytes()) ||
          reads_.overlaps(w->data, w->sizeBytes()))
        return true;
    return false;
  }

  cudaStream_t stream_;
  Attributes attributes_;
  TensorRef step_, sumSquares_;
  std::vector<AdamWTensors> params_;
  ByteRanges reads_, writes_; // the deferred ops' operands and results
};

/// NcclCommunication that first enqueues the deferred adamw ops and makes
/// the compute stream wait for the copies in flight (see the ordering rule
/// above).
class FlushingCommunication final : public DeviceCommunication {
public:
  FlushingCommunication(DeviceCommunication &inner,
                        std::function<Status()> flush)
      : inner_(inner), flush_(std::move(flush)) {}

  Status createGroups(Communicator &world,
                      const std::vector<std::vector<int>> &groups,
                      const std::vector<std::string> &names) override {
    CLEAVE_CHECK(flush_());
    return inner_.createGroups(world, groups, names);
  }
  Status allReduce(int group, Reduce op, const TensorRef &in,
                   const TensorRef &out) override {
    CLEAVE_CHECK(flush_());
    return inner_.allReduce(group, op, in, out);
  }
  Status allGather(int group, const TensorRef &in,
                   const TensorRef &out) override {
    CLEAVE_CHECK(flush_());
    return inner_.allGather(group, in, out);
  }
  Status reduceScatter(int group, Reduce op, const TensorRef &in,
                       const TensorRef &out) override {
    CLEAVE_CHECK(flush_());
    return inner_.reduceScatter(group, op, in, out);
  }
  Status broadcast(int group, int root, const TensorRef &in,
                   const TensorRef &out) override {
    CLEAVE_CHECK(flush_());
    return inner_.broadcast(group, root, in, out);
  }
  Status startSend(int peer, int tag, const TensorRef &t) override {
    CLEAVE_CHECK(flush_());
    return inner_.startSend(peer, tag, t);
  }
  Status recv(int peer, int tag, const TensorRef &t) override {
    CLEAVE_CHECK(flush_());
    return inner_.recv(peer, tag, t);
  }
  /// No flush: called before every op (see the ordering rule above).
  Status finishSendsOverlapping(const void *data, size_t size) override {
    return inner_.finishSendsOverlapping(data, size);
  }
  Status finishSends() override {
    CLEAVE_CHECK(flush_());
    return inner_.finishSends();
  }
  Status startAllReduce(int group, Reduce op, const TensorRef &t,
                        int event) override {
    CLEAVE_CHECK(flush_());
    return inner_.startAllReduce(group, op, t, event);
  }
  Status startReduceScatter(int group, Reduce op, const TensorRef &in,
                            const TensorRef &out, int event) override {
    CLEAVE_CHECK(flush_());
    return inner_.startReduceScatter(group, op, in, out, event);
  }
  Status startAllGather(int group, const TensorRef &in, const TensorRef &out,
                        int event) override {
    CLEAVE_CHECK(flush_());
    return inner_.startAllGather(group, in, out, event);
  }
  Status finishCollective(int event) override {
    CLEAVE_CHECK(flush_());
    return inner_.finishCollective(event);
  }
  Status finishCollectives() override {
    CLEAVE_CHECK(flush_());
    return inner_.finishCollectives();
  }

private:
  DeviceCommunication &inner_;
  std::function<Status()> flush_;
};

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
    communication_.reset();
    nccl_.reset();
    if (device_ >= 0)
      (void)cudaSetDevice(device_);
    context_.reset();
    for (auto &[base, allocation] : allocations_)
      (void)cudaFree(allocation);
    if (flag_)
      (void)cudaFree(flag_);
    for (cudaEvent_t e : {computeDone_, copyDone_})
      if (e)
        (void)cudaEventDestroy(e);
    for (cudaEvent_t e : copyEvents_)
      (void)cudaEventDestroy(e);
    for (cudaStream_t s : {compute_, copy_})
      if (s)
        (void)cudaStreamDestroy(s);
  }

  Status start(int localRank, int ranksOnNode) {
    CLEAVE_CHECK(selectCudaDevice(localRank, device_));
    cudaDeviceProp prop;
    CLEAVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    deviceName_ = prop.name;
    CLEAVE_CUDA_CHECK(
        cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CLEAVE_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    CLEAVE_CUDA_CHECK(
        cudaEventCreateWithFlags(&computeDone_, cudaEventDisableTiming));
    CLEAVE_CUDA_CHECK(
        cudaEventCreateWithFlags(&copyDone_, cudaEventDisableTiming));
    CLEAVE_CUDA_CHECK(cudaMalloc(&flag_, sizeof(unsigned)));
    CLEAVE_CHECK(CudaContext::create(context_));
    adamw_ = std::make_unique<AdamWBatch>(compute_);
    // One GPU per rank: NCCL. Ranks sharing a GPU: MPI on host copies
    // (NCCL refuses two ranks on one device).
    if (ranksOnNode > 1 && cudaDeviceCount() >= ranksOnNode) {
      nccl_ = std::make_unique<NcclCommunication>(compute_);
      communication_ = std::make_unique<FlushingCommunication>(
          *nccl_, [this] {
            CLEAVE_CHECK(flush());
            return awaitCopies(pending_.all());
          });
    }
    return Status::ok();
  }

  const char *name() const override { return "cuda"; }
  bool hostMemory() const override { return false; }
  bool kernelsUseHostCores() const override { return false; }
  uint64_t availableBytes() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return free;
  }
  std::string memoryName() const override {
    return "GPU " + std::to_string(device_) + " (" + deviceName_ + ")";
  }

  Status allocate(uint64_t bytes, uint64_t alignment, void *&base) override {
    CLEAVE_CHECK(flush());
    // cudaMalloc aligns to 256 bytes; a larger alignment is made by hand.
    uint64_t extra = alignment > 256 ? alignment : 0;
    uint64_t size = std::max<uint64_t>(bytes, 64) + extra;
    void *allocation = nullptr;
    CLEAVE_CUDA_CHECK(cudaMalloc(&allocation, size));
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(allocation, 0, size, compute_));
    uintptr_t p = reinterpret_cast<uintptr_t>(allocation);
    p = (p + alignment - 1) & ~uintptr_t(alignment - 1);
    base = reinterpret_cast<void *>(p);
    allocations_[base] = allocation;
    return Status::ok();
  }
  void release(void *base) override {
    auto it = allocations_.find(base);
    if (it == allocations_.end())
      return;
    // A deferred op or a copy may still use it; an error would show again
    // at the next synchronize.
    (void)flush();
    (void)awaitCopies(pending_.all());
    (void)cudaFree(it->second);
    allocations_.erase(it);
  }

  Status upload(void *to, const void *from, size_t bytes) override {
    // From pageable memory the call returns once `from` has been read.
    return copyOnCopyStream(to, from, bytes, cudaMemcpyHostToDevice);
  }
  Status download(void *to, const void *from, size_t bytes) override {
    CLEAVE_CHECK(flush());
    if (!bytes)
      return Status::ok();
    CLEAVE_CHECK(copyAfterCompute());
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, copy_));
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(copy_));
    return copiesDone();
  }
  /// Page-locked, so that offload and fetch run asynchronously.
  Status allocateHost(uint64_t bytes, uint64_t alignment,
                      void *&base) override {
    uint64_t size = std::max<uint64_t>(bytes, 64) + alignment;
    void *allocation = nullptr;
    CLEAVE_CUDA_CHECK(cudaHostAlloc(&allocation, size, cudaHostAllocDefault));
    std::memset(allocation, 0, size);
    uintptr_t p = reinterpret_cast<uintptr_t>(allocation);
    p = (p + alignment - 1) & ~uintptr_t(alignment - 1);
    base = reinterpret_cast<void *>(p);
    hostAllocations_[base] = allocation;
    return Status::ok();
  }
  void releaseHost(void *base) override {
    auto it = hostAllocations_.find(base);
    if (it == hostAllocations_.end())
      return;
    (void)synchronize(); // a copy may still read or write it
    (void)cudaFreeHost(it->second);
    hostAllocations_.erase(it);
  }
  /// An activation to the host on the copy stream, after the compute that
  /// made it; unlike download, the host thread goes on at once. The first
  /// kernel that writes over its device bytes waits for the copy.
  Status offload(void *to, const void *from, size_t bytes) override {
    return copyInFlight(to, from, bytes, cudaMemcpyDeviceToHost,
                        {from, bytes}, PendingCopies::Access::Reads);
  }
  /// Back to the device on the copy stream, from page-locked memory; the
  /// first kernel that touches `to` waits for it.
  Status fetch(void *to, const void *from, size_t bytes) override {
    return copyInFlight(to, from, bytes, cudaMemcpyHostToDevice,
                        {to, bytes}, PendingCopies::Access::Writes);
  }
  Status zero(void *to, size_t bytes) override {
    CLEAVE_CHECK(flush());
    CLEAVE_CHECK(awaitCopies(pending_.due({}, {{to, bytes}})));
    if (bytes)
      CLEAVE_CUDA_CHECK(cudaMemsetAsync(to, 0, bytes, compute_));
    return Status::ok();
  }
  Status copy(void *to, const void *from, size_t bytes) override {
    CLEAVE_CHECK(flush());
    CLEAVE_CHECK(awaitCopies(pending_.due({{from, bytes}}, {{to, bytes}})));
    if (bytes && to != from)
      CLEAVE_CUDA_CHECK(
          cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, compute_));
    return Status::ok();
  }
  Status runKernel(const std::string &op, const Attributes &attributes,
                   const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs) override {
    // Enqueued before the op, deferred or not, so the op runs after it.
    CLEAVE_CHECK(awaitCopies(pending_.due(spans(inputs), spans(outputs))));
    if (op == "adamw")
      return adamw_->add(attributes, inputs, outputs);
    CLEAVE_CHECK(flush());
    return runCudaKernel(op, attributes, inputs, outputs, compute_,
                         context_.get());
  }

  Status anyNonFinite(const std::vector<TensorRef> &tensors,
                      bool &found) override {
    CLEAVE_CHECK(flush());
    CLEAVE_CHECK(awaitCopies(pending_.due(spans(tensors), {})));
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(flag_, 0, sizeof(unsigned), compute_));
    for (const TensorRef &t : tensors)
      CLEAVE_CHECK(cuda::countNonFinite(t, flag_, compute_));
    unsigned flag = 0;
    CLEAVE_CHECK(download(&flag, flag_, sizeof flag));
    found = flag != 0;
    return Status::ok();
  }
  Status scale(const std::vector<TensorRef> &tensors, float factor) override {
    CLEAVE_CHECK(flush());
    CLEAVE_CHECK(awaitCopies(pending_.due({}, spans(tensors))));
    for (const TensorRef &t : tensors)
      CLEAVE_CHECK(cuda::scaleInPlace(t, factor, compute_));
    return Status::ok();
  }
  Status synchronize() override {
    CLEAVE_CHECK(flush());
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(copy_));
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(compute_));
    return copiesDone();
  }

  DeviceCommunication *deviceCommunication() override {
    return communication_.get();
  }

private:
  /// Enqueues the deferred adamw ops.
  Status flush() { return adamw_ ? adamw_->flush() : Status::ok(); }
  Status copyAfterCompute() {
    CLEAVE_CUDA_CHECK(cudaEventRecord(computeDone_, compute_));
    CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(copy_, computeDone_, 0));
    return Status::ok();
  }
  Status computeAfterCopy() {
    CLEAVE_CUDA_CHECK(cudaEventRecord(copyDone_, copy_));
    CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, copyDone_, 0));
    return Status::ok();
  }
  /// A copy on the copy stream between the compute before it and the
  /// compute after it (upload, offload, fetch).
  Status copyOnCopyStream(void *to, const void *from, size_t bytes,
                          cudaMemcpyKind kind) {
    CLEAVE_CHECK(flush());
    if (!bytes)
      return Status::ok();
    CLEAVE_CHECK(copyAfterCompute());
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, copy_));
    CLEAVE_CHECK(computeAfterCopy());
    return copiesDone(); // the compute stream now waits for all of them
  }
  /// An offload or fetch: on the copy stream after the compute so far, with
  /// an event the compute stream waits for only where it touches `device`.
  Status copyInFlight(void *to, const void *from, size_t bytes,
                      cudaMemcpyKind kind, ByteSpan device,
                      PendingCopies::Access access) {
    CLEAVE_CHECK(flush());
    if (!bytes)
      return Status::ok();
    CLEAVE_CHECK(copyAfterCompute());
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, copy_));
    int token;
    if (!freeTokens_.empty()) {
      token = freeTokens_.back();
      freeTokens_.pop_back();
    } else {
      cudaEvent_t event;
      CLEAVE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      token = static_cast<int>(copyEvents_.size());
      copyEvents_.push_back(event);
    }
    CLEAVE_CUDA_CHECK(cudaEventRecord(copyEvents_[token], copy_));
    pending_.add(device, access, token);
    return Status::ok();
  }
  /// Makes the compute stream wait for these copies. A wait uses the
  /// event's record at the time of the call, so the event may be recorded
  /// again by the next copy.
  Status awaitCopies(const std::vector<int> &tokens) {
    for (int token : tokens) {
      freeTokens_.push_back(token);
      CLEAVE_CUDA_CHECK(cudaStreamWaitEvent(compute_, copyEvents_[token], 0));
    }
    return Status::ok();
  }
  /// The copies in flight are done, or the compute stream already waits
  /// for all of them.
  Status copiesDone() {
    for (int token : pending_.all())
      freeTokens_.push_back(token);
    return Status::ok();
  }
  static std::vector<ByteSpan> spans(const std::vector<TensorRef> &tensors) {
    std::vector<ByteSpan> result;
    for (const TensorRef &t : tensors)
      result.push_back({t.data, t.sizeBytes()});
    return result;
  }

  int device_ = -1;
  std::string deviceName_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t computeDone_ = nullptr, copyDone_ = nullptr;
  PendingCopies pending_;             // offloads and fetches in flight
  std::vector<cudaEvent_t> copyEvents_; // by token
  std::vector<int> freeTokens_;
  std::map<void *, void *> hostAllocations_; // aligned base -> cudaHostAlloc
  unsigned *flag_ = nullptr;
  std::map<void *, void *> allocations_; // aligned base -> allocation
  std::unique_ptr<CudaContext> context_;
  std::unique_ptr<AdamWBatch> adamw_; // the deferred adamw ops
  std::unique_ptr<NcclCommunication> nccl_;
  std::unique_ptr<FlushingCommunication> communication_; // nccl_, in order
};

} // namespace

Status cleave::runtime::cudaDeviceNames(std::vector<std::string> &names) {
  names.clear();
  int count = 0;
  cudaError_t result = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (result == cudaErrorNoDevice)
    return Status::ok();
  if (result != cudaSuccess)
    return Status::error(std::string(cudaGetErrorName(result)) + ": " +
                         cudaGetErrorString(result));
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    CLEAVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    names.push_back(prop.name);
  }
  return Status::ok();
}

Status cleave::runtime::makeCudaBackend(int localRank, int ranksOnNode,
                                        std::unique_ptr<Backend> &backend) {
  auto cuda = std::make_unique<CudaBackend>();
  Status status = cuda->start(localRank, ranksOnNode);
  if (!status)
    return Status::error("device 'cuda': " + status.message() +
                         " (run with --device cpu where there is no GPU)");
  backend = std::move(cuda);
  return Status::ok();
}
