//===- indexing.cu - CUDA kernels of gather_elements, gather_nd, scatter_nd
//===//
//
// The CUDA side of runtime/cpu/indexing.cpp, with its shape checks
// (runtime/ops/IndexingShape.h). gather_elements and gather_nd only move
// bytes, so they take every element type; an index out of [-size, size)
// gives 0xff bytes there (NaN in every float type), as cuda/lookup.cu's
// gather does, because the device cannot report it without a sync.
// gather_elements_grad (f32, bf16, f16) is one thread per line of the
// indices along the axis, adding its elements in order into a zeroed
// result (lines write disjoint elements: deterministic, the CPU's order);
// scatter_nd copies data, then one thread per slice element applies the
// tuples in order (reduction none: one thread per tuple and element, as
// ONNX leaves repeated tuples undefined); out-of-range tuples write
// nothing. Ranks up to 8.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/IndexingShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Tag;

namespace {

constexpr int kMaxRank = 8;

/// gather_elements' shapes by value for the kernels.
struct ElementDims {
  int rank, axis;
  int64_t data[kMaxRank], indices[kMaxRank];
};

Status elementDims(const KernelArgs &a, const ops::ElementsPlan &p,
                   ElementDims &dims) {
  if (p.data.size() > size_t(kMaxRank))
    return a.error("rank " + std::to_string(p.data.size()) +
                   " is more than this CUDA kernel's " +
                   std::to_string(kMaxRank));
  dims.rank = int(p.data.size());
  dims.axis = int(p.axis);
  for (int d = 0; d < dims.rank; ++d) {
    dims.data[d] = p.data[d];
    dims.indices[d] = p.indices[d];
  }
  return Status::ok();
}

/// The offset in data of element `i` of indices with its axis coordinate
/// replaced by `index`.
__device__ __forceinline__ int64_t elementOffset(const ElementDims &dims,
                                                 int64_t i, int64_t index) {
  int64_t offset = 0, stride = 1;
  for (int d = dims.rank - 1; d >= 0; --d) {
    int64_t coord = i % dims.indices[d];
    i /= dims.indices[d];
    offset += (d == dims.axis ? index : coord) * stride;
    stride *= dims.data[d];
  }
  return offset;
}

template <typename W, typename I>
__global__ void
gatherElements(const W *__restrict__ data, const I *__restrict__ indices,
               W *__restrict__ out, int64_t n, ElementDims dims) {
  int64_t axisSize = dims.data[dims.axis];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t id = int64_t(indices[i]);
    if (id < 0)
      id += axisSize;
    if (id < 0 || id >= axisSize)
      memset(&out[i], 0xff, sizeof(W));
    else
      out[i] = data[elementOffset(dims, i, id)];
  }
}

/// One thread per line of indices along the axis: out[line's elements]
/// += dy in the order of the line (float accumulation for 16-bit types).
template <typename T, typename I>
__global__ void
gatherElementsGrad(const T *__restrict__ dy, const I *__restrict__ indices,
                   T *__restrict__ out, int64_t lines, int64_t count,
                   int64_t inner, ElementDims dims) {
  int64_t axisSize = dims.data[dims.axis];
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       line < lines; line += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = line / inner, c = line - o * inner;
    for (int64_t k = 0; k < count; ++k) {
      int64_t i = (o * count + k) * inner + c;
      int64_t id = int64_t(indices[i]);
      if (id < 0)
        id += axisSize;
      if (id < 0 || id >= axisSize)
        continue;
      T &dst = out[elementOffset(dims, i, id)];
      dst = fromFloat<T>(toFloat(dst) + toFloat(dy[i]));
    }
  }
}

/// The tuple's offset in data, or -1 when an entry is out of range.
template <typename I>
__device__ __forceinline__ int64_t tupleOffset(const I *tuple, int64_t k,
                                               const int64_t *sizes,
                                               const int64_t *strides) {
  int64_t offset = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t v = int64_t(tuple[j]);
    if (v < 0)
      v += sizes[j];
    if (v < 0 || v >= sizes[j])
      return -1;
    offset += v * strides[j];
  }
  return offset;
}

struct TupleDims {
  int64_t k, tuples, slice;
  int64_t sizes[kMaxRank], strides[kMaxRank];
};

Status tupleDims(const KernelArgs &a, const ops::TuplePlan &p,
                 TupleDims &dims) {
  if (p.k > kMaxRank)
    return a.error("index tuples of " + std::to_string(p.k) +
                   " entries are more than this CUDA kernel's " +
                   std::to_string(kMaxRank));
  dims.k = p.k;
  dims.tuples = p.tuples;
  dims.slice = p.slice;
  for (int64_t j = 0; j < p.k; ++j) {
    dims.sizes[j] = p.data[j];
    dims.strides[j] = p.strides[j];
  }
  return Status::ok();
}

template <typename W, typename I>
__global__ void gatherNd(const W *__restrict__ data,
                         const I *__restrict__ indices, W *__restrict__ out,
                         TupleDims dims) {
  int64_t n = dims.tuples * dims.slice;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = e / dims.slice, c = e - t * dims.slice;
    int64_t offset =
        tupleOffset(indices + t * dims.k, dims.k, dims.sizes, dims.strides);
    if (offset < 0)
      memset(&out[e], 0xff, sizeof(W));
    else
      out[e] = data[offset + c];
  }
}

template <typename T>
constexpr bool isDeviceFloat =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> ||
    std::is_same_v<T, __half>;

/// Float types compute in float, integers in their own type.
template <typename T> __device__ __forceinline__ auto toFloatOrSelf(T v) {
  if constexpr (isDeviceFloat<T>)
    return toFloat(v);
  else
    return v;
}
template <typename T, typename V>
__device__ __forceinline__ T fromFloatOrSelf(V v) {
  if constexpr (isDeviceFloat<T>)
    return fromFloat<T>(v);
  else
    return T(v);
}

enum class Combine { None, Add, Mul, Max, Min };

template <typename T, Combine R>
__device__ __forceinline__ T combineScatter(T a, T b) {
  if constexpr (R == Combine::None) {
    return b;
  } else {
    auto x = toFloatOrSelf(a), y = toFloatOrSelf(b);
    decltype(x) r;
    if constexpr (R == Combine::Add)
      r = x + y;
    else if constexpr (R == Combine::Mul)
      r = x * y;
    else if constexpr (R == Combine::Max)
      r = (x > y || y != y) ? x : y;
    else
      r = (x < y || y != y) ? x : y;
    return fromFloatOrSelf<T>(r);
  }
}

/// reduction none: one thread per (tuple, element).
template <typename T, typename I>
__global__ void scatterNdWrite(const I *__restrict__ indices,
                               const T *__restrict__ updates,
                               T *__restrict__ out, TupleDims dims) {
  int64_t n = dims.tuples * dims.slice;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = e / dims.slice, c = e - t * dims.slice;
    int64_t offset =
        tupleOffset(indices + t * dims.k, dims.k, dims.sizes, dims.strides);
    if (offset >= 0)
      out[offset + c] = updates[e];
  }
}

/// A reduction: one thread per slice element, the tuples in order.
template <typename T, typename I, Combine R>
__global__ void scatterNdCombine(const I *__restrict__ indices,
                                 const T *__restrict__ updates,
                                 T *__restrict__ out, TupleDims dims) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       c < dims.slice; c += int64_t(gridDim.x) * blockDim.x)
    for (int64_t t = 0; t < dims.tuples; ++t) {
      int64_t offset =
          tupleOffset(indices + t * dims.k, dims.k, dims.sizes, dims.strides);
      if (offset >= 0)
        out[offset + c] =
            combineScatter<T, R>(out[offset + c], updates[t * dims.slice + c]);
    }
}

/// Calls f(Tag<W>{}) with an unsigned word type of the element's size.
template <typename F>
Status visitWord(const KernelArgs &a, DType dtype, F &&f, const char *what) {
  switch (dtypeSize(dtype)) {
  case 1:
    return f(Tag<uint8_t>{});
  case 2:
    return f(Tag<uint16_t>{});
  case 4:
    return f(Tag<uint32_t>{});
  case 8:
    return f(Tag<uint64_t>{});
  default:
    return a.unsupported(dtype, what);
  }
}

} // namespace

namespace cleave::runtime::cuda {

Status gatherElementsKernel(const KernelArgs &a, cudaStream_t stream) {
  ops::ElementsPlan plan;
  CLEAVE_CHECK(ops::checkGatherElements(a, plan));
  ElementDims dims;
  CLEAVE_CHECK(elementDims(a, plan, dims));
  int64_t n = a.out().numElements();
  if (n == 0)
    return Status::ok();
  return visitWord(
      a, a.in(0).dtype,
      [&](auto word) {
        using W = typename decltype(word)::type;
        return ops::visitIndex(
            a, a.in(1).dtype,
            [&](auto tag) -> Status {
              using I = typename decltype(tag)::type;
              gatherElements<W, I><<<blocksFor(n), kBlockThreads, 0, stream>>>(
                  a.in(0).as<W>(), a.in(1).as<I>(), a.out().as<W>(), n, dims);
              CLEAVE_CUDA_CHECK(cudaGetLastError());
              return Status::ok();
            },
            "indices");
      },
      "data");
}

Status gatherElementsGradKernel(const KernelArgs &a, cudaStream_t stream) {
  ops::ElementsPlan plan;
  CLEAVE_CHECK(ops::checkGatherElementsGrad(a, plan));
  ElementDims dims;
  CLEAVE_CHECK(elementDims(a, plan, dims));
  int64_t count = plan.indices[plan.axis];
  int64_t inner = ops::product(plan.indices, plan.axis + 1);
  int64_t n = a.in(1).numElements();
  int64_t lines = count ? n / count : 0;
  return visitDeviceFloat(
      a, a.in(0).dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        CLEAVE_CUDA_CHECK(cudaMemsetAsync(
            a.out().data, 0, a.out().numElements() * sizeof(T), stream));
        if (lines == 0)
          return Status::ok();
        return ops::visitIndex(
            a, a.in(1).dtype,
            [&](auto itag) -> Status {
              using I = typename decltype(itag)::type;
              gatherElementsGrad<T, I>
                  <<<blocksFor(lines), kBlockThreads, 0, stream>>>(
                      a.in(0).as<T>(), a.in(1).as<I>(), a.out().as<T>(), lines,
                      count, inner, dims);
              CLEAVE_CUDA_CHECK(cudaGetLastError());
              return Status::ok();
            },
            "indices");
      },
      "dy");
}

Status gatherNdKernel(const KernelArgs &a, cudaStream_t stream) {
  ops::TuplePlan plan;
  CLEAVE_CHECK(ops::checkGatherNd(a, plan));
  TupleDims dims;
  CLEAVE_CHECK(tupleDims(a, plan, dims));
  int64_t n = plan.tuples * plan.slice;
  if (n == 0)
    return Status::ok();
  return visitWord(
      a, a.in(0).dtype,
      [&](auto word) {
        using W = typename decltype(word)::type;
        return ops::visitIndex(
            a, a.in(1).dtype,
            [&](auto tag) -> Status {
              using I = typename decltype(tag)::type;
              gatherNd<W, I><<<blocksFor(n), kBlockThreads, 0, stream>>>(
                  a.in(0).as<W>(), a.in(1).as<I>(), a.out().as<W>(), dims);
              CLEAVE_CUDA_CHECK(cudaGetLastError());
              return Status::ok();
            },
            "indices");
      },
      "data");
}

Status scatterNdKernel(const KernelArgs &a, cudaStream_t stream) {
  ops::TuplePlan plan;
  CLEAVE_CHECK(ops::checkScatterNd(a, plan));
  TupleDims dims;
  CLEAVE_CHECK(tupleDims(a, plan, dims));
  size_t bytes = a.out().numElements() * dtypeSize(a.in(0).dtype);
  if (a.out().data != a.in(0).data && bytes)
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(a.out().data, a.in(0).data, bytes,
                                      cudaMemcpyDeviceToDevice, stream));
  int64_t n = plan.tuples * plan.slice;
  if (n == 0)
    return Status::ok();
  auto launch = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return ops::visitIndex(
        a, a.in(1).dtype,
        [&](auto itag) -> Status {
          using I = typename decltype(itag)::type;
          const I *idx = a.in(1).as<I>();
          const T *upd = a.in(2).as<T>();
          T *out = a.out().as<T>();
          const std::string &r = plan.reduction;
          if (r == "none")
            scatterNdWrite<T, I><<<blocksFor(n), kBlockThreads, 0, stream>>>(
                idx, upd, out, dims);
          else if (r == "add")
            scatterNdCombine<T, I, Combine::Add>
                <<<blocksFor(plan.slice), kBlockThreads, 0, stream>>>(
                    idx, upd, out, dims);
          else if (r == "mul")
            scatterNdCombine<T, I, Combine::Mul>
                <<<blocksFor(plan.slice), kBlockThreads, 0, stream>>>(
                    idx, upd, out, dims);
          else if (r == "max")
            scatterNdCombine<T, I, Combine::Max>
                <<<blocksFor(plan.slice), kBlockThreads, 0, stream>>>(
                    idx, upd, out, dims);
          else
            scatterNdCombine<T, I, Combine::Min>
                <<<blocksFor(plan.slice), kBlockThreads, 0, stream>>>(
                    idx, upd, out, dims);
          CLEAVE_CUDA_CHECK(cudaGetLastError());
          return Status::ok();
        },
        "indices");
  };
  switch (a.in(0).dtype) {
  case DType::F32:
    return launch(Tag<float>{});
  case DType::BF16:
    return launch(Tag<__nv_bfloat16>{});
  case DType::F16:
    return launch(Tag<__half>{});
  case DType::I64:
    return launch(Tag<int64_t>{});
  case DType::I32:
    return launch(Tag<int32_t>{});
  case DType::Bool:
    return launch(Tag<uint8_t>{});
  default:
    return a.error(std::string("no CUDA kernel for element type ") +
                   dtypeName(a.in(0).dtype) +
                   " (data); this CUDA kernel takes f32, bf16, f16, i64, i32 "
                   "and bool");
  }
}

} // namespace cleave::runtime::cuda
