//===- attention.cpp - CPU kernel of fused scaled dot-product attention ---===//
//
// softmax(q k^T * scale [+ mask]) v for q [B, H, Tq, D], k [B, Hkv, Tk, D],
// v [B, Hkv, Tk, Dv]; query head h reads key/value head h / (H / Hkv)
// (grouped-query attention). One OpenMP work item is a (batch, head, block
// of query rows); four query rows are computed together so each key and
// value row is loaded once for four. Per query row only its row of scores
// exists (no [Tq, Tk] tensor): scores, row max, exp and sum, then the
// weighted sum of value rows. With `causal`, key j > i is never computed
// (top-left aligned, as the op defines). A mask broadcast to [B, H, Tq, Tk]
// is read in place: a bool mask keeps true entries, a float mask is added.
// A row with every key masked gives NaN, as softmax over -inf does.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;

namespace {

constexpr int64_t kRows = 4;        // query rows computed together
constexpr int64_t kQueryBlock = 32; // query rows per work item

struct AttentionShape {
  int64_t b, h, hkv, tq, tk, d, dv;
  // The mask's strides over [B, H, Tq, Tk] (0 where it broadcasts).
  int64_t mb = 0, mh = 0, mi = 0, mj = 0;
};

/// Adds row `i`'s mask to scores[0, n): -inf where a bool mask is false.
template <typename M>
CLEAVE_ALWAYS_INLINE void applyMask(const M *mask, int64_t stride,
                                    float *scores, int64_t n) {
  if constexpr (std::is_same_v<M, Bool>) {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j)
      scores[j] = mask[j * stride] ? scores[j] : ninf;
  } else {
    for (int64_t j = 0; j < n; ++j)
      scores[j] += float(load(mask[j * stride]));
  }
}

/// Per-thread scratch: four rows of scores, outputs and scaled queries.
struct Scratch {
  std::vector<float> scores, acc, qrow;
};

/// One work item: query rows [block * kQueryBlock, ...) of (batch, head).
template <typename T, typename M>
CLEAVE_ALWAYS_INLINE void attendBlock(const AttentionShape &s, const T *q,
                                      const T *k, const T *v, const M *mask,
                                      T *out, float scale, bool causal,
                                      int64_t item, Scratch &scratch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t blocks = (s.tq + kQueryBlock - 1) / kQueryBlock;
  int64_t block = item % blocks, bh = item / blocks;
  int64_t b = bh / s.h, h = bh % s.h, hk = h / (s.h / s.hkv);
  const T *kh = k + (b * s.hkv + hk) * s.tk * s.d;
  const T *vh = v + (b * s.hkv + hk) * s.tk * s.dv;
  float *scores = scratch.scores.data(), *acc = scratch.acc.data(),
        *qrow = scratch.qrow.data();
  int64_t iBegin = block * kQueryBlock;
  int64_t iEnd = std::min(s.tq, iBegin + kQueryBlock);
  for (int64_t i0 = iBegin; i0 < iEnd; i0 += kRows) {
    int64_t rows = std::min(kRows, iEnd - i0);
    // Query rows as float, pre-scaled; rows past the end repeat the first
    // so the four-row loops need no tail.
    int64_t end[kRows], keys = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      int64_t i = i0 + (r < rows ? r : 0);
      const T *qi = q + ((b * s.h + h) * s.tq + i) * s.d;
      for (int64_t d = 0; d < s.d; ++d)
        qrow[r * s.d + d] = float(load(qi[d])) * scale;
      end[r] = causal ? std::min(i + 1, s.tk) : s.tk;
      if (r < rows)
        keys = std::max(keys, end[r]);
    }
    float *s0 = scores, *s1 = s0 + s.tk, *s2 = s1 + s.tk, *s3 = s2 + s.tk;
    const float *q0 = qrow, *q1 = q0 + s.d, *q2 = q1 + s.d, *q3 = q2 + s.d;
    for (int64_t j = 0; j < keys; ++j) {
      const T *kj = kh + j * s.d;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
      for (int64_t d = 0; d < s.d; ++d) {
        float kv = load(kj[d]);
        a0 += q0[d] * kv;
        a1 += q1[d] * kv;
        a2 += q2[d] * kv;
        a3 += q3[d] * kv;
      }
      s0[j] = a0;
      s1[j] = a1;
      s2[j] = a2;
      s3[j] = a3;
    }
    // Mask, causal cut, softmax numerators per row.
    float inv[kRows];
    for (int64_t r = 0; r < kRows; ++r) {
      float *sr = scores + r * s.tk;
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
      float m = ninf;
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < end[r]; ++j)
        m = std::max(m, sr[j]);
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < keys; ++j) {
        float p = fastExp(sr[j] - m);
        sr[j] = p;
        sum += p;
      }
      if (m == ninf) // every key masked: NaN, as softmax of -inf gives
        sum = std::numeric_limits<float>::quiet_NaN();
      inv[r] = 1.0f / sum;
    }
    // Weighted sum of value rows.
    std::fill(acc, acc + kRows * s.dv, 0.0f);
    float *o0 = acc, *o1 = o0 + s.dv, *o2 = o1 + s.dv, *o3 = o2 + s.dv;
    for (int64_t j = 0; j < keys; ++j) {
      const T *vj = vh + j * s.dv;
      float p0 = s0[j], p1 = s1[j], p2 = s2[j], p3 = s3[j];
#pragma omp simd
      for (int64_t d = 0; d < s.dv; ++d) {
        float vv = load(vj[d]);
        o0[d] += p0 * vv;
        o1[d] += p1 * vv;
        o2[d] += p2 * vv;
        o3[d] += p3 * vv;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      T *oi = out + ((b * s.h + h) * s.tq + i0 + r) * s.dv;
      for (int64_t d = 0; d < s.dv; ++d)
        oi[d] = store<T>(Compute<T>(acc[r * s.dv + d] * inv[r]));
    }
  }
}

template <typename T, typename M>
CLEAVE_TARGET_AVX2 void attendBlockAvx2(const AttentionShape &s, const T *q,
                                        const T *k, const T *v, const M *mask,
                                        T *out, float scale, bool causal,
                                        int64_t item, Scratch &scratch) {
  attendBlock<T, M>(s, q, k, v, mask, out, scale, causal, item, scratch);
}

template <typename T, typename M>
void attentionTyped(const AttentionShape &s, const T *q, const T *k, const T *v,
                    const M *mask, T *out, float scale, bool causal) {
  const int64_t blocks = (s.tq + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = s.b * s.h * blocks;
  const bool avx2 = useAvx2();
#pragma omp parallel if (items > 1 && !omp_in_parallel())
  {
    Scratch scratch;
    scratch.scores.resize(kRows * s.tk);
    scratch.acc.resize(kRows * s.dv);
    scratch.qrow.resize(kRows * s.d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      if (avx2)
        attendBlockAvx2<T, M>(s, q, k, v, mask, out, scale, causal, item,
                              scratch);
      else
        attendBlock<T, M>(s, q, k, v, mask, out, scale, causal, item, scratch);
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

} // namespace

Status cpu::attentionKernel(const KernelArgs &a) {
  const TensorRef &q = a.in(0), &k = a.in(1), &v = a.in(2);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return a.error("q, k and v must have rank 4 ([batch, heads, seq, dim]), "
                   "got shapes " +
                   shapeString(q.shape) + ", " + shapeString(k.shape) +
                   " and " + shapeString(v.shape));
  CLEAVE_CHECK(a.expectDType(k, q.dtype, "k"));
  CLEAVE_CHECK(a.expectDType(v, q.dtype, "v"));
  CLEAVE_CHECK(a.expectDType(a.out(), q.dtype, "the result"));
  AttentionShape s;
  s.b = q.shape[0];
  s.h = q.shape[1];
  s.tq = q.shape[2];
  s.d = q.shape[3];
  s.hkv = k.shape[1];
  s.tk = k.shape[2];
  s.dv = v.shape[3];
  CLEAVE_CHECK(a.expectShape(k, {s.b, s.hkv, s.tk, s.d}, "k"));
  CLEAVE_CHECK(a.expectShape(v, {s.b, s.hkv, s.tk, s.dv}, "v"));
  if (s.hkv == 0 ? s.h != 0 : s.h % s.hkv != 0)
    return a.error("q has " + std::to_string(s.h) +
                   " heads, which is not a multiple of the " +
                   std::to_string(s.hkv) + " key/value heads");
  CLEAVE_CHECK(a.expectShape(a.out(), {s.b, s.h, s.tq, s.dv}, "the result"));
  double scale;
  int64_t causal;
  CLEAVE_CHECK(a.floatAttr("scale", scale,
                           s.d > 0 ? 1.0 / std::sqrt(double(s.d)) : 1.0));
  CLEAVE_CHECK(a.intAttr("causal", causal, 0));

  const TensorRef noMask;
  const TensorRef &mask = a.has(3) ? a.in(3) : noMask;
  if (mask.data) {
    Shape full{s.b, s.h, s.tq, s.tk};
    if (!broadcastsTo(mask.shape, full))
      return a.error("mask has shape " + shapeString(mask.shape) +
                     ", which does not broadcast to " + shapeString(full));
    if (mask.dtype != DType::Bool && mask.dtype != DType::F32 &&
        mask.dtype != DType::F64 && mask.dtype != DType::F16 &&
        mask.dtype != DType::BF16)
      return a.unsupported(mask.dtype, "mask");
    Shape strides = stridesOf(mask.shape);
    int64_t *dst[4] = {&s.mb, &s.mh, &s.mi, &s.mj};
    size_t lead = 4 - mask.shape.size();
    for (size_t i = 0; i < mask.shape.size(); ++i)
      *dst[lead + i] = mask.shape[i] == 1 ? 0 : strides[i];
  }
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
      auto run = [&](auto maskTag) {
        using M = typename decltype(maskTag)::type;
        attentionTyped<T, M>(s, q.as<T>(), k.as<T>(), v.as<T>(),
                             static_cast<const M *>(mask.data), a.out().as<T>(),
                             float(scale), causal != 0);
        return Status::ok();
      };
      switch (mask.dtype) {
      case DType::Bool:
        return run(Tag<Bool>{});
      case DType::F64:
        return run(Tag<double>{});
      case DType::F16:
        return run(Tag<Half>{});
      case DType::BF16:
        return run(Tag<BFloat16>{});
      default:
        return run(Tag<float>{}); // f32, or no mask
      }
    }
    return Status::ok();
  });
}
