//===- MovementShape.cpp - operand checks every backend shares ------------===//
//
// The checks of reshape, transpose, broadcast_to, slice, slice_grad and
// concat. Shared by the CPU (runtime/cpu/movement.cpp) and CUDA kernels of
// these ops so both refuse the same operands with the same words
// (MovementShape.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/MovementShape.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::slicePlan(const KernelArgs &a, const Shape &shape, Shape &expected,
                      Shape &steps, int64_t &base) {
  std::vector<int64_t> start, limit, step;
  CLEAVE_CHECK(a.intsAttr("start", start));
  CLEAVE_CHECK(a.intsAttr("limit", limit));
  CLEAVE_CHECK(a.intsAttr("step", step));
  int64_t rank = int64_t(shape.size());
  if (int64_t(start.size()) != rank || int64_t(limit.size()) != rank ||
      int64_t(step.size()) != rank)
    return a.error(
        "start, limit and step need one entry per dimension of "
        "x (" +
        std::to_string(rank) + "), got " + std::to_string(start.size()) + ", " +
        std::to_string(limit.size()) + " and " + std::to_string(step.size()));
  Shape strides = stridesOf(shape);
  expected.assign(rank, 0);
  steps.assign(rank, 0);
  base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t s = start[d], l = limit[d], k = step[d], dim = shape[d];
    if (k == 0)
      return a.error("step of dimension " + std::to_string(d) + " is 0");
    int64_t extent = k > 0 ? l - s : s - l;
    int64_t n = extent <= 0 ? 0 : (extent + std::abs(k) - 1) / std::abs(k);
    // Every index read, s and s + (n - 1) k, must lie in the dimension.
    if (n > 0 &&
        (s < 0 || s >= dim || s + (n - 1) * k < 0 || s + (n - 1) * k >= dim))
      return a.error("dimension " + std::to_string(d) + " of size " +
                     std::to_string(dim) + " cannot be sliced from " +
                     std::to_string(s) + " to " + std::to_string(l) + " by " +
                     std::to_string(k));
    expected[d] = n;
    if (n > 0)
      base += s * strides[d];
    steps[d] = k * strides[d];
  }
  return Status::ok();
}

Status ops::checkReshape(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  if (a.out().numElements() != x.numElements())
    return a.error("cannot reshape " + shapeString(x.shape) + " (" +
                   std::to_string(x.numElements()) + " elements) to " +
                   shapeString(a.out().shape) + " (" +
                   std::to_string(a.out().numElements()) + " elements)");
  return Status::ok();
}

Status ops::transposePlan(const KernelArgs &a, Shape &inDims, Shape &newPerm,
                          bool &identity) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  std::vector<int64_t> perm;
  CLEAVE_CHECK(a.intsAttr("perm", perm));
  int64_t rank = x.rank();
  std::vector<bool> seen(rank, false);
  bool valid = int64_t(perm.size()) == rank;
  for (size_t k = 0; valid && k < perm.size(); ++k) {
    valid = perm[k] >= 0 && perm[k] < rank && !seen[perm[k]];
    if (valid)
      seen[perm[k]] = true;
  }
  if (!valid) {
    std::string text;
    for (size_t k = 0; k < perm.size(); ++k)
      text += (k ? ", " : "") + std::to_string(perm[k]);
    return a.error("perm [" + text + "] is not a permutation of the " +
                   std::to_string(rank) + " dimensions of x");
  }
  Shape expected(rank);
  for (int64_t k = 0; k < rank; ++k)
    expected[k] = x.shape[perm[k]];
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));

  // Drop dimensions of size 1 and merge source dimensions that stay
  // neighbours in the result.
  std::vector<int64_t> keptIndex(rank, -1);
  Shape dims;
  for (int64_t d = 0; d < rank; ++d)
    if (x.shape[d] != 1) {
      keptIndex[d] = int64_t(dims.size());
      dims.push_back(x.shape[d]);
    }
  Shape p;
  for (int64_t k = 0; k < rank; ++k)
    if (keptIndex[perm[k]] >= 0)
      p.push_back(keptIndex[perm[k]]);
  // Runs of consecutive source dimensions in p become one dimension.
  Shape groupDims;
  std::vector<int64_t> groupFirst; // first source dim of each group, in p order
  for (size_t k = 0; k < p.size(); ++k) {
    if (k > 0 && p[k] == p[k - 1] + 1) {
      groupDims.back() *= dims[p[k]];
    } else {
      groupDims.push_back(dims[p[k]]);
      groupFirst.push_back(p[k]);
    }
  }
  // Source order of the groups: sort group ids by their first source dim.
  size_t groups = groupDims.size();
  std::vector<int64_t> order(groups);
  for (size_t g = 0; g < groups; ++g)
    order[g] = int64_t(g);
  std::sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
    return groupFirst[l] < groupFirst[r];
  });
  inDims.assign(groups, 0);
  newPerm.assign(groups, 0);
  for (size_t s = 0; s < groups; ++s) {
    inDims[s] = groupDims[order[s]];
    newPerm[order[s]] = int64_t(s);
  }
  identity = true;
  for (size_t k = 0; k < groups; ++k)
    identity &= newPerm[k] == int64_t(k);
  return Status::ok();
}

Status ops::broadcastStrides(const KernelArgs &a, Shape &strides) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  if (!broadcastsTo(x.shape, a.out().shape))
    return a.error("x of shape " + shapeString(x.shape) +
                   " does not broadcast to the result shape " +
                   shapeString(a.out().shape));
  const Shape &out = a.out().shape;
  Shape own = stridesOf(x.shape);
  strides.assign(out.size(), 0);
  size_t lead = out.size() - x.shape.size();
  for (size_t i = 0; i < x.shape.size(); ++i)
    strides[lead + i] = x.shape[i] == 1 ? 0 : own[i];
  return Status::ok();
}

Status ops::concatAxis(const KernelArgs &a, int64_t &axis) {
  const TensorRef &out = a.out();
  CLEAVE_CHECK(a.intAttr("axis", axis));
  int64_t rank = out.rank();
  if (rank == 0)
    return a.error("the result must have rank 1 or more");
  CLEAVE_CHECK(normalizeAxis(a, axis, rank));
  int64_t total = 0;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const TensorRef &t = a.in(i);
    std::string what = "operand " + std::to_string(i);
    CLEAVE_CHECK(a.expectDType(t, out.dtype, what.c_str()));
    Shape expected = out.shape;
    expected[axis] = t.rank() == rank ? t.shape[axis] : 0;
    CLEAVE_CHECK(a.expectShape(t, expected, what.c_str()));
    total += t.shape[axis];
  }
  if (total != out.shape[axis])
    return a.error("the operands' sizes along axis " + std::to_string(axis) +
                   " add up to " + std::to_string(total) +
                   ", but the result has " + std::to_string(out.shape[axis]));
  return Status::ok();
}
