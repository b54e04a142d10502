//===- AttentionShape.cpp - operand checks every backend shares -----------===//
//
// The checks of attention and attention_grad. Shared by the CPU
// (runtime/cpu/attention.cpp) and CUDA kernels of these ops so both refuse
// the same operands with the same words (AttentionShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/AttentionShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::checkAttention(const KernelArgs &a, size_t first, AttentionShape &s,
                           double &scale, int64_t &causal,
                           const TensorRef *&mask) {
  const TensorRef &q = a.in(first), &k = a.in(first + 1), &v = a.in(first + 2);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return a.error("q, k and v must have rank 4 ([batch, heads, seq, dim]), "
                   "got shapes " +
                   shapeString(q.shape) + ", " + shapeString(k.shape) +
                   " and " + shapeString(v.shape));
  CLEAVE_CHECK(a.expectDType(k, q.dtype, "k"));
  CLEAVE_CHECK(a.expectDType(v, q.dtype, "v"));
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
  CLEAVE_CHECK(a.floatAttr("scale", scale,
                           s.d > 0 ? 1.0 / std::sqrt(double(s.d)) : 1.0));
  CLEAVE_CHECK(a.intAttr("causal", causal, 0));

  mask = a.has(first + 3) ? &a.in(first + 3) : nullptr;
  if (mask) {
    Shape full{s.b, s.h, s.tq, s.tk};
    if (!broadcastsTo(mask->shape, full))
      return a.error("mask has shape " + shapeString(mask->shape) +
                     ", which does not broadcast to " + shapeString(full));
    if (mask->dtype != DType::Bool && mask->dtype != DType::F32 &&
        mask->dtype != DType::F64 && mask->dtype != DType::F16 &&
        mask->dtype != DType::BF16)
      return a.unsupported(mask->dtype, "mask");
    Shape strides = stridesOf(mask->shape);
    int64_t *dst[4] = {&s.mb, &s.mh, &s.mi, &s.mj};
    size_t lead = 4 - mask->shape.size();
    for (size_t i = 0; i < mask->shape.size(); ++i)
      *dst[lead + i] = mask->shape[i] == 1 ? 0 : strides[i];
  }
  return Status::ok();
}

Status ops::checkAttentionGrad(const KernelArgs &a, AttentionShape &s,
                               double &scale, int64_t &causal,
                               const TensorRef *&mask) {
  CLEAVE_CHECK(checkAttention(a, 1, s, scale, causal, mask));
  const TensorRef &dy = a.in(0), &q = a.in(1), &k = a.in(2), &v = a.in(3);
  CLEAVE_CHECK(a.expectDType(dy, q.dtype, "dy"));
  CLEAVE_CHECK(a.expectShape(dy, {s.b, s.h, s.tq, s.dv}, "dy"));
  const char *names[] = {"dq", "dk", "dv"};
  const TensorRef *like[] = {&q, &k, &v};
  for (size_t i = 0; i < 3; ++i) {
    CLEAVE_CHECK(a.expectDType(a.out(i), q.dtype, names[i]));
    CLEAVE_CHECK(a.expectShape(a.out(i), like[i]->shape, names[i]));
  }
  return Status::ok();
}
