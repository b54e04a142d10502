//===- indexing.cpp - CPU kernels of gather_elements, gather_nd, scatter_nd
//===//
//
// Element- and tuple-indexed lookups (ONNX GatherElements, GatherND,
// ScatterND) and the gradient of gather_elements. Indices are read and
// checked before anything is written: an index out of [-size, size) is an
// error naming it and its position; negative ones count from the end.
// gather_elements_grad sums into a zeroed result one line along the axis at
// a time, in the order of the indices, so the sums do not depend on the
// threads; scatter_nd with a reduction applies the tuples in order too.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/IndexingShape.h"
#include "runtime/cpu/KernelTable.h"

#include <algorithm>
#include <cstring>

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// Every index of `t` as an int64, negative ones normalized; `sizeOf(i)`
/// is the dimension index i addresses. The first one out of range is an
/// error.
template <typename SizeOf>
Status readIndices(const KernelArgs &a, const TensorRef &t, SizeOf sizeOf,
                   std::vector<int64_t> &out) {
  return visitIndex(
      a, t.dtype,
      [&](auto tag) {
        using I = typename decltype(tag)::type;
        const I *p = t.as<I>();
        int64_t n = t.numElements();
        out.resize(n);
        for (int64_t i = 0; i < n; ++i) {
          int64_t size = sizeOf(i), v = int64_t(p[i]);
          if (v < 0)
            v += size;
          if (v < 0 || v >= size)
            return a.error("index " + std::to_string(int64_t(p[i])) +
                           " at position " + std::to_string(i) +
                           " is out of range for a dimension of size " +
                           std::to_string(size));
          out[i] = v;
        }
        return Status::ok();
      },
      "indices");
}

/// The offset in data of element `i` of indices (row-major in `plan.indices`)
/// with its axis coordinate replaced by `index`.
int64_t elementOffset(const ElementsPlan &plan, int64_t i, int64_t index) {
  int64_t offset = 0, stride = 1;
  for (int64_t d = int64_t(plan.data.size()) - 1; d >= 0; --d) {
    int64_t coord = i % plan.indices[d];
    i /= plan.indices[d];
    offset += (d == plan.axis ? index : coord) * stride;
    stride *= plan.data[d];
  }
  return offset;
}

/// The tuple offsets of plan (in elements of data).
std::vector<int64_t> tupleOffsets(const TuplePlan &plan,
                                  const std::vector<int64_t> &indices) {
  std::vector<int64_t> offsets(plan.tuples, 0);
  for (int64_t t = 0; t < plan.tuples; ++t)
    for (int64_t j = 0; j < plan.k; ++j)
      offsets[t] += indices[t * plan.k + j] * plan.strides[j];
  return offsets;
}

template <typename T> inline T combineScatter(const std::string &r, T a, T b) {
  using C = Compute<T>;
  C x = C(load(a)), y = C(load(b));
  if (r == "add")
    return store<T>(C(x + y));
  if (r == "mul")
    return store<T>(C(x * y));
  if (r == "max")
    return store<T>(x > y || y != y ? x : y);
  if (r == "min")
    return store<T>(x < y || y != y ? x : y);
  return b;
}

} // namespace

Status cpu::gatherElementsKernel(const KernelArgs &a) {
  ElementsPlan plan;
  CLEAVE_CHECK(checkGatherElements(a, plan));
  std::vector<int64_t> indices;
  int64_t axisSize = plan.data[plan.axis];
  CLEAVE_CHECK(readIndices(
      a, a.in(1), [&](int64_t) { return axisSize; }, indices));
  size_t bytes = dtypeSize(a.in(0).dtype);
  const char *data = static_cast<const char *>(a.in(0).data);
  char *out = static_cast<char *>(a.out().data);
  parallelRange(
      int64_t(indices.size()), kElementwiseGrain,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          std::memcpy(out + i * bytes,
                      data + elementOffset(plan, i, indices[i]) * bytes, bytes);
      });
  return Status::ok();
}

Status cpu::gatherElementsGradKernel(const KernelArgs &a) {
  ElementsPlan plan;
  CLEAVE_CHECK(checkGatherElementsGrad(a, plan));
  std::vector<int64_t> indices;
  int64_t axisSize = plan.data[plan.axis];
  CLEAVE_CHECK(readIndices(
      a, a.in(1), [&](int64_t) { return axisSize; }, indices));
  return visitFloat(a, a.in(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *dy = a.in(0).as<T>();
    T *out = a.out().as<T>();
    std::memset(static_cast<void *>(out), 0, a.out().numElements() * sizeof(T));
    // One line of indices along the axis at a time: the lines write
    // disjoint elements of the result.
    int64_t count = plan.indices[plan.axis];
    int64_t inner = product(plan.indices, plan.axis + 1);
    int64_t lines = count ? int64_t(indices.size()) / count : 0;
    parallelRange(
        lines,
        std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(count, 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t line = begin; line < end; ++line) {
            int64_t o = line / inner, c = line % inner;
            for (int64_t k = 0; k < count; ++k) {
              int64_t i = (o * count + k) * inner + c;
              T &dst = out[elementOffset(plan, i, indices[i])];
              dst = store<T>(Compute<T>(load(dst)) + Compute<T>(load(dy[i])));
            }
          }
        });
    return Status::ok();
  });
}

Status cpu::gatherNdKernel(const KernelArgs &a) {
  TuplePlan plan;
  CLEAVE_CHECK(checkGatherNd(a, plan));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(readIndices(
      a, a.in(1), [&](int64_t i) { return plan.data[i % plan.k]; }, indices));
  std::vector<int64_t> offsets = tupleOffsets(plan, indices);
  size_t bytes = dtypeSize(a.in(0).dtype) * plan.slice;
  const char *data = static_cast<const char *>(a.in(0).data);
  char *out = static_cast<char *>(a.out().data);
  parallelRange(plan.tuples,
                std::max<int64_t>(1, kElementwiseGrain /
                                         std::max<int64_t>(plan.slice, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t t = begin; t < end; ++t)
                    std::memcpy(out + t * bytes,
                                data + offsets[t] * dtypeSize(a.in(0).dtype),
                                bytes);
                });
  return Status::ok();
}

Status cpu::scatterNdKernel(const KernelArgs &a) {
  TuplePlan plan;
  CLEAVE_CHECK(checkScatterNd(a, plan));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(readIndices(
      a, a.in(1), [&](int64_t i) { return plan.data[i % plan.k]; }, indices));
  std::vector<int64_t> offsets = tupleOffsets(plan, indices);
  size_t elementBytes = dtypeSize(a.in(0).dtype);
  if (a.out().data != a.in(0).data)
    std::memcpy(a.out().data, a.in(0).data,
                a.out().numElements() * elementBytes);
  return visitAny(
      a, a.in(0).dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *updates = a.in(2).as<T>();
        T *out = a.out().as<T>();
        const std::string &r = plan.reduction;
        // The tuples in order, each slice's elements threaded: a later
        // tuple overwrites (or combines with) an earlier one's result.
        parallelRange(
            plan.slice, kElementwiseGrain, [&](int64_t begin, int64_t end) {
              for (int64_t t = 0; t < plan.tuples; ++t)
                for (int64_t c = begin; c < end; ++c) {
                  T &dst = out[offsets[t] + c];
                  T u = updates[t * plan.slice + c];
                  dst = r == "none" ? u : combineScatter<T>(r, dst, u);
                }
            });
        return Status::ok();
      },
      "data");
}
