//===- IndexingShape.h - the indexed lookups' shape checks -----*- C++ -*-===//
//
// What the CPU (indexing.cpp) and CUDA (cuda/indexing.cu) kernels of
// gather_elements, gather_elements_grad, gather_nd and scatter_nd share,
// so both say the same about operands that do not fit. Reading and
// checking the index values is each backend's business.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_OPS_INDEXINGSHAPE_H
#define CLEAVE_RUNTIME_OPS_INDEXINGSHAPE_H

#include "runtime/ops/KernelArgs.h"

namespace cleave::runtime::ops {

/// gather_elements (data, indices) -> indices' shape of data's type, and
/// gather_elements_grad (dy, indices) -> data's shape of dy's type, with dy
/// of indices' shape: indices has data's rank and is no larger off the
/// axis (attribute, in range).
struct ElementsPlan {
  Shape data, indices;
  int64_t axis = 0;
};
Status checkGatherElements(const KernelArgs &a, ElementsPlan &plan);
Status checkGatherElementsGrad(const KernelArgs &a, ElementsPlan &plan);

/// gather_nd (data, indices [..., k]) -> indices.shape[:-1] +
/// data.shape[k:] of data's type, and scatter_nd (data, indices, updates
/// of that shape) -> data's type, with its reduction attribute (none, add,
/// mul, max or min; default none). Tuple t addresses the `slice`
/// contiguous elements at sum_j indices[t, j] * strides[j].
struct TuplePlan {
  Shape data;
  int64_t tuples = 0, k = 0, slice = 1;
  std::vector<int64_t> strides; // of data's first k dimensions, in elements
  std::string reduction = "none";
};
Status checkGatherNd(const KernelArgs &a, TuplePlan &plan);
Status checkScatterNd(const KernelArgs &a, TuplePlan &plan);

} // namespace cleave::runtime::ops

#endif // CLEAVE_RUNTIME_OPS_INDEXINGSHAPE_H
