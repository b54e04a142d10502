//===- CudaKernels.h - the CUDA backend's kernel entry point ---*- C++ -*-===//
//
// The CUDA counterpart of runtime/cpu/Kernels.h: the same op names,
// attributes, operands and results, with TensorRef data pointers that are
// device pointers and every kernel enqueued on the caller's stream (nothing
// here synchronizes). Ops without a CUDA kernel yet are an error naming the
// op and listing the ones there are. No global state: the caller owns the
// stream, picks the device (selectCudaDevice) and may own a CudaContext,
// which keeps matmul's cuBLASLt handle, workspace and plans between calls.
//
// The second half of this header is not API: it declares what the kernel
// files (elementwise.cu, movement.cu, reductions.cu, softmax.cu, norms.cu,
// optimizer.cu, matmul.cpp, lookup.cu, losses.cu, attention.cu,
// attention_grad.cu, rotary.cu) share with each other, with Device.cpp's
// dispatch table and with the CUDA backend (CudaBackend.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CUDA_CUDAKERNELS_H
#define CLEAVE_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/ops/OpTable.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

namespace cleave::runtime {

/// The number of CUDA devices; 0 when there is no device or no driver
/// (never an error).
int cudaDeviceCount();

/// Makes device `localRank % count` current on the calling thread and
/// returns it in `device`. An error when there is no device or driver, or
/// `localRank` is negative. (Reading the local rank, e.g. from
/// OMPI_COMM_WORLD_LOCAL_RANK, is the caller's business.)
Status selectCudaDevice(int localRank, int &device);

class CudaContext;

/// Enqueues dialect op `op` on `stream` (the current device's). Inputs and
/// outputs are views of device memory; an absent optional operand has null
/// data. Returns an error naming the op for an op or element type without a
/// CUDA kernel, operands that do not fit the op, or a failed CUDA call.
/// With a `context` (made on this device, used on this stream only), matmul
/// reuses its cuBLASLt handle, workspace and plans; without one it makes and
/// destroys them per call. The results are the same either way.
Status runCudaKernel(const std::string &op, const Attributes &attributes,
                     const std::vector<TensorRef> &inputs,
                     const std::vector<TensorRef> &outputs, cudaStream_t stream,
                     CudaContext *context = nullptr);

/// What kernels keep between calls, owned by their caller (the CUDA backend
/// makes one for its compute stream): a cuBLASLt handle, one workspace, and
/// matmul plans (the descriptors and the algorithm cuBLASLt's heuristic
/// chose) by problem: element type, transposes, rows, columns, leading
/// dimensions, batch count and strides, and the alignment of the operands'
/// pointers. The context belongs to the device current when it was made;
/// the kernels that use it must be ordered on one stream (they share the
/// workspace). Not thread-safe. Defined in matmul.cpp.
class CudaContext {
public:
  /// Makes one on the current device: an error when cuBLASLt cannot start.
  /// Without memory for the workspace, cuBLASLt picks among the algorithms
  /// that need none (as matmul without a context does).
  static Status create(std::unique_ptr<CudaContext> &context);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  /// The matmul plans made, and the matmul calls that reused one.
  int64_t matmulPlansMade() const;
  int64_t matmulPlansReused() const;

  struct Matmul; // matmul.cpp's handle, workspace and plans
  Matmul &matmul() { return *matmul_; }

private:
  CudaContext();
  std::unique_ptr<Matmul> matmul_;
};

/// The ops runCudaKernel implements, sorted.
const std::vector<std::string> &cudaKernelOps();

/// One parameter of an AdamW step: the operand and results of its
/// cleave.adamw op, in device memory. param, expAvg and expAvgSq (f32) are
/// read and written; grad is f32, bf16 or f16 of the parameter's shape.
struct AdamWTensors {
  TensorRef grad;
  TensorRef param, expAvg, expAvgSq;
};

/// cleave.adamw on every parameter of `params` at once: one kernel launch
/// (per 512 parameters) instead of one per parameter. The parameters share
/// the op's attributes (lr, weight_decay, beta1, beta2, eps, max_norm,
/// warmup_steps, decay_steps, min_lr), the step (an i64 scalar on the
/// device) and sum_squares (an f32 scalar on the device; null data: no
/// clipping). Each element is updated exactly as runtime/cpu/optimizer.cpp
/// updates it. The schedule and the clipping coefficient are computed on the
/// device from step and sum_squares, so nothing waits for the host; a step
/// below 1 (an error on the CPU) leaves the parameters unchanged.
Status adamwMultiTensor(const Attributes &attributes, const TensorRef &step,
                        const TensorRef &sumSquares,
                        const std::vector<AdamWTensors> &params,
                        cudaStream_t stream);

/// adamwMultiTensor's checks of the attributes, step, sum_squares and one
/// parameter, enqueuing nothing: runCudaKernel's adamw errors, word for word
/// (the CUDA backend checks each adamw op when it defers it).
Status checkAdamW(const Attributes &attributes, const TensorRef &step,
                  const TensorRef &sumSquares, const AdamWTensors &param);

//===----------------------------------------------------------------------===//
// Not API: what the kernel files share
//===----------------------------------------------------------------------===//

namespace ops {
struct KernelArgs;
} // namespace ops

namespace cuda {

/// A kernel of the dispatch table: checks its operands (the dispatcher has
/// checked their counts) and enqueues its work on `stream`.
using KernelFn = Status (*)(const ops::KernelArgs &args, cudaStream_t stream);
/// A kernel that keeps state in a CudaContext: what runCudaKernel calls
/// when it is given one (the KernelFn of the same op otherwise).
using ContextKernelFn = Status (*)(const ops::KernelArgs &args,
                                   cudaStream_t stream, CudaContext &context);

// elementwise.cu
Status addKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status subKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status mulKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status divKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status powKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status maxKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status minKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status andKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status orKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status equalKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status lessKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status lessEqualKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status greaterKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status greaterEqualKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status selectKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status negKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status absKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status reluKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status notKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status expKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status logKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sqrtKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status rsqrtKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status reciprocalKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status tanhKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status erfKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sigmoidKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sinKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status cosKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status geluKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status dropoutKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status siluKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status geluGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status siluGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status castKernel(const ops::KernelArgs &a, cudaStream_t stream);
// movement.cu
Status reshapeKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status transposeKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status broadcastToKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sliceKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sliceGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status concatKernel(const ops::KernelArgs &a, cudaStream_t stream);
// reductions.cu
Status reduceSumKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status reduceMeanKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status reduceMaxKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status reduceMinKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status cumsumKernel(const ops::KernelArgs &a, cudaStream_t stream);
// softmax.cu
Status softmaxKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status logSoftmaxKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status softmaxGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status logSoftmaxGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
// norms.cu
Status layerNormKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status rmsNormKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status layerNormGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status rmsNormGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
// matmul.cpp
Status matmulKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status matmulKernelInContext(const ops::KernelArgs &a, cudaStream_t stream,
                             CudaContext &context);
// optimizer.cu
Status adamwKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sgdKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status accumulateGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status sumSquaresKernel(const ops::KernelArgs &a, cudaStream_t stream);
/// Loss scaling: sets *deviceFlag (device memory) to 1 when an element of
/// the f32 tensor is not finite; never clears it.
Status countNonFinite(const TensorRef &grad, unsigned *deviceFlag,
                      cudaStream_t stream);
/// Loss scaling: grad *= factor (f32).
Status scaleInPlace(const TensorRef &grad, float factor, cudaStream_t stream);
// indexing.cu
Status gatherElementsKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status gatherElementsGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status gatherNdKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status scatterNdKernel(const ops::KernelArgs &a, cudaStream_t stream);
// lookup.cu
Status embeddingKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status gatherKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status embeddingGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status gatherGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
// losses.cu
Status softmaxCrossEntropyKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status nllLossKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status softmaxCrossEntropyGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status softmaxCrossEntropyFusedKernel(const ops::KernelArgs &a, cudaStream_t stream);
Status nllLossGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
// attention.cu
Status attentionKernel(const ops::KernelArgs &a, cudaStream_t stream);
// attention_grad.cu
Status attentionGradKernel(const ops::KernelArgs &a, cudaStream_t stream);
// rotary.cu
Status rotaryKernel(const ops::KernelArgs &a, cudaStream_t stream);

/// Threads per block of the elementwise kernels, and the most blocks their
/// grid-stride loops are launched with.
constexpr int kBlockThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

inline unsigned blocksFor(int64_t n, int threads = kBlockThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

} // namespace cuda
} // namespace cleave::runtime

#ifdef __CUDACC__
// The calling convention and the checks every backend shares (KernelArgs,
// element types, shapes and broadcasting plans): runtime/ops/, not the CPU
// backend's folder.
#include "runtime/ops/KernelArgs.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cleave::runtime::cuda {

/// Calls f(ops::Tag<T>{}) for the device storage type of a float dtype
/// (float, __nv_bfloat16, __half); other types are an error naming `what`.
template <typename F>
Status visitDeviceFloat(const ops::KernelArgs &a, DType dtype, F &&f,
                        const char *what = "x") {
  switch (dtype) {
  case DType::F32:
    return f(ops::Tag<float>{});
  case DType::BF16:
    return f(ops::Tag<__nv_bfloat16>{});
  case DType::F16:
    return f(ops::Tag<__half>{});
  default:
    return a.error(std::string("no CUDA kernel for element type ") +
                   dtypeName(dtype) + " (" + what +
                   "); the CUDA kernels take f32, bf16 and f16");
  }
}

/// 16-bit floats are computed in float and stored rounding to nearest even,
/// as the CPU backend's load/store do.
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return a + b;
  }
};
/// fmaxf: a NaN element is skipped, as the CPU's maxOf skips it (the NaN
/// then propagates through the exp that follows).
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return fmaxf(a, b);
  }
};

/// Reduces `v` over the block (blockDim.x a multiple of 32, at most 1024)
/// and returns the result to every thread. Every thread of the block must
/// call it; consecutive calls may reuse the shared memory (the second
/// barrier orders them).
template <typename Op>
__device__ float blockReduce(float v, Op op, float identity) {
  __shared__ float partial[32];
  __shared__ float result;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? partial[lane] : identity;
    for (int offset = 16; offset; offset >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    if (lane == 0)
      result = v;
  }
  __syncthreads();
  return result;
}

/// Threads for a block that walks rows of `n` elements: a multiple of 32,
/// from 32 to 1024.
inline int rowThreads(int64_t n, int most = 1024) {
  int64_t t = (n + 31) / 32 * 32;
  return int(t < 32 ? 32 : t > most ? most : t);
}

} // namespace cleave::runtime::cuda
#endif // __CUDACC__

#endif // CLEAVE_RUNTIME_CUDA_CUDAKERNELS_H
