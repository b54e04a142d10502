//===- LookupShape.h - the lookups' shape checks ---------------*- C++ -*-===//
//
// What the CPU (lookup.cpp) and CUDA (cuda/lookup.cu) kernels of embedding,
// gather and their gradients share, so both say the same about operands
// that do not fit. Reading and checking the id values is each backend's
// business.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_LOOKUPSHAPE_H
#define CLEAVE_RUNTIME_OPS_LOOKUPSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// embedding (table [vocabulary, dim], ids) -> [ids..., dim] of the
/// table's type.
Status checkEmbedding(const KernelArgs &a);

/// gather (data, indices) -> data.shape[:axis] + indices.shape +
/// data.shape[axis + 1:] of data's type, axis (default 0) in range. data
/// is [outer, axisSize, inner] around axis.
Status checkGather(const KernelArgs &a, int64_t &outer, int64_t &axisSize,
                   int64_t &inner);

/// embedding_grad (dy [ids..., dim], ids) -> [vocabulary, dim] of dy's
/// type; `paddingRow` is its padding_idx attribute (a row of the result
/// that stays zero), or -1 when it has none.
Status checkEmbeddingGrad(const KernelArgs &a, int64_t &paddingRow);

/// gather_grad (dy, indices) -> a result like gather's data, dy of the
/// shape gather gives it, axis (default 0) in range. The result is
/// [outer, axisSize, inner] around axis.
Status checkGatherGrad(const KernelArgs &a, int64_t &outer, int64_t &axisSize,
                       int64_t &inner);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_LOOKUPSHAPE_H
