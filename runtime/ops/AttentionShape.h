//===- AttentionShape.h - operand checks of attention kernels --*- C++ -*-===//
//
// What the CPU and CUDA kernels of attention and attention_grad share: the
// sizes of q [B, H, Tq, D], k [B, Hkv, Tk, D] and v [B, Hkv, Tk, Dv], the
// mask's strides over [B, H, Tq, Tk], and checkAttention and
// checkAttentionGrad, which read and check them (AttentionShape.cpp), so
// that every backend gives the same errors.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_ATTENTIONSHAPE_H
#define CLEAVE_RUNTIME_OPS_ATTENTIONSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

struct AttentionShape {
  int64_t b, h, hkv, tq, tk, d, dv;
  // The mask's strides over [B, H, Tq, Tk] (0 where it broadcasts).
  int64_t mb = 0, mh = 0, mi = 0, mj = 0;
};

/// The checks attention and its gradient share, on q, k, v and the mask
/// at operands first, first + 1, ...: shapes, element types, the scale
/// (default 1 / sqrt(D)) and causal attributes, and the mask's strides.
/// `mask` is null when the optional mask is absent.
Status checkAttention(const KernelArgs &a, size_t first, AttentionShape &s,
                      double &scale, int64_t &causal, const TensorRef *&mask);

/// attention_grad's checks: checkAttention on q, k, v [, mask] (operands 1
/// to 4), then dy (operand 0) against [B, H, Tq, Dv] and the results dq,
/// dk, dv against q, k, v.
Status checkAttentionGrad(const KernelArgs &a, AttentionShape &s, double &scale,
                          int64_t &causal, const TensorRef *&mask);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_ATTENTIONSHAPE_H
