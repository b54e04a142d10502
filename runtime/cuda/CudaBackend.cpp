//===- CudaBackend.cpp - device memory, streams and kernels for the executor ===//
//
// Three kinds of work, each on its own stream and ordered by events:
//  - kernels, zeroing and device-to-device copies on the compute stream;
//  - host copies (upload, download) on the copy stream, which first waits
//    for the compute stream's work so far, and which the compute stream
//    waits for before its next work;
//  - communication (NcclCommunication) on its streams.
// A download returns when its bytes are on the host; nothing else waits
// for the device except synchronize().
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/NcclCommunication.h"

#include <map>

using namespace cleave::runtime;

namespace {

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
    nccl_.reset();
    if (device_ >= 0)
      (void)cudaSetDevice(device_);
    for (auto &[base, allocation] : allocations_)
      (void)cudaFree(allocation);
    if (flag_)
      (void)cudaFree(flag_);
    for (cudaEvent_t e : {computeDone_, copyDone_})
      if (e)
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
    // One GPU per rank: NCCL. Ranks sharing a GPU: MPI on host copies
    // (NCCL refuses two ranks on one device).
    if (ranksOnNode > 1 && cudaDeviceCount() >= ranksOnNode)
      nccl_ = std::make_unique<NcclCommunication>(compute_);
    return Status::ok();
  }

  const char *name() const override { return "cuda"; }
  bool hostMemory() const override { return false; }
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
    (void)cudaFree(it->second);
    allocations_.erase(it);
  }

  Status upload(void *to, const void *from, size_t bytes) override {
    if (!bytes)
      return Status::ok();
    CLEAVE_CHECK(copyAfterCompute());
    // From pageable memory the call returns once `from` has been read.
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, copy_));
    return computeAfterCopy();
  }
  Status download(void *to, const void *from, size_t bytes) override {
    if (!bytes)
      return Status::ok();
    CLEAVE_CHECK(copyAfterCompute());
    CLEAVE_CUDA_CHECK(
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, copy_));
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(copy_));
    return Status::ok();
  }
  Status zero(void *to, size_t bytes) override {
    if (bytes)
      CLEAVE_CUDA_CHECK(cudaMemsetAsync(to, 0, bytes, compute_));
    return Status::ok();
  }
  Status copy(void *to, const void *from, size_t bytes) override {
    if (bytes && to != from)
      CLEAVE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes,
                                        cudaMemcpyDeviceToDevice, compute_));
    return Status::ok();
  }
  Status runKernel(const std::string &op, const Attributes &attributes,
                   const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs) override {
    return runCudaKernel(op, attributes, inputs, outputs, compute_);
  }

  Status anyNonFinite(const std::vector<TensorRef> &tensors,
                      bool &found) override {
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(flag_, 0, sizeof(unsigned), compute_));
    for (const TensorRef &t : tensors)
      CLEAVE_CHECK(cuda::countNonFinite(t, flag_, compute_));
    unsigned flag = 0;
    CLEAVE_CHECK(download(&flag, flag_, sizeof flag));
    found = flag != 0;
    return Status::ok();
  }
  Status scale(const std::vector<TensorRef> &tensors, float factor) override {
    for (const TensorRef &t : tensors)
      CLEAVE_CHECK(cuda::scaleInPlace(t, factor, compute_));
    return Status::ok();
  }
  Status synchronize() override {
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(copy_));
    CLEAVE_CUDA_CHECK(cudaStreamSynchronize(compute_));
    return Status::ok();
  }

  DeviceCommunication *deviceCommunication() override { return nccl_.get(); }

private:
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

  int device_ = -1;
  std::string deviceName_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t computeDone_ = nullptr, copyDone_ = nullptr;
  unsigned *flag_ = nullptr;
  std::map<void *, void *> allocations_; // aligned base -> allocation
  std::unique_ptr<NcclCommunication> nccl_;
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
