//===- attention_grad.cu - CUDA kernel of the attention gradient ----------===//
//
// The CUDA side of cpu::attentionGradKernel (runtime/cpu/attention.cpp) for
// f32, bf16 and f16 with f32 accumulation: from dy, q, k, v [, mask] (the
// forward's operands, same scale and causal) it gives dq, dk and dv. Nothing
// is kept from the forward, so the probabilities are recomputed, flash
// attention style, and no [Tq, Tk] tensor exists. With P = softmax(S),
// S = scale q k^T [+ mask], and delta_i = rowsum(P_i * dP_i):
//   dP = dy v^T,  dS = P (dP - delta),  dq = scale dS k,
//   dk = scale dS^T q,  dv = P^T dy.
// Two kernels on the stream, no atomics (deterministic):
//
//  - queryGrad, one block per (batch, head, tile of query rows): a first
//    sweep over the keys computes the rows' max, sum of exponentials and
//    delta (sum of exp * dP, rescaled online as the max grows) and saves
//    max, 1 / sum and delta per row in a scratch buffer (stream-ordered
//    cudaMallocAsync); a second sweep computes dS and accumulates dq.
//  - keyGrad, one block per (batch, key/value head, tile of keys): it keeps
//    its keys' dk and dv in registers and walks every query tile of every
//    query head of its group (grouped-query attention sums them in a fixed
//    order), recomputing P from the saved row statistics.
//
// Tiles live in shared memory as float, rows padded to an odd length so that
// the 16 x 16 threads (rows ty + 16a, keys or columns tx + 16b) read them
// free of bank conflicts; rows past the end are zeros. With `causal` (key
// j > i masked, top-left aligned) neither kernel visits a tile that is
// wholly masked. A row with every key masked gives NaN in its dq row and in
// dk and dv at the keys it could see, as softmax over -inf gives NaN. Head
// dimensions D and Dv are at most 256, as for the forward.
//
// Products per (query row, key) pair visited: S three times (both sweeps,
// keyGrad), dP three times, dq, dk and dv once each: 2 (5 D + 4 Dv) flops,
// against the 2 (3 D + 2 Dv) of the five products the gradient needs.
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

constexpr int kThreads = 256; // 16 x 16
constexpr int64_t kMaxHeadDim = 256;

/// Tile sizes for head dimensions up to HD (64, 128 or 256): query rows
/// and keys of queryGrad's tiles, and of keyGrad's. Shared memory: about
/// 83 to 137 KiB a block.
template <int HD> struct Tiles;
template <> struct Tiles<64> {
  static constexpr int queryRows = 64, queryKeys = 64;
  static constexpr int keyRows = 64, keyKeys = 64;
};
template <> struct Tiles<128> {
  static constexpr int queryRows = 64, queryKeys = 32;
  static constexpr int keyRows = 32, keyKeys = 64;
};
template <> struct Tiles<256> {
  static constexpr int queryRows = 32, queryKeys = 32;
  static constexpr int keyRows = 32, keyKeys = 32;
};

/// Rows [0, n) of a row-major [*, width] tensor at `src` into `dst`
/// ([total, ld] floats), times `factor`; rows [n, total) become zeros, so
/// that a zero weight never meets stale shared memory (0 * NaN).
template <typename T>
__device__ void loadTile(float *dst, const T *src, int n, int total, int width,
                         int ld, float factor) {
  for (int e = threadIdx.x; e < total * width; e += blockDim.x) {
    int r = e / width, p = e - r * width;
    dst[r * ld + p] =
        r < n ? toFloat(src[int64_t(r) * width + p]) * factor : 0.0f;
  }
}

/// Max and sum over the 16 threads of a row (lanes 0-15 or 16-31).
__device__ __forceinline__ float maxOverRow(float v) {
  for (int offset = 8; offset; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float sumOverRow(float v) {
  for (int offset = 8; offset; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// The thread's elements (rows ty + 16a, keys tx + 16b) of a tile's scores
/// s = qs ks^T (over D; qs is pre-scaled) and of dp = dys vs^T (over Dv).
template <int RA, int CB>
__device__ __forceinline__ void
tileProducts(const float *qs, const float *dys, const float *ks,
             const float *vs, int d, int dv, int ldD, int ldV,
             float (&s)[RA][CB], float (&dp)[RA][CB]) {
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int a = 0; a < RA; ++a)
#pragma unroll
    for (int b = 0; b < CB; ++b)
      s[a][b] = dp[a][b] = 0.0f;
#pragma unroll 4
  for (int p = 0; p < d; ++p) {
    float x[RA], y[CB];
#pragma unroll
    for (int a = 0; a < RA; ++a)
      x[a] = qs[(ty + 16 * a) * ldD + p];
#pragma unroll
    for (int b = 0; b < CB; ++b)
      y[b] = ks[(tx + 16 * b) * ldD + p];
#pragma unroll
    for (int a = 0; a < RA; ++a)
#pragma unroll
      for (int b = 0; b < CB; ++b)
        s[a][b] = fmaf(x[a], y[b], s[a][b]);
  }
#pragma unroll 4
  for (int p = 0; p < dv; ++p) {
    float x[RA], y[CB];
#pragma unroll
    for (int a = 0; a < RA; ++a)
      x[a] = dys[(ty + 16 * a) * ldV + p];
#pragma unroll
    for (int b = 0; b < CB; ++b)
      y[b] = vs[(tx + 16 * b) * ldV + p];
#pragma unroll
    for (int a = 0; a < RA; ++a)
#pragma unroll
      for (int b = 0; b < CB; ++b)
        dp[a][b] = fmaf(x[a], y[b], dp[a][b]);
  }
}

/// Score (b, h, i, j) after the mask; -inf where the pair is not `valid`
/// (a row or key past the end, or a key after the row with `causal`).
template <typename M>
__device__ __forceinline__ float
maskedScore(float score, bool valid, const M *mask, const AttentionShape &s,
            int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!valid)
    return -INFINITY;
  if (mask)
    return applyMask(mask, b * s.mb + h * s.mh + i * s.mi + j * s.mj, score);
  return score;
}

/// dq of query rows [i0, i0 + BR) of one (batch, head), and the rows'
/// statistics for keyGrad: `rowMax` (NaN for a row with every key masked),
/// `rowInv` (1 / sum of exp(s - max)) and `delta` (rowsum(P dP)).
template <typename T, typename M, int BR, int BC, int HD>
__global__ void __launch_bounds__(kThreads)
    queryGrad(const T *__restrict__ dy, const T *__restrict__ q,
              const T *__restrict__ k, const T *__restrict__ v,
              const M *__restrict__ mask, T *__restrict__ dq,
              float *__restrict__ rowMax, float *__restrict__ rowInv,
              float *__restrict__ delta, AttentionShape s, float scale,
              bool causal) {
  constexpr int RA = BR / 16, CB = BC / 16, CE = HD / 16, ldP = BC + 1;
  extern __shared__ float shared[];
  const int d = int(s.d), dv = int(s.dv), ldD = d | 1, ldV = dv | 1;
  float *qs = shared;         // [BR, ldD]: q * scale
  float *dys = qs + BR * ldD; // [BR, ldV]
  float *ks = dys + BR * ldV; // [BC, ldD]
  float *vs = ks + BC * ldD;  // [BC, ldV]
  float *dss = vs + BC * ldV; // [BR, ldP]: dS
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  const int64_t tiles = (s.tq + BR - 1) / BR;
  const int64_t bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * BR;
  const int64_t b = bh / s.h, h = bh % s.h, hk = h / (s.h / s.hkv);
  const int rows = int(min(int64_t(BR), s.tq - i0));
  const T *kh = k + (b * s.hkv + hk) * s.tk * d;
  const T *vh = v + (b * s.hkv + hk) * s.tk * dv;
  loadTile(qs, q + (bh * s.tq + i0) * d, rows, BR, d, ldD, scale);
  loadTile(dys, dy + (bh * s.tq + i0) * dv, rows, BR, dv, ldV, 1.0f);
  const int64_t keyEnd = causal ? min(s.tk, i0 + rows) : s.tk;

  // Sweep 1: per row the max m, and the sums of e = exp(s - m) and of
  // e * dP, both rescaled whenever m grows (per thread; summed at the end).
  float m[RA], l[RA], ed[RA];
#pragma unroll
  for (int a = 0; a < RA; ++a) {
    m[a] = -INFINITY;
    l[a] = ed[a] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < keyEnd; j0 += BC) {
    const int keys = int(min(int64_t(BC), s.tk - j0));
    __syncthreads(); // the previous tile is no longer read
    loadTile(ks, kh + j0 * d, keys, BC, d, ldD, 1.0f);
    loadTile(vs, vh + j0 * dv, keys, BC, dv, ldV, 1.0f);
    __syncthreads();
    float sc[RA][CB], dp[RA][CB];
    tileProducts<RA, CB>(qs, dys, ks, vs, d, dv, ldD, ldV, sc, dp);
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      const int r = ty + 16 * a;
      const int64_t i = i0 + r;
      float tileMax = -INFINITY;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const int64_t j = j0 + tx + 16 * c;
        bool valid = r < rows && tx + 16 * c < keys && !(causal && j > i);
        sc[a][c] = maskedScore(sc[a][c], valid, mask, s, b, h, i, j);
        tileMax = fmaxf(tileMax, sc[a][c]);
      }
      const float mNew = fmaxf(m[a], maxOverRow(tileMax));
      if (mNew == -INFINITY) // every key so far masked: nothing to add
        continue;
      const float correction = expf(m[a] - mNew);
      l[a] *= correction;
      ed[a] *= correction;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const float e = expf(sc[a][c] - mNew);
        l[a] += e;
        ed[a] = fmaf(e, dp[a][c], ed[a]);
      }
      m[a] = mNew;
    }
  }
  float inv[RA], dlt[RA];
  bool dead[RA]; // every key masked: NaN, as the forward gives
#pragma unroll
  for (int a = 0; a < RA; ++a) {
    const float sum = sumOverRow(l[a]), dot = sumOverRow(ed[a]);
    dead[a] = m[a] == -INFINITY;
    if (dead[a]) {
      m[a] = inv[a] = dlt[a] = NAN;
    } else {
      inv[a] = 1.0f / sum;
      dlt[a] = dot * inv[a];
    }
    const int r = ty + 16 * a;
    if (tx == 0 && r < rows) {
      const int64_t at = bh * s.tq + i0 + r;
      rowMax[at] = m[a];
      rowInv[at] = inv[a];
      delta[at] = dlt[a];
    }
  }

  // Sweep 2: dS = P (dP - delta), dq += dS k.
  float acc[RA][CE];
#pragma unroll
  for (int a = 0; a < RA; ++a)
#pragma unroll
    for (int e = 0; e < CE; ++e)
      acc[a][e] = 0.0f;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += BC) {
    const int keys = int(min(int64_t(BC), s.tk - j0));
    __syncthreads(); // ks, vs and dss are no longer read
    loadTile(ks, kh + j0 * d, keys, BC, d, ldD, 1.0f);
    loadTile(vs, vh + j0 * dv, keys, BC, dv, ldV, 1.0f);
    __syncthreads();
    float sc[RA][CB], dp[RA][CB];
    tileProducts<RA, CB>(qs, dys, ks, vs, d, dv, ldD, ldV, sc, dp);
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      const int r = ty + 16 * a;
      const int64_t i = i0 + r;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const int cc = tx + 16 * c;
        const int64_t j = j0 + cc;
        bool valid = r < rows && cc < keys && !(causal && j > i);
        float ds = 0.0f; // NaN in a wholly masked row (m is NaN)
        if (valid)
          ds = expf(maskedScore(sc[a][c], true, mask, s, b, h, i, j) - m[a]) *
               inv[a] * (dp[a][c] - dlt[a]);
        dss[r * ldP + cc] = ds;
      }
    }
    __syncthreads();
    for (int c = 0; c < keys; ++c) {
      float x[RA];
#pragma unroll
      for (int a = 0; a < RA; ++a)
        x[a] = dss[(ty + 16 * a) * ldP + c];
#pragma unroll
      for (int e = 0; e < CE; ++e) {
        const int col = tx + 16 * e;
        const float y = col < d ? ks[c * ldD + col] : 0.0f;
#pragma unroll
        for (int a = 0; a < RA; ++a)
          acc[a][e] = fmaf(x[a], y, acc[a][e]);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < RA; ++a) {
    const int r = ty + 16 * a;
    if (r >= rows)
      continue;
    T *out = dq + (bh * s.tq + i0 + r) * d;
#pragma unroll
    for (int e = 0; e < CE; ++e) {
      const int col = tx + 16 * e;
      if (col < d)
        out[col] = fromFloat<T>(dead[a] ? NAN : acc[a][e] * scale);
    }
  }
}

/// dk and dv of keys [j0, j0 + BC) of one (batch, key/value head), summed
/// over the query heads of its group and all their query tiles.
template <typename T, typename M, int BR, int BC, int HD>
__global__ void __launch_bounds__(kThreads)
    keyGrad(const T *__restrict__ dy, const T *__restrict__ q,
            const T *__restrict__ k, const T *__restrict__ v,
            const M *__restrict__ mask, T *__restrict__ dk,
            T *__restrict__ dvOut, const float *__restrict__ rowMax,
            const float *__restrict__ rowInv, const float *__restrict__ delta,
            AttentionShape s, float scale, bool causal) {
  constexpr int KA = BC / 16, RA = BR / 16, CE = HD / 16, ldP = BC + 1;
  extern __shared__ float shared[];
  const int d = int(s.d), dv = int(s.dv), ldD = d | 1, ldV = dv | 1;
  float *ks = shared;            // [BC, ldD]
  float *vs = ks + BC * ldD;     // [BC, ldV]
  float *qs = vs + BC * ldV;     // [BR, ldD]: q * scale
  float *dys = qs + BR * ldD;    // [BR, ldV]
  float *ps = dys + BR * ldV;    // [BR, ldP]: P
  float *dss = ps + BR * ldP;    // [BR, ldP]: dS
  float *stats = dss + BR * ldP; // [3, BR]: max, 1 / sum, delta per row
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  const int64_t tiles = (s.tk + BC - 1) / BC;
  const int64_t bk = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * BC;
  const int64_t b = bk / s.hkv, hk = bk % s.hkv, group = s.h / s.hkv;
  const int keys = int(min(int64_t(BC), s.tk - j0));
  loadTile(ks, k + (bk * s.tk + j0) * d, keys, BC, d, ldD, 1.0f);
  loadTile(vs, v + (bk * s.tk + j0) * dv, keys, BC, dv, ldV, 1.0f);

  float gk[KA][CE], gv[KA][CE];
#pragma unroll
  for (int a = 0; a < KA; ++a)
#pragma unroll
    for (int e = 0; e < CE; ++e)
      gk[a][e] = gv[a][e] = 0.0f;
  // Query rows before j0 see none of these keys when causal.
  const int64_t iBegin = causal ? j0 / BR * BR : 0;
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const int64_t bh = b * s.h + h;
    for (int64_t i0 = iBegin; i0 < s.tq; i0 += BR) {
      const int rows = int(min(int64_t(BR), s.tq - i0));
      __syncthreads(); // the previous query tile is no longer read
      loadTile(qs, q + (bh * s.tq + i0) * d, rows, BR, d, ldD, scale);
      loadTile(dys, dy + (bh * s.tq + i0) * dv, rows, BR, dv, ldV, 1.0f);
      for (int r = threadIdx.x; r < BR; r += blockDim.x) {
        const int64_t at = bh * s.tq + i0 + r;
        stats[r] = r < rows ? rowMax[at] : 0.0f;
        stats[BR + r] = r < rows ? rowInv[at] : 0.0f;
        stats[2 * BR + r] = r < rows ? delta[at] : 0.0f;
      }
      __syncthreads();
      float sc[RA][KA], dp[RA][KA];
      tileProducts<RA, KA>(qs, dys, ks, vs, d, dv, ldD, ldV, sc, dp);
#pragma unroll
      for (int a = 0; a < RA; ++a) {
        const int r = ty + 16 * a;
        const int64_t i = i0 + r;
#pragma unroll
        for (int c = 0; c < KA; ++c) {
          const int cc = tx + 16 * c;
          const int64_t j = j0 + cc;
          bool valid = r < rows && cc < keys && !(causal && j > i);
          float p = 0.0f, ds = 0.0f; // NaN in a wholly masked row
          if (valid) {
            p = expf(maskedScore(sc[a][c], true, mask, s, b, h, i, j) -
                     stats[r]) *
                stats[BR + r];
            ds = p * (dp[a][c] - stats[2 * BR + r]);
          }
          ps[r * ldP + cc] = p;
          dss[r * ldP + cc] = ds;
        }
      }
      __syncthreads();
      // dv += P^T dy, dk += dS^T (q * scale) for the thread's keys
      // ty + 16a and columns tx + 16e.
      for (int r = 0; r < rows; ++r) {
        float x[KA], y[KA];
#pragma unroll
        for (int a = 0; a < KA; ++a) {
          x[a] = ps[r * ldP + ty + 16 * a];
          y[a] = dss[r * ldP + ty + 16 * a];
        }
#pragma unroll
        for (int e = 0; e < CE; ++e) {
          const int col = tx + 16 * e;
          const float dyv = col < dv ? dys[r * ldV + col] : 0.0f;
          const float qv = col < d ? qs[r * ldD + col] : 0.0f;
#pragma unroll
          for (int a = 0; a < KA; ++a) {
            gv[a][e] = fmaf(x[a], dyv, gv[a][e]);
            gk[a][e] = fmaf(y[a], qv, gk[a][e]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int a = 0; a < KA; ++a) {
    const int c = ty + 16 * a;
    if (c >= keys)
      continue;
    T *outK = dk + (bk * s.tk + j0 + c) * d;
    T *outV = dvOut + (bk * s.tk + j0 + c) * dv;
#pragma unroll
    for (int e = 0; e < CE; ++e) {
      const int col = tx + 16 * e;
      if (col < d)
        outK[col] = fromFloat<T>(gk[a][e]);
      if (col < dv)
        outV[col] = fromFloat<T>(gv[a][e]);
    }
  }
}

/// Lets `kernel` use `bytes` of dynamic shared memory.
template <typename K> Status allowSharedBytes(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    CLEAVE_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  return Status::ok();
}

/// Enqueues queryGrad (when there are query rows) and then keyGrad (when
/// there are keys); `stats` holds 3 B H Tq floats.
template <typename T, typename M, int HD>
Status enqueueGrad(const KernelArgs &a, const AttentionShape &s, const M *mask,
                   float scale, bool causal, float *stats, int64_t queryBlocks,
                   int64_t keyBlocks, cudaStream_t stream) {
  using Tl = Tiles<HD>;
  const size_t ldD = size_t(s.d | 1), ldV = size_t(s.dv | 1);
  const int64_t rowCount = s.b * s.h * s.tq;
  float *rowMax = stats, *rowInv = stats + rowCount,
        *delta = stats + 2 * rowCount;
  const T *dy = a.in(0).as<T>(), *q = a.in(1).as<T>(), *k = a.in(2).as<T>(),
          *v = a.in(3).as<T>();
  if (queryBlocks > 0) {
    constexpr int BR = Tl::queryRows, BC = Tl::queryKeys;
    size_t bytes = ((BR + BC) * (ldD + ldV) + BR * (BC + 1)) * sizeof(float);
    auto kernel = queryGrad<T, M, BR, BC, HD>;
    CLEAVE_CHECK(allowSharedBytes(kernel, bytes));
    kernel<<<unsigned(queryBlocks), kThreads, bytes, stream>>>(
        dy, q, k, v, mask, a.out(0).as<T>(), rowMax, rowInv, delta, s, scale,
        causal);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  if (keyBlocks > 0) {
    constexpr int BR = Tl::keyRows, BC = Tl::keyKeys;
    size_t bytes =
        ((BR + BC) * (ldD + ldV) + 2 * BR * (BC + 1) + 3 * BR) * sizeof(float);
    auto kernel = keyGrad<T, M, BR, BC, HD>;
    CLEAVE_CHECK(allowSharedBytes(kernel, bytes));
    kernel<<<unsigned(keyBlocks), kThreads, bytes, stream>>>(
        dy, q, k, v, mask, a.out(1).as<T>(), a.out(2).as<T>(), rowMax, rowInv,
        delta, s, scale, causal);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
  }
  return Status::ok();
}

/// Both kernels' grids, their scratch buffer and their launches, with the
/// tiles for head dimensions up to HD.
template <typename T, typename M, int HD>
Status attentionGradTiled(const KernelArgs &a, const AttentionShape &s,
                          const M *mask, float scale, bool causal,
                          cudaStream_t stream) {
  using Tl = Tiles<HD>;
  const int64_t queryBlocks =
      s.b * s.h * ((s.tq + Tl::queryRows - 1) / Tl::queryRows);
  const int64_t keyBlocks =
      s.b * s.hkv * ((s.tk + Tl::keyKeys - 1) / Tl::keyKeys);
  if (queryBlocks > INT32_MAX || keyBlocks > INT32_MAX)
    return a.error("more than 2^31 - 1 blocks of query rows or keys");
  const int64_t rowCount = s.b * s.h * s.tq;
  float *stats = nullptr;
  if (rowCount > 0)
    CLEAVE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void **>(&stats),
                                      size_t(3 * rowCount) * sizeof(float),
                                      stream));
  Status status = enqueueGrad<T, M, HD>(a, s, mask, scale, causal, stats,
                                        queryBlocks, keyBlocks, stream);
  if (stats)
    (void)cudaFreeAsync(stats, stream);
  return status;
}

template <typename T, typename M>
Status attentionGradTyped(const KernelArgs &a, const AttentionShape &s,
                          const M *mask, float scale, bool causal,
                          cudaStream_t stream) {
  const int64_t hd = std::max(s.d, s.dv);
  if (hd <= 64)
    return attentionGradTiled<T, M, 64>(a, s, mask, scale, causal, stream);
  if (hd <= 128)
    return attentionGradTiled<T, M, 128>(a, s, mask, scale, causal, stream);
  return attentionGradTiled<T, M, 256>(a, s, mask, scale, causal, stream);
}

} // namespace

namespace cleave::runtime::cuda {

Status attentionGradKernel(const KernelArgs &a, cudaStream_t stream) {
  AttentionShape s;
  double scale;
  int64_t causal;
  const TensorRef *mask;
  CLEAVE_CHECK(ops::checkAttentionGrad(a, s, scale, causal, mask));
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return a.error("the CUDA attention_grad kernel takes head dimensions up "
                   "to " +
                   std::to_string(kMaxHeadDim) + ", got " +
                   std::to_string(s.d) + " (q, k) and " + std::to_string(s.dv) +
                   " (v)");
  return visitDeviceFloat(
      a, a.in(1).dtype,
      [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if (s.b * s.hkv == 0) // no keys and no query rows
          return Status::ok();
        return visitDeviceMask(mask, [&](auto maskTag) -> Status {
          using M = typename decltype(maskTag)::type;
          return attentionGradTyped<T, M>(
              a, s, mask ? static_cast<const M *>(mask->data) : nullptr,
              float(scale), causal != 0, stream);
        });
      },
      "q");
}

} // namespace cleave::runtime::cuda
