//===- attention.cu - CUDA kernel of fused attention (forward) ------------===//
//
// The CUDA side of cpu::attentionKernel (runtime/cpu/attention.cpp) for
// f32, bf16 and f16 with f32 accumulation: softmax(q k^T * scale [+ mask]) v
// for q [B, H, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv], query head h
// reading key/value head h / (H / Hkv). With `causal`, key j > i is masked
// (top-left aligned, as the op defines). An optional mask broadcast to
// [B, H, Tq, Tk] is read in place: a bool mask keeps true entries, a float
// mask (f32, bf16, f16 or f64) is added. A row with every key masked gives
// NaN, as on the CPU.
//
// Flash-style, one pass over the keys with an online softmax, no [Tq, Tk]
// tensor: a block of kWarps warps owns kBlockRows query rows of one (batch,
// head), kRowsPerWarp per warp. The block stages kKeyTile keys and their
// values at a time in shared memory as float (the keys padded to D + 1 so
// that lane j reading key j is free of bank conflicts); lane j scores key j
// against each of its warp's rows (the pre-scaled query rows are in shared
// memory too), the warp reduces the tile's max and sum with shuffles and
// rescales its running state, and each lane accumulates value columns
// lane, lane + 32, ... of every row. Causal blocks stop at their last row's
// key. D and Dv are at most 256. The operand checks are the CPU kernel's
// (checkAttention, runtime/ops/AttentionShape.h); the mask's types are in
// AttentionMask.h. The gradient is in attention_grad.cu.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/AttentionShape.h"
#include "runtime/cuda/AttentionMask.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cmath>
#include <cstdint>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::AttentionShape;
using ops::KernelArgs;

namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kBlockRows = kWarps * kRowsPerWarp;
constexpr int kKeyTile = 32; // one key per lane
constexpr int64_t kMaxHeadDim = 256;

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// One block: query rows [i0, i0 + kBlockRows) of one (batch, head). VPL:
/// value columns per lane (Dv <= 32 VPL). M: the mask's element type
/// (ignored when `mask` is null).
template <typename T, typename M, int VPL>
__global__ void __launch_bounds__(kWarps * 32)
    attend(const T *__restrict__ q, const T *__restrict__ k,
           const T *__restrict__ v, const M *__restrict__ mask,
           T *__restrict__ out, AttentionShape s, float scale, bool causal) {
  extern __shared__ float shared[];
  const int64_t d = s.d, dv = s.dv, kld = d + 1;
  float *ks = shared;              // [kKeyTile, D + 1]
  float *vs = ks + kKeyTile * kld; // [kKeyTile, Dv]
  float *qs = vs + kKeyTile * dv;  // [kBlockRows, D]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  const int64_t blocksPerHead = (s.tq + kBlockRows - 1) / kBlockRows;
  const int64_t item = blockIdx.x;
  const int64_t bh = item / blocksPerHead;
  const int64_t i0 = (item % blocksPerHead) * kBlockRows;
  const int64_t b = bh / s.h, h = bh % s.h, hk = h / (s.h / s.hkv);
  const T *qh = q + bh * s.tq * d;
  const T *kh = k + (b * s.hkv + hk) * s.tk * d;
  const T *vh = v + (b * s.hkv + hk) * s.tk * dv;
  const int64_t rows = min(int64_t(kBlockRows), s.tq - i0);

  // The block's query rows, scaled (rows past the end are never used).
  for (int64_t e = threadIdx.x; e < rows * d; e += blockDim.x)
    qs[e] = toFloat(qh[i0 * d + e]) * scale;

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][VPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < VPL; ++c)
      acc[r][c] = 0.0f;
  }

  const int64_t keyEnd = causal ? min(s.tk, i0 + rows) : s.tk;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyTile) {
    const int64_t keys = min(int64_t(kKeyTile), s.tk - j0);
    __syncthreads(); // the previous tile is no longer read
    for (int64_t e = threadIdx.x; e < keys * d; e += blockDim.x) {
      int64_t jj = e / d, p = e - jj * d;
      ks[jj * kld + p] = toFloat(kh[j0 * d + e]);
    }
    for (int64_t e = threadIdx.x; e < keys * dv; e += blockDim.x)
      vs[e] = toFloat(vh[j0 * dv + e]);
    __syncthreads();

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      if (row >= rows) // uniform over the warp
        continue;
      const int64_t i = i0 + row;
      const int64_t key = j0 + lane;
      float score = -INFINITY;
      if (lane < keys && !(causal && key > i)) {
        const float *qr = qs + row * d;
        const float *kr = ks + lane * kld;
        float dot = 0.0f;
        for (int64_t p = 0; p < d; ++p)
          dot = fmaf(qr[p], kr[p], dot);
        score = dot;
        if (mask)
          score = applyMask(mask, b * s.mb + h * s.mh + i * s.mi + key * s.mj,
                            score);
      }
      const float tileMax = warpMax(score);
      const float mNew = fmaxf(m[r], tileMax);
      if (mNew == -INFINITY) // every key so far masked: nothing to add
        continue;
      const float p = expf(score - mNew);
      const float correction = expf(m[r] - mNew);
      m[r] = mNew;
      l[r] = l[r] * correction + warpSum(p);
#pragma unroll
      for (int c = 0; c < VPL; ++c)
        acc[r][c] *= correction;
      for (int jj = 0; jj < keys; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
        const float *vr = vs + jj * dv;
#pragma unroll
        for (int c = 0; c < VPL; ++c) {
          const int64_t col = lane + 32 * c;
          if (col < dv)
            acc[r][c] = fmaf(pj, vr[col], acc[r][c]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = warp * kRowsPerWarp + r;
    if (row >= rows)
      continue;
    // Every key masked: NaN, as softmax over -inf gives.
    const float inv = m[r] == -INFINITY ? NAN : 1.0f / l[r];
    T *o = out + (bh * s.tq + i0 + row) * dv;
#pragma unroll
    for (int c = 0; c < VPL; ++c) {
      const int64_t col = lane + 32 * c;
      if (col < dv)
        o[col] = fromFloat<T>(acc[r][c] * inv);
    }
  }
}

template <typename T, typename M, int VPL>
Status launchAttention(const KernelArgs &a, const AttentionShape &s,
                       const void *mask, float scale, bool causal,
                       cudaStream_t stream) {
  size_t bytes =
      size_t(kKeyTile * (s.d + 1) + kKeyTile * s.dv + kBlockRows * s.d) *
      sizeof(float);
  auto kernel = attend<T, M, VPL>;
  if (bytes > 48 * 1024)
    CLEAVE_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  int64_t blocks = s.b * s.h * ((s.tq + kBlockRows - 1) / kBlockRows);
  if (blocks > INT32_MAX)
    return a.error("more than 2^31 - 1 blocks of query rows");
  kernel<<<unsigned(blocks), kWarps * 32, bytes, stream>>>(
      a.in(0).as<T>(), a.in(1).as<T>(), a.in(2).as<T>(),
      static_cast<const M *>(mask), a.out().as<T>(), s, scale, causal);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

template <typename T, typename M>
Status attentionTyped(const KernelArgs &a, const AttentionShape &s,
                      const void *mask, float scale, bool causal,
                      cudaStream_t stream) {
  if (s.dv <= 64)
    return launchAttention<T, M, 2>(a, s, mask, scale, causal, stream);
  if (s.dv <= 128)
    return launchAttention<T, M, 4>(a, s, mask, scale, causal, stream);
  return launchAttention<T, M, 8>(a, s, mask, scale, causal, stream);
}

} // namespace

namespace cleave::runtime::cuda {

Status attentionKernel(const KernelArgs &a, cudaStream_t stream) {
  AttentionShape s;
  double scale;
  int64_t causal;
  const TensorRef *maskRef;
  CLEAVE_CHECK(ops::checkAttention(a, 0, s, scale, causal, maskRef));
  const TensorRef &q = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), q.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), {s.b, s.h, s.tq, s.dv}, "the result"));
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return a.error("the CUDA attention kernel takes head dimensions up to " +
                   std::to_string(kMaxHeadDim) + ", got " +
                   std::to_string(s.d) + " (q, k) and " + std::to_string(s.dv) +
                   " (v)");
  const void *mask = maskRef ? maskRef->data : nullptr;
  return visitDeviceFloat(
      a, q.dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if (a.out().numElements() == 0)
          return Status::ok();
        return visitDeviceMask(maskRef, [&](auto maskTag) -> Status {
          using M = typename decltype(maskTag)::type;
          return attentionTyped<T, M>(a, s, mask, float(scale), causal != 0,
                                      stream);
        });
      },
      "q");
}

} // namespace cleave::runtime::cuda
