//===- lookup.cpp - CPU kernels of embedding, gather and their gradients --===//
//
// Both copy whole rows picked by integer ids; they only move bytes, so they
// work for every element type. Ids are checked before anything is copied:
// an id out of range is an error naming the id and where it was found.
// Negative ids count from the end, as ONNX Gather's do. Their gradients
// (embedding_grad, gather_grad) scatter-add rows of dy into a zeroed
// result, bucketed by id so that every result row has one writer;
// embedding_grad's `padding_idx` row (nn.Embedding's) stays zero.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"
#include "runtime/ops/LookupShape.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

/// Normalizes every index into [0, size), or reports the first that is
/// not in [-size, size).
template <typename I>
Status readIndices(const KernelArgs &a, const TensorRef &t, int64_t size,
                   std::vector<int64_t> &indices) {
  const I *p = t.as<I>();
  int64_t n = t.numElements();
  indices.resize(n);
  int64_t bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = int64_t(p[i]);
    if (v < 0)
      v += size;
    if ((v < 0 || v >= size) && bad < 0)
      bad = i;
    indices[i] = v;
  }
  if (bad >= 0)
    return a.error("index " + std::to_string(int64_t(p[bad])) +
                   " at position " + std::to_string(bad) +
                   " is out of range for a dimension of size " +
                   std::to_string(size));
  return Status::ok();
}

Status indicesOf(const KernelArgs &a, const TensorRef &t, int64_t size,
                 std::vector<int64_t> &indices, const char *what) {
  return visitIndex(
      a, t.dtype,
      [&](auto tag) {
        using I = typename decltype(tag)::type;
        return readIndices<I>(a, t, size, indices);
      },
      what);
}

/// out[o, j, :] = data[o, indices[j], :] for rows of `inner` bytes.
void gatherRows(const char *data, char *out, int64_t outer, int64_t axisSize,
                const std::vector<int64_t> &indices, int64_t innerBytes) {
  int64_t count = int64_t(indices.size());
  parallelRange(outer * count,
                std::max<int64_t>(1, (kElementwiseGrain * 4) /
                                         std::max<int64_t>(innerBytes, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t item = begin; item < end; ++item) {
                    int64_t o = item / count, j = item % count;
                    std::memcpy(out + item * innerBytes,
                                data + (o * axisSize + indices[j]) * innerBytes,
                                innerBytes);
                  }
                });
}

/// The gradient of gatherRows: out[o, a, :] = the sum of dy[o, j, :] over
/// the j with indices[j] == a, in increasing j; zero where no index picks
/// a. The positions are bucketed by index first (a counting sort), so each
/// result row is written by one thread and summed in a fixed order: the
/// result does not depend on the threads. Row `skip` (if not negative)
/// is zero whatever picks it.
template <typename T>
void scatterAddRows(const T *dy, T *out, int64_t outer, int64_t axisSize,
                    const std::vector<int64_t> &indices, int64_t inner,
                    int64_t skip = -1) {
  using C = Compute<T>;
  int64_t count = int64_t(indices.size());
  std::vector<int64_t> first(axisSize + 1, 0), order(count);
  for (int64_t j = 0; j < count; ++j)
    ++first[indices[j] + 1];
  for (int64_t i = 0; i < axisSize; ++i)
    first[i + 1] += first[i];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t j = 0; j < count; ++j)
    order[next[indices[j]]++] = j;
  parallelRange(
      outer * axisSize,
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)),
      [&](int64_t begin, int64_t end) {
        std::vector<C> sum(std::is_same_v<T, C> ? 0 : inner);
        for (int64_t item = begin; item < end; ++item) {
          int64_t o = item / axisSize, i = item % axisSize;
          T *dst = out + item * inner;
          if (first[i] == first[i + 1] || i == skip) {
            std::memset(static_cast<void *>(dst), 0, inner * sizeof(T));
            continue;
          }
          const T *src = dy + o * count * inner;
          if constexpr (std::is_same_v<T, C>) {
            std::memcpy(dst, src + order[first[i]] * inner, inner * sizeof(T));
            for (int64_t n = first[i] + 1; n < first[i + 1]; ++n) {
              const T *row = src + order[n] * inner;
              for (int64_t c = 0; c < inner; ++c)
                dst[c] += row[c];
            }
          } else {
            std::fill(sum.begin(), sum.end(), C(0));
            for (int64_t n = first[i]; n < first[i + 1]; ++n) {
              const T *row = src + order[n] * inner;
              for (int64_t c = 0; c < inner; ++c)
                sum[c] += C(load(row[c]));
            }
            for (int64_t c = 0; c < inner; ++c)
              dst[c] = store<T>(sum[c]);
          }
        }
      });
}

} // namespace

Status cpu::embeddingKernel(const KernelArgs &a) {
  const TensorRef &table = a.in(0), &ids = a.in(1);
  CLEAVE_CHECK(checkEmbedding(a));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(indicesOf(a, ids, table.shape[0], indices, "ids"));
  gatherRows(static_cast<const char *>(table.data),
             static_cast<char *>(a.out().data), 1, table.shape[0], indices,
             table.shape[1] * int64_t(dtypeSize(table.dtype)));
  return Status::ok();
}

Status cpu::gatherKernel(const KernelArgs &a) {
  const TensorRef &data = a.in(0), &indicesRef = a.in(1);
  int64_t outer, axisSize, inner;
  CLEAVE_CHECK(checkGather(a, outer, axisSize, inner));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(indicesOf(a, indicesRef, axisSize, indices, "indices"));
  gatherRows(static_cast<const char *>(data.data),
             static_cast<char *>(a.out().data), outer, axisSize, indices,
             inner * int64_t(dtypeSize(data.dtype)));
  return Status::ok();
}

Status cpu::embeddingGradKernel(const KernelArgs &a) {
  const TensorRef &dy = a.in(0), &ids = a.in(1), &out = a.out();
  int64_t paddingRow;
  CLEAVE_CHECK(checkEmbeddingGrad(a, paddingRow));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(indicesOf(a, ids, out.shape[0], indices, "ids"));
  return visitFloat(a, dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatterAddRows(dy.as<T>(), out.as<T>(), 1, out.shape[0], indices,
                   out.shape[1], paddingRow);
    return Status::ok();
  });
}

Status cpu::gatherGradKernel(const KernelArgs &a) {
  const TensorRef &dy = a.in(0), &indicesRef = a.in(1), &out = a.out();
  int64_t outer, axisSize, inner;
  CLEAVE_CHECK(checkGatherGrad(a, outer, axisSize, inner));
  std::vector<int64_t> indices;
  CLEAVE_CHECK(indicesOf(a, indicesRef, axisSize, indices, "indices"));
  return visitFloat(a, dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatterAddRows(dy.as<T>(), out.as<T>(), outer, axisSize, indices, inner);
    return Status::ok();
  });
}
