//===- attention.cpp - CPU kernels of fused attention and its gradient ----===//
//
// softmax(q k^T * scale [+ mask]) v for q [B, H, Tq, D], k [B, Hkv, Tk, D],
// v [B, Hkv, Tk, Dv]; query head h reads key/value head h / (H / Hkv)
// (grouped-query attention). The keys are first transposed to [D, Tk] per
// head (in float), once for all query heads that share them. One OpenMP work
// item is then a (batch, head, block of 32 query rows); four query rows are
// computed together, as GEMM-like 4 x 16 register tiles over the transposed
// keys and then over the values. Only four rows of scores exist at a time
// (no [Tq, Tk] tensor): scores, row max, exp and sum, then the weighted sum
// of value rows.
//
// With `causal`, key j > i is never computed (top-left aligned, as the op
// defines), nor are the keys a mask removes at the end of a row, so a causal
// mask given as a tensor costs what `causal` does. A mask broadcast to
// [B, H, Tq, Tk] is read in place: a bool mask keeps true entries, a float
// mask is added. A row with every key masked gives NaN, as softmax over -inf
// does.
//
// attention_grad recomputes the probabilities (nothing is kept from the
// forward) with cblas GEMMs over blocks of 64 query rows and the keys they
// see (causal blocks skip the keys past their last row), one OpenMP work
// item per (batch, key/value head) so the grouped heads' dk and dv sums
// stay in one thread. f16/bf16 are widened to float per head, f64 runs the
// same code on dgemm.
//
// checkAttention and checkAttentionGrad, which read and check the operands,
// are declared in AttentionShape.h: the CUDA kernels use them too.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/AttentionShape.h"
#include "runtime/cpu/KernelTable.h"

#include <cblas.h>

#include <climits>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

constexpr int64_t kRows = 4;        // query rows per register tile
constexpr int64_t kCols = 16;       // keys (or value columns) per tile, at most
constexpr int64_t kQueryBlock = 32; // query rows per work item

/// Adds row `i`'s mask to scores[0, n): -inf where a bool mask is false.
template <typename M, typename S>
CLEAVE_ALWAYS_INLINE void applyMask(const M *mask, int64_t stride, S *scores,
                                    int64_t n) {
  if constexpr (std::is_same_v<M, Bool>) {
    const S ninf = -std::numeric_limits<S>::infinity();
    for (int64_t j = 0; j < n; ++j)
      scores[j] = mask[j * stride] ? scores[j] : ninf;
  } else {
    for (int64_t j = 0; j < n; ++j)
      scores[j] += S(load(mask[j * stride]));
  }
}

/// One past the last key of [0, end) that the mask row keeps: a causal
/// mask given as a tensor (a bool lower triangle, or -inf above the
/// diagonal) then costs what `causal` does.
template <typename M>
CLEAVE_ALWAYS_INLINE int64_t unmaskedEnd(const M *mask, int64_t stride,
                                         int64_t end) {
  const float ninf = -std::numeric_limits<float>::infinity();
  while (end > 0) {
    if constexpr (std::is_same_v<M, Bool>) {
      if (mask[(end - 1) * stride])
        break;
    } else if (float(load(mask[(end - 1) * stride])) != ninf) {
      break;
    }
    --end;
  }
  return end;
}

/// Keys transposed to [B * Hkv, D, ld] floats (ld: Tk rounded up to a
/// tile, padded with zeros) and values as float, shared by every work item.
struct Prepared {
  std::vector<float> kt, vf;
  int64_t ld = 0;
};

/// Per-thread scratch of one work item.
struct Scratch {
  std::vector<float> qrow;   // [kRows, D]: scaled query rows
  std::vector<float> scores; // [kRows, ld]: scores, then weights
};

/// W floats as a GCC vector at any float's address. The tiles are 4 rows
/// by two vectors: 4 x 16 with AVX2 (W = 8), 4 x 8 with SSE (W = 4), so
/// the eight accumulators stay in registers either way.
template <int W> struct VecOf {
  typedef float type __attribute__((vector_size(W * 4), aligned(4)));
};

/// scores[r, j0 + c] = sum_p q[r, p] kt[p, j0 + c], c < 2W: each step loads
/// 2W keys once for four query rows.
template <int W>
CLEAVE_ALWAYS_INLINE void scoreTile(const float *q, int64_t d, const float *kt,
                                    int64_t ld, float *scores, int64_t j0) {
  using V = typename VecOf<W>::type;
  V a0 = {}, b0 = {}, a1 = {}, b1 = {}, a2 = {}, b2 = {}, a3 = {}, b3 = {};
  for (int64_t p = 0; p < d; ++p) {
    const V *row = reinterpret_cast<const V *>(kt + p * ld + j0);
    V k0 = row[0], k1 = *reinterpret_cast<const V *>(kt + p * ld + j0 + W);
    float q0 = q[p], q1 = q[d + p], q2 = q[2 * d + p], q3 = q[3 * d + p];
    a0 += q0 * k0;
    b0 += q0 * k1;
    a1 += q1 * k0;
    b1 += q1 * k1;
    a2 += q2 * k0;
    b2 += q2 * k1;
    a3 += q3 * k0;
    b3 += q3 * k1;
  }
  // Stored here, not through a helper taking V: a call that is not inlined
  // (a lambda at -O0) lacks the caller's AVX2 target and would receive the
  // 32-byte vectors under another ABI.
  V *s0 = reinterpret_cast<V *>(scores + j0);
  V *s1 = reinterpret_cast<V *>(scores + ld + j0);
  V *s2 = reinterpret_cast<V *>(scores + 2 * ld + j0);
  V *s3 = reinterpret_cast<V *>(scores + 3 * ld + j0);
  s0[0] = a0;
  *reinterpret_cast<V *>(scores + j0 + W) = b0;
  s1[0] = a1;
  *reinterpret_cast<V *>(scores + ld + j0 + W) = b1;
  s2[0] = a2;
  *reinterpret_cast<V *>(scores + 2 * ld + j0 + W) = b2;
  s3[0] = a3;
  *reinterpret_cast<V *>(scores + 3 * ld + j0 + W) = b3;
}

/// out[r, c] = sum_j w[r, j] v[j, d0 + c] for four rows and n <= 2W value
/// columns.
template <int W>
CLEAVE_ALWAYS_INLINE void valueTile(const float *w, int64_t ld, int64_t keys,
                                    const float *v, int64_t dv, int64_t d0,
                                    int64_t n, float (&out)[kRows][kCols]) {
  using V = typename VecOf<W>::type;
  if (n == 2 * W) {
    V a0 = {}, b0 = {}, a1 = {}, b1 = {}, a2 = {}, b2 = {}, a3 = {}, b3 = {};
    for (int64_t j = 0; j < keys; ++j) {
      V v0 = *reinterpret_cast<const V *>(v + j * dv + d0);
      V v1 = *reinterpret_cast<const V *>(v + j * dv + d0 + W);
      float w0 = w[j], w1 = w[ld + j], w2 = w[2 * ld + j], w3 = w[3 * ld + j];
      a0 += w0 * v0;
      b0 += w0 * v1;
      a1 += w1 * v0;
      b1 += w1 * v1;
      a2 += w2 * v0;
      b2 += w2 * v1;
      a3 += w3 * v0;
      b3 += w3 * v1;
    }
    V *o0 = reinterpret_cast<V *>(out[0]), *o1 = reinterpret_cast<V *>(out[1]);
    V *o2 = reinterpret_cast<V *>(out[2]), *o3 = reinterpret_cast<V *>(out[3]);
    *o0 = a0;
    *reinterpret_cast<V *>(out[0] + W) = b0;
    *o1 = a1;
    *reinterpret_cast<V *>(out[1] + W) = b1;
    *o2 = a2;
    *reinterpret_cast<V *>(out[2] + W) = b2;
    *o3 = a3;
    *reinterpret_cast<V *>(out[3] + W) = b3;
    return;
  }
  float acc[kRows][kCols] = {};
  for (int64_t j = 0; j < keys; ++j) {
    const float *row = v + j * dv + d0;
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < n; ++c)
        acc[r][c] += w[r * ld + j] * row[c];
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < n; ++c)
      out[r][c] = acc[r][c];
}

/// One work item: query rows [block * kQueryBlock, ...) of (batch, head).
/// Every four query rows take their scores in 4 x 16 register tiles over
/// the transposed keys, a softmax per row, and the weighted sum of values
/// in 4 x 16 tiles.
template <int W, typename T, typename M>
CLEAVE_ALWAYS_INLINE void
attendBlock(const AttentionShape &s, const T *q, const float *kt, int64_t ld,
            const float *vf, const M *mask, T *out, float scale, bool causal,
            int64_t item, Scratch &scratch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t blocks = (s.tq + kQueryBlock - 1) / kQueryBlock;
  int64_t block = item % blocks, bh = item / blocks;
  int64_t b = bh / s.h, h = bh % s.h, hk = h / (s.h / s.hkv);
  const float *kth = kt + (b * s.hkv + hk) * s.d * ld;
  const float *vh = vf + (b * s.hkv + hk) * s.tk * s.dv;
  int64_t iBegin = block * kQueryBlock;
  int64_t iEnd = std::min(s.tq, iBegin + kQueryBlock);
  float *qrow = scratch.qrow.data(), *scores = scratch.scores.data();
  for (int64_t i0 = iBegin; i0 < iEnd; i0 += kRows) {
    int64_t rows = std::min(kRows, iEnd - i0);
    // Query rows as float, pre-scaled; rows past the end repeat the first
    // so the tiles need no tail.
    int64_t end[kRows], keys = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      int64_t i = i0 + (r < rows ? r : 0);
      const T *qi = q + ((b * s.h + h) * s.tq + i) * s.d;
      for (int64_t p = 0; p < s.d; ++p)
        qrow[r * s.d + p] = float(load(qi[p])) * scale;
      end[r] = causal ? std::min(i + 1, s.tk) : s.tk;
      if (mask) // keys masked out at the end of the row are never computed
        end[r] =
            unmaskedEnd(mask + b * s.mb + h * s.mh + i * s.mi, s.mj, end[r]);
      if (r < rows)
        keys = std::max(keys, end[r]);
    }
    for (int64_t j0 = 0; j0 < keys; j0 += 2 * W)
      scoreTile<W>(qrow, s.d, kth, ld, scores, j0);
    // Mask, causal cut and softmax weights per row; unused rows weigh 0.
    float inv[kRows];
    for (int64_t r = 0; r < kRows; ++r) {
      float *sr = scores + r * ld;
      if (r >= rows) {
        std::fill(sr, sr + keys, 0.0f);
        inv[r] = 0;
        continue;
      }
      if (mask)
        applyMask(mask + b * s.mb + h * s.mh + (i0 + r) * s.mi, s.mj, sr,
                  end[r]);
      for (int64_t j = end[r]; j < keys; ++j)
        sr[j] = ninf;
      float m = maxOf(sr, end[r]);
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < keys; ++j) {
        float e = fastExp(sr[j] - m);
        sr[j] = e;
        sum += e;
      }
      if (m == ninf) // every key masked: NaN, as softmax of -inf gives
        sum = std::numeric_limits<float>::quiet_NaN();
      inv[r] = 1.0f / sum;
    }
    // Weighted sums of value rows, 16 value columns at a time.
    for (int64_t d0 = 0; d0 < s.dv; d0 += 2 * W) {
      int64_t n = std::min<int64_t>(2 * W, s.dv - d0);
      float tile[kRows][kCols];
      valueTile<W>(scores, ld, keys, vh, s.dv, d0, n, tile);
      for (int64_t r = 0; r < rows; ++r) {
        T *o = out + ((b * s.h + h) * s.tq + i0 + r) * s.dv + d0;
        for (int64_t c = 0; c < n; ++c)
          o[c] = store<T>(Compute<T>(tile[r][c] * inv[r]));
      }
    }
  }
}

template <typename T, typename M>
CLEAVE_TARGET_AVX2 void
attendBlockAvx2(const AttentionShape &s, const T *q, const float *kt,
                int64_t ld, const float *vf, const M *mask, T *out, float scale,
                bool causal, int64_t item, Scratch &scratch) {
  attendBlock<8, T, M>(s, q, kt, ld, vf, mask, out, scale, causal, item,
                       scratch);
}

/// Transposes every key head into `p.kt` (16 keys at a time: 16 rows read,
/// D rows of 16 written) and widens the values if they are not float.
template <typename T>
void prepare(const AttentionShape &s, const T *k, const T *v, Prepared &p) {
  p.ld = (s.tk + kCols - 1) / kCols * kCols;
  int64_t heads = s.b * s.hkv, tiles = p.ld / kCols;
  p.kt.resize(heads * s.d * p.ld);
  parallelRange(heads * tiles, 16, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t head = item / tiles, j0 = (item % tiles) * kCols;
      const T *kh = k + head * s.tk * s.d;
      float *dst = p.kt.data() + head * s.d * p.ld + j0;
      for (int64_t p_ = 0; p_ < s.d; ++p_)
        for (int64_t c = 0; c < kCols; ++c)
          dst[p_ * p.ld + c] =
              j0 + c < s.tk ? float(load(kh[(j0 + c) * s.d + p_])) : 0.0f;
    }
  });
  if constexpr (!std::is_same_v<T, float>) {
    p.vf.resize(heads * s.tk * s.dv);
    parallelRange(int64_t(p.vf.size()), kElementwiseGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      p.vf[i] = float(load(v[i]));
                  });
  }
}

template <typename T, typename M>
void attentionTyped(const AttentionShape &s, const T *q, const T *k, const T *v,
                    const M *mask, T *out, float scale, bool causal) {
  Prepared prepared;
  prepare(s, k, v, prepared);
  const float *vf;
  if constexpr (std::is_same_v<T, float>)
    vf = v;
  else
    vf = prepared.vf.data();
  const int64_t ld = prepared.ld;
  const float *kt = prepared.kt.data();
  const int64_t blocks = (s.tq + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = s.b * s.h * blocks;
  const bool avx2 = useAvx2();
#pragma omp parallel if (items > 1 && !omp_in_parallel())
  {
    Scratch scratch;
    scratch.qrow.resize(kRows * s.d);
    scratch.scores.resize(kRows * ld);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      if (avx2)
        attendBlockAvx2<T, M>(s, q, kt, ld, vf, mask, out, scale, causal, item,
                              scratch);
      else
        attendBlock<4, T, M>(s, q, kt, ld, vf, mask, out, scale, causal, item,
                             scratch);
    }
  }
}

/// f64 attention: the same loop structure in double, row by row.
void attentionDouble(const AttentionShape &s, const double *q, const double *k,
                     const double *v, const TensorRef &mask, double *out,
                     double scale, bool causal) {
  const int64_t items = s.b * s.h * s.tq;
  const int64_t group = s.h / s.hkv;
#pragma omp parallel if (items > 1 && !omp_in_parallel())
  {
    std::vector<double> scores(s.tk), acc(s.dv);
#pragma omp for schedule(dynamic, 16)
    for (int64_t item = 0; item < items; ++item) {
      int64_t i = item % s.tq, bh = item / s.tq;
      int64_t b = bh / s.h, h = bh % s.h, hk = h / group;
      const double *qi = q + item * s.d;
      const double *kh = k + (b * s.hkv + hk) * s.tk * s.d;
      const double *vh = v + (b * s.hkv + hk) * s.tk * s.dv;
      int64_t end = causal ? std::min(i + 1, s.tk) : s.tk;
      int64_t maskRow = b * s.mb + h * s.mh + i * s.mi;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < end; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.d; ++d)
          dot += qi[d] * kh[j * s.d + d];
        dot *= scale;
        if (mask.data) {
          int64_t at = maskRow + j * s.mj;
          switch (mask.dtype) {
          case DType::Bool:
            if (!mask.as<Bool>()[at])
              dot = -std::numeric_limits<double>::infinity();
            break;
          case DType::F64:
            dot += mask.as<double>()[at];
            break;
          case DType::F32:
            dot += mask.as<float>()[at];
            break;
          case DType::F16:
            dot += halfToFloat(mask.as<Half>()[at]);
            break;
          default:
            dot += bf16ToFloat(mask.as<BFloat16>()[at]);
            break;
          }
        }
        scores[j] = dot;
        m = std::max(m, dot);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < end; ++j) {
        double p = std::exp(scores[j] - m);
        sum += p;
        for (int64_t d = 0; d < s.dv; ++d)
          acc[d] += p * vh[j * s.dv + d];
      }
      for (int64_t d = 0; d < s.dv; ++d)
        out[item * s.dv + d] = acc[d] / sum;
    }
  }
}

/// Calls f(Tag<M>{}) for the mask's element type (float when there is no
/// mask, whose pointer is then null).
template <typename F> Status visitMask(const TensorRef *mask, F &&f) {
  switch (mask ? mask->dtype : DType::F32) {
  case DType::Bool:
    return f(Tag<Bool>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<Half>{});
  case DType::BF16:
    return f(Tag<BFloat16>{});
  default:
    return f(Tag<float>{});
  }
}

//===----------------------------------------------------------------------===//
// Gradient
//===----------------------------------------------------------------------===//

/// Query rows per step of the gradient: the scores of this many rows
/// against the keys they see are one GEMM operand.
constexpr int64_t kGradBlock = 64;

/// C = alpha op(A) op(B) + beta C, row-major. Leading dimensions are at
/// least 1, as BLAS requires even of empty matrices (a head dimension of 0).
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
          float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a, blasint(std::max<int64_t>(lda, 1)), b,
              blasint(std::max<int64_t>(ldb, 1)), beta, c,
              blasint(std::max<int64_t>(ldc, 1)));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double *a, int64_t lda, const double *b, int64_t ldb,
          double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a, blasint(std::max<int64_t>(lda, 1)), b,
              blasint(std::max<int64_t>(ldb, 1)), beta, c,
              blasint(std::max<int64_t>(ldc, 1)));
}

/// `p` as compute type C: itself when T is C, else widened into `buffer`.
template <typename C, typename T>
const C *widened(const T *p, int64_t n, std::vector<C> &buffer) {
  if constexpr (std::is_same_v<C, T>) {
    return p;
  } else {
    buffer.resize(n);
    for (int64_t i = 0; i < n; ++i)
      buffer[i] = C(load(p[i]));
    return buffer.data();
  }
}

/// Where to compute a result block of n elements that goes to `p`: `p`
/// itself when T is C, else `buffer` (then stored by narrowed()).
template <typename C, typename T>
C *computeIn(T *p, int64_t n, std::vector<C> &buffer) {
  if constexpr (std::is_same_v<C, T>) {
    return p;
  } else {
    buffer.resize(n);
    return buffer.data();
  }
}

template <typename C, typename T>
void narrowed(const C *from, T *to, int64_t n) {
  if constexpr (!std::is_same_v<C, T>)
    for (int64_t i = 0; i < n; ++i)
      to[i] = store<T>(Compute<T>(from[i]));
}

/// Softmax rows of a block of scores, in place: row r keeps keys
/// [0, end[r]) (mask added or applied first), keys [end[r], keys) get
/// weight 0. A row with every key masked gets NaN, as the forward gives.
template <typename C, typename M>
CLEAVE_ALWAYS_INLINE void blockSoftmax(C *p, int64_t ld, int64_t rows,
                                       const int64_t *end, int64_t keys,
                                       const M *mask, const AttentionShape &s,
                                       int64_t b, int64_t h, int64_t i0) {
  const C ninf = -std::numeric_limits<C>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    C *pr = p + r * ld;
    if (mask)
      applyMask(mask + b * s.mb + h * s.mh + (i0 + r) * s.mi, s.mj, pr, end[r]);
    C m = ninf;
    if constexpr (std::is_same_v<C, float>) {
      m = maxOf(pr, end[r]);
    } else {
      for (int64_t j = 0; j < end[r]; ++j)
        m = std::max(m, pr[j]);
    }
    if (m == ninf) {
      std::fill(pr, pr + keys, std::numeric_limits<C>::quiet_NaN());
      continue;
    }
    C sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < end[r]; ++j) {
      C e = cpu::exp(pr[j] - m);
      pr[j] = e;
      sum += e;
    }
    C inv = C(1) / sum;
    for (int64_t j = 0; j < end[r]; ++j)
      pr[j] *= inv;
    std::fill(pr + end[r], pr + keys, C(0));
  }
}

/// dS = P (dP - rowsum(P dP)), in place over dP: the softmax's backward.
template <typename C>
CLEAVE_ALWAYS_INLINE void blockSoftmaxBackward(const C *p, C *dp, int64_t ld,
                                               int64_t rows, int64_t keys) {
  for (int64_t r = 0; r < rows; ++r) {
    const C *pr = p + r * ld;
    C *dr = dp + r * ld;
    C dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < keys; ++j)
      dot += pr[j] * dr[j];
    for (int64_t j = 0; j < keys; ++j)
      dr[j] = pr[j] * (dr[j] - dot);
  }
}

template <typename C, typename M>
CLEAVE_TARGET_AVX2 void blockSoftmaxAvx2(C *p, int64_t ld, int64_t rows,
                                         const int64_t *end, int64_t keys,
                                         const M *mask, const AttentionShape &s,
                                         int64_t b, int64_t h, int64_t i0) {
  blockSoftmax<C, M>(p, ld, rows, end, keys, mask, s, b, h, i0);
}

template <typename C>
CLEAVE_TARGET_AVX2 void blockSoftmaxBackwardAvx2(const C *p, C *dp, int64_t ld,
                                                 int64_t rows, int64_t keys) {
  blockSoftmaxBackward<C>(p, dp, ld, rows, keys);
}

/// Per-thread buffers: widened operands when T is not C, and two blocks of
/// [kGradBlock, Tk] scores.
template <typename C> struct GradScratch {
  std::vector<C> k, v, q, dy, dq, dk, dv;
  std::vector<C> p, dp;
};

/// The gradients of the query heads sharing key/value head (b, hk): for
/// each head and block of kGradBlock query rows, with K and V the keys and
/// values the block sees,
///   P = softmax(scale Q K^T [+ mask]),  dV += P^T dY,  dP = dY V^T,
///   dS = P (dP - rowsum(P dP)),  dQ = scale dS K,  dK += scale dS^T Q,
/// six GEMMs. dK and dV sum over the heads of the group.
template <typename T, typename M>
void attentionGradItem(const AttentionShape &s, const T *dy, const T *q,
                       const T *k, const T *v, const M *mask, T *dq, T *dk,
                       T *dv, double scale, bool causal, int64_t item,
                       bool avx2, GradScratch<Compute<T>> &w) {
  using C = Compute<T>;
  int64_t b = item / s.hkv, hk = item % s.hkv, group = s.h / s.hkv;
  int64_t kvOffset = item * s.tk;
  const C *kh = widened<C>(k + kvOffset * s.d, s.tk * s.d, w.k);
  const C *vh = widened<C>(v + kvOffset * s.dv, s.tk * s.dv, w.v);
  C *dkh = computeIn<C>(dk + kvOffset * s.d, s.tk * s.d, w.dk);
  C *dvh = computeIn<C>(dv + kvOffset * s.dv, s.tk * s.dv, w.dv);
  std::fill(dkh, dkh + s.tk * s.d, C(0));
  std::fill(dvh, dvh + s.tk * s.dv, C(0));
  const int64_t ld = s.tk;
  C *p = w.p.data(), *dp = w.dp.data();
  const C alpha = C(scale);
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    int64_t qOffset = (b * s.h + h) * s.tq;
    const C *qh = widened<C>(q + qOffset * s.d, s.tq * s.d, w.q);
    const C *dyh = widened<C>(dy + qOffset * s.dv, s.tq * s.dv, w.dy);
    C *dqh = computeIn<C>(dq + qOffset * s.d, s.tq * s.d, w.dq);
    for (int64_t i0 = 0; i0 < s.tq; i0 += kGradBlock) {
      int64_t rows = std::min(kGradBlock, s.tq - i0);
      // The keys each row sees: causal and trailing masked keys cut.
      int64_t end[kGradBlock], keys = 0;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t i = i0 + r;
        end[r] = causal ? std::min(i + 1, s.tk) : s.tk;
        if (mask)
          end[r] =
              unmaskedEnd(mask + b * s.mb + h * s.mh + i * s.mi, s.mj, end[r]);
        keys = std::max(keys, end[r]);
      }
      const C *qb = qh + i0 * s.d, *dyb = dyh + i0 * s.dv;
      C *dqb = dqh + i0 * s.d;
      if (keys == 0) { // every row masked: NaN, as the forward gives
        std::fill(dqb, dqb + rows * s.d, std::numeric_limits<C>::quiet_NaN());
        continue;
      }
      gemm(false, true, rows, keys, s.d, alpha, qb, s.d, kh, s.d, C(0), p, ld);
      if (avx2)
        blockSoftmaxAvx2<C, M>(p, ld, rows, end, keys, mask, s, b, h, i0);
      else
        blockSoftmax<C, M>(p, ld, rows, end, keys, mask, s, b, h, i0);
      gemm(true, false, keys, s.dv, rows, C(1), p, ld, dyb, s.dv, C(1), dvh,
           s.dv);
      gemm(false, true, rows, keys, s.dv, C(1), dyb, s.dv, vh, s.dv, C(0), dp,
           ld);
      if (avx2)
        blockSoftmaxBackwardAvx2<C>(p, dp, ld, rows, keys);
      else
        blockSoftmaxBackward<C>(p, dp, ld, rows, keys);
      gemm(false, false, rows, s.d, keys, alpha, dp, ld, kh, s.d, C(0), dqb,
           s.d);
      gemm(true, false, keys, s.d, rows, alpha, dp, ld, qb, s.d, C(1), dkh,
           s.d);
    }
    narrowed(dqh, dq + qOffset * s.d, s.tq * s.d);
  }
  narrowed(dkh, dk + kvOffset * s.d, s.tk * s.d);
  narrowed(dvh, dv + kvOffset * s.dv, s.tk * s.dv);
}

/// One OpenMP work item per (batch, key/value head): the items write
/// disjoint parts of dq, dk and dv, so no sums cross threads.
template <typename T, typename M>
void attentionGradTyped(const AttentionShape &s, const T *dy, const T *q,
                        const T *k, const T *v, const M *mask, T *dq, T *dk,
                        T *dv, double scale, bool causal) {
  singleThreadedBlas();
  const int64_t items = s.b * s.hkv;
  const bool avx2 = std::is_same_v<Compute<T>, float> && useAvx2();
#pragma omp parallel if (items > 1 && !omp_in_parallel())
  {
    GradScratch<Compute<T>> scratch;
    scratch.p.resize(kGradBlock * s.tk);
    scratch.dp.resize(kGradBlock * s.tk);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item)
      attentionGradItem<T, M>(s, dy, q, k, v, mask, dq, dk, dv, scale, causal,
                              item, avx2, scratch);
  }
}

} // namespace

Status cpu::attentionKernel(const KernelArgs &a) {
  AttentionShape s;
  double scale;
  int64_t causal;
  const TensorRef *maskRef;
  CLEAVE_CHECK(checkAttention(a, 0, s, scale, causal, maskRef));
  const TensorRef &q = a.in(0), &k = a.in(1), &v = a.in(2);
  CLEAVE_CHECK(a.expectDType(a.out(), q.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), {s.b, s.h, s.tq, s.dv}, "the result"));
  const TensorRef noMask;
  const TensorRef &mask = maskRef ? *maskRef : noMask;
  if (a.out().numElements() == 0)
    return Status::ok();

  if (q.dtype == DType::F64) {
    attentionDouble(s, q.as<double>(), k.as<double>(), v.as<double>(), mask,
                    a.out().as<double>(), scale, causal != 0);
    return Status::ok();
  }
  return visitFloat(a, q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, double>) {
      return visitMask(maskRef, [&](auto maskTag) {
        using M = typename decltype(maskTag)::type;
        attentionTyped<T, M>(s, q.as<T>(), k.as<T>(), v.as<T>(),
                             static_cast<const M *>(mask.data), a.out().as<T>(),
                             float(scale), causal != 0);
        return Status::ok();
      });
    }
    return Status::ok();
  });
}

Status cpu::attentionGradKernel(const KernelArgs &a) {
  AttentionShape s;
  double scale;
  int64_t causal;
  const TensorRef *mask;
  CLEAVE_CHECK(checkAttentionGrad(a, s, scale, causal, mask));
  const TensorRef &dy = a.in(0), &q = a.in(1), &k = a.in(2), &v = a.in(3);
  if (std::max({s.tq, s.tk, s.d, s.dv}) > INT_MAX)
    return a.error("a dimension exceeds what BLAS indexes (2^31 - 1)");
  if (s.b * s.hkv == 0)
    return Status::ok();
  return visitFloat(a, q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return visitMask(mask, [&](auto maskTag) {
      using M = typename decltype(maskTag)::type;
      attentionGradTyped<T, M>(
          s, dy.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(),
          mask ? static_cast<const M *>(mask->data) : nullptr, a.out(0).as<T>(),
          a.out(1).as<T>(), a.out(2).as<T>(), scale, causal != 0);
      return Status::ok();
    });
  });
}
