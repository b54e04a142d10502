//===- AttentionMask.h - the attention mask on the device ------*- C++ -*-===//
//
// What the CUDA attention kernels (attention.cu, attention_grad.cu) share
// about the optional mask broadcast to [B, H, Tq, Tk]: its element types
// (a bool mask keeps true entries, a float mask of f32, bf16, f16 or f64 is
// added to the scores) and the dispatch over them. CUDA sources only.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_CUDA_ATTENTIONMASK_H
#define CLEAVE_RUNTIME_CUDA_ATTENTIONMASK_H

#include "runtime/cuda/CudaKernels.h"

#include <cstdint>
#include <type_traits>

namespace cleave::runtime::cuda {

/// A bool mask's storage.
struct MaskBool {
  uint8_t v;
};

__device__ __forceinline__ float maskValue(double v) { return float(v); }
__device__ __forceinline__ float maskValue(float v) { return v; }
__device__ __forceinline__ float maskValue(__half v) { return toFloat(v); }
__device__ __forceinline__ float maskValue(__nv_bfloat16 v) {
  return toFloat(v);
}

/// The score after the mask element at `at`: -inf where a bool mask is
/// false, else the float mask added.
template <typename M>
__device__ __forceinline__ float applyMask(const M *mask, int64_t at,
                                           float score) {
  if constexpr (std::is_same_v<M, MaskBool>)
    return mask[at].v ? score : -INFINITY;
  else
    return score + maskValue(mask[at]);
}

/// Calls f(ops::Tag<M>{}) for the device type of a mask of element type
/// `dtype` (checkAttention has accepted it); float when there is no mask.
template <typename F> Status visitDeviceMask(const TensorRef *mask, F &&f) {
  switch (mask ? mask->dtype : DType::F32) {
  case DType::Bool:
    return f(ops::Tag<MaskBool>{});
  case DType::F64:
    return f(ops::Tag<double>{});
  case DType::F16:
    return f(ops::Tag<__half>{});
  case DType::BF16:
    return f(ops::Tag<__nv_bfloat16>{});
  default:
    return f(ops::Tag<float>{});
  }
}

} // namespace cleave::runtime::cuda

#endif // CLEAVE_RUNTIME_CUDA_ATTENTIONMASK_H
