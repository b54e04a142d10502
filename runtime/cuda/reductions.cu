//===- reductions.cu - CUDA kernels of reduce_sum/mean/max/min ------------===//
//
// The CUDA side of runtime/cpu/reductions.cpp, with its checks of the axes
// and keepdims attributes (runtime/ops/ReductionShape.h). Element types:
// f32, bf16 and f16 (accumulated in float, where the CPU accumulates sums
// in double), i64 and i32 (sums in int64, wrapping; an integer mean
// truncates toward zero), and bool for reduce_max and reduce_min (any and
// all, on the bytes). max and min propagate NaN as the CPU's do. A
// reduction over nothing gives the CPU's values: 0 for a sum, NaN for a
// float mean (0 for an integer one), -inf/+inf (or the type's extremes)
// for max/min.
//
// x's dimensions are merged as the CPU merges them (sizes 1 dropped,
// neighbours of the same kind joined), which makes most reductions
// [outer, count, inner]:
//   rows (inner == 1, e.g. a mean over the hidden size): a warp per row for
//     rows up to 1024 elements, a block of 512 threads per row beyond, a
//     strided walk of the row and a shuffle (and shared memory) tree;
//   columns (inner > 1, e.g. a bias gradient over the batch): blocks of 32
//     columns x up to 32 threads down them (reads coalesce along the
//     columns), the partial results combined in shared memory.
// Any other pattern (reduced dimensions between kept ones) is one thread
// per result element walking its reduced elements; reducing only sizes 1
// is elementwise. Rows, column tiles and result elements are all walked by
// grid-stride loops. Known slow shapes (correct, not yet fast): very long
// rows with few results (one block per row) and long columns with few
// results (one block per 32 columns).
//
// cumsum (same element types, accumulated as the sums above) is one
// thread per line along the axis, walking it in order (from the end when
// reversed): neighbouring threads take neighbouring inner positions, so
// reads coalesce when the axis is not the last; a last-axis scan (OPT's
// positions from the attention mask, a few thousand elements per line)
// is a thread per row.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ReductionShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <limits>
#include <type_traits>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Shape;
using ops::Tag;

namespace {

enum class Reduce { Sum, Mean, Max, Min };

using Bool = uint8_t;

template <typename T>
constexpr bool isDeviceFloat =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> ||
    std::is_same_v<T, __half>;

/// The accumulator of a reduction of T: float for the float types, int64
/// for integer sums, the element's own type (bool bytes as unsigned) for
/// integer max and min.
template <typename T, Reduce R> struct AccOf {
  using type = std::conditional_t<
      isDeviceFloat<T>, float,
      std::conditional_t<
          R == Reduce::Sum || R == Reduce::Mean, int64_t,
          std::conditional_t<std::is_same_v<T, Bool>, unsigned, T>>>;
};

/// The accumulator's start (computed on the host: numeric_limits is not
/// device code).
template <typename T, Reduce R, typename A> A initialValue() {
  if constexpr (R == Reduce::Sum || R == Reduce::Mean)
    return A(0);
  else if constexpr (isDeviceFloat<T>)
    return R == Reduce::Max ? -std::numeric_limits<float>::infinity()
                            : std::numeric_limits<float>::infinity();
  else
    return R == Reduce::Max ? A(std::numeric_limits<T>::lowest())
                            : A(std::numeric_limits<T>::max());
}

template <typename T> __device__ __forceinline__ auto loadValue(T v) {
  if constexpr (isDeviceFloat<T>)
    return toFloat(v);
  else
    return v;
}

template <Reduce R, typename A>
__device__ __forceinline__ A combine(A acc, A x) {
  if constexpr (R == Reduce::Max)
    return (x > acc || x != x) ? x : acc;
  else if constexpr (R == Reduce::Min)
    return (x < acc || x != x) ? x : acc;
  else if constexpr (std::is_integral_v<A>)
    return A(std::make_unsigned_t<A>(acc) + std::make_unsigned_t<A>(x));
  else
    return acc + x;
}

template <typename T, Reduce R, typename A>
__device__ __forceinline__ T finish(A acc, int64_t count) {
  if constexpr (R == Reduce::Mean) {
    if constexpr (std::is_integral_v<A>)
      return T(count ? acc / A(count) : A(0));
    else
      return fromFloat<T>(acc / float(count));
  } else if constexpr (isDeviceFloat<T>) {
    return fromFloat<T>(acc);
  } else {
    return T(acc);
  }
}

template <typename A> __device__ __forceinline__ A shuffleXor(A v, int lane) {
  if constexpr (std::is_same_v<A, int64_t>)
    return A(__shfl_xor_sync(0xffffffffu, (long long)v, lane));
  else
    return __shfl_xor_sync(0xffffffffu, v, lane);
}

template <Reduce R, typename A> __device__ __forceinline__ A warpReduce(A v) {
  for (int offset = 16; offset; offset >>= 1)
    v = combine<R>(v, shuffleXor(v, offset));
  return v;
}

/// A warp per row of `count` elements (blocks of 256 threads).
template <typename T, Reduce R, typename A>
__global__ void reduceRowsWarp(const T *__restrict__ x, T *__restrict__ out,
                               int64_t rows, int64_t count, A init) {
  int lane = threadIdx.x & 31;
  int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = warp; row < rows; row += warps) { // uniform per warp
    const T *xr = x + row * count;
    A acc = init;
    for (int64_t i = lane; i < count; i += 32)
      acc = combine<R>(acc, A(loadValue(xr[i])));
    acc = warpReduce<R>(acc);
    if (lane == 0)
      out[row] = finish<T, R>(acc, count);
  }
}

/// A block per row of `count` elements (blockDim a multiple of 32).
template <typename T, Reduce R, typename A>
__global__ void __launch_bounds__(1024)
    reduceRowsBlock(const T *__restrict__ x, T *__restrict__ out, int64_t rows,
                    int64_t count, A init) {
  __shared__ A partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * count;
    A acc = init;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
      acc = combine<R>(acc, A(loadValue(xr[i])));
    acc = warpReduce<R>(acc);
    if (lane == 0)
      partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < int(blockDim.x >> 5) ? partial[lane] : init;
      acc = warpReduce<R>(acc);
      if (lane == 0)
        out[row] = finish<T, R>(acc, count);
    }
    __syncthreads();
  }
}

/// [outer, count, inner] reduced over count: blocks of 32 columns x
/// blockDim.y threads walking down them; `tiles` tiles of 32 per outer.
template <typename T, Reduce R, typename A>
__global__ void __launch_bounds__(1024)
    reduceColumns(const T *__restrict__ x, T *__restrict__ out, int64_t outer,
                  int64_t count, int64_t inner, int64_t tiles, A init) {
  __shared__ A partial[32][33];
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    int64_t o = item / tiles, column = (item % tiles) * 32 + threadIdx.x;
    A acc = init;
    if (column < inner) {
      const T *base = x + o * count * inner + column;
      for (int64_t r = threadIdx.y; r < count; r += blockDim.y)
        acc = combine<R>(acc, A(loadValue(base[r * inner])));
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && column < inner) {
      acc = partial[0][threadIdx.x];
      for (unsigned y = 1; y < blockDim.y; ++y)
        acc = combine<R>(acc, partial[y][threadIdx.x]);
      out[o * inner + column] = finish<T, R>(acc, count);
    }
    __syncthreads();
  }
}

constexpr int kMaxDims = 8;

/// The general pattern: the kept dimensions (of the result, with x's
/// strides) and the reduced ones (with x's strides), innermost last.
struct GeneralIndex {
  int keptRank = 0, reducedRank = 0;
  int64_t keptDims[kMaxDims], keptStrides[kMaxDims];
  int64_t reducedDims[kMaxDims], reducedStrides[kMaxDims];
};

/// One thread per result element, walking its reduced elements in x's
/// order (an odometer over the reduced dimensions).
template <typename T, Reduce R, typename A>
__global__ void reduceGeneral(const T *__restrict__ x, T *__restrict__ out,
                              int64_t outCount, int64_t count, GeneralIndex g,
                              A init) {
  int last = g.reducedRank - 1;
  int64_t inner = g.reducedDims[last], innerStride = g.reducedStrides[last];
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < outCount;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = 0, rest = o;
    for (int d = g.keptRank - 1; d >= 0; --d) {
      base += (rest % g.keptDims[d]) * g.keptStrides[d];
      rest /= g.keptDims[d];
    }
    int64_t coordinate[kMaxDims] = {};
    int64_t offset = base;
    A acc = init;
    for (int64_t k = count / inner; k > 0; --k) {
      for (int64_t j = 0; j < inner; ++j)
        acc = combine<R>(acc, A(loadValue(x[offset + j * innerStride])));
      for (int d = last - 1; d >= 0; --d) {
        offset += g.reducedStrides[d];
        if (++coordinate[d] < g.reducedDims[d])
          break;
        offset -= g.reducedStrides[d] * g.reducedDims[d];
        coordinate[d] = 0;
      }
    }
    out[o] = finish<T, R>(acc, count);
  }
}

/// A reduction of one element each (only dimensions of size 1 reduced):
/// out[i] = finish(init combined with x[i]), elementwise.
template <typename T, Reduce R, typename A>
__global__ void reduceOne(const T *__restrict__ x, T *__restrict__ out,
                          int64_t n, A init) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = finish<T, R>(combine<R>(init, A(loadValue(x[i]))), 1);
}

/// A reduction over nothing: every result element is finish(init, 0).
template <typename T, Reduce R, typename A>
__global__ void reduceEmpty(T *__restrict__ out, int64_t n, A init) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = finish<T, R>(init, 0);
}

unsigned gridFor(int64_t items) {
  return unsigned(items < kMaxBlocks ? items : kMaxBlocks);
}

template <typename T, Reduce R>
Status reduceTyped(const KernelArgs &a, const std::vector<bool> &reduced,
                   cudaStream_t stream) {
  using A = typename AccOf<T, R>::type;
  const A init = initialValue<T, R, A>();
  const T *x = a.in(0).as<T>();
  T *out = a.out().as<T>();
  ops::ReduceDims merged = ops::mergeReduceDims(a.in(0).shape, reduced);
  const Shape &dims = merged.dims;
  const std::vector<bool> &kinds = merged.kinds;
  int64_t count = merged.count;
  int64_t outCount = a.out().numElements();
  if (outCount == 0)
    return Status::ok();
  if (count == 0) {
    reduceEmpty<T, R, A><<<blocksFor(outCount), kBlockThreads, 0, stream>>>(
        out, outCount, init);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  }

  // [outer, reduced, inner] with each part possibly absent.
  size_t first = !kinds.empty() && !kinds[0] ? 1 : 0;
  bool simple = kinds.size() <= first + 2 &&
                (first == kinds.size() || kinds[first]) &&
                (first + 1 >= kinds.size() || !kinds[first + 1]);
  if (simple) {
    int64_t outer = first ? dims[0] : 1;
    int64_t inner = first + 1 < kinds.size() ? dims[first + 1] : 1;
    if (count == 1) {
      reduceOne<T, R, A><<<blocksFor(outCount), kBlockThreads, 0, stream>>>(
          x, out, outCount, init);
    } else if (inner == 1 && count <= 1024) {
      int64_t warpsPerBlock = kBlockThreads / 32;
      reduceRowsWarp<T, R, A>
          <<<gridFor((outer + warpsPerBlock - 1) / warpsPerBlock),
             kBlockThreads, 0, stream>>>(x, out, outer, count, init);
    } else if (inner == 1) {
      reduceRowsBlock<T, R, A>
          <<<gridFor(outer), 512, 0, stream>>>(x, out, outer, count, init);
    } else {
      int64_t tiles = (inner + 31) / 32;
      unsigned rows = 32;
      while (rows > 1 && int64_t(rows / 2) >= count)
        rows /= 2;
      reduceColumns<T, R, A>
          <<<gridFor(outer * tiles), dim3(32, rows), 0, stream>>>(
              x, out, outer, count, inner, tiles, init);
    }
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  }

  // General: kept and reduced dimensions with x's strides.
  GeneralIndex g;
  Shape strides = ops::stridesOf(dims);
  for (size_t d = 0; d < dims.size(); ++d) {
    int &rank = kinds[d] ? g.reducedRank : g.keptRank;
    if (rank == kMaxDims)
      return a.error("a reduction over " + std::to_string(dims.size()) +
                     " alternating kept and reduced dimensions has no CUDA "
                     "kernel; at most " +
                     std::to_string(kMaxDims) + " of each");
    (kinds[d] ? g.reducedDims : g.keptDims)[rank] = dims[d];
    (kinds[d] ? g.reducedStrides : g.keptStrides)[rank] = strides[d];
    ++rank;
  }
  reduceGeneral<T, R, A><<<blocksFor(outCount), kBlockThreads, 0, stream>>>(
      x, out, outCount, count, g, init);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

template <Reduce R> Status reduce(const KernelArgs &a, cudaStream_t stream) {
  std::vector<bool> reduced;
  CLEAVE_CHECK(ops::reducePlan(a, reduced));
  auto run = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return reduceTyped<T, R>(a, reduced, stream);
  };
  // Max and min of bools are any and all; a sum of bools is not a bool.
  constexpr bool bools = R == Reduce::Max || R == Reduce::Min;
  switch (a.in(0).dtype) {
  case DType::F32:
    return run(Tag<float>{});
  case DType::BF16:
    return run(Tag<__nv_bfloat16>{});
  case DType::F16:
    return run(Tag<__half>{});
  case DType::I64:
    return run(Tag<int64_t>{});
  case DType::I32:
    return run(Tag<int32_t>{});
  case DType::Bool:
    if constexpr (bools)
      return run(Tag<Bool>{});
    break;
  default:
    break;
  }
  return a.error(std::string("no CUDA kernel for element type ") +
                 dtypeName(a.in(0).dtype) +
                 " (x); this CUDA kernel takes f32, bf16, f16, i64, i32" +
                 (bools ? " and bool" : ""));
}

/// y[o, i, c] = the sum of x[o, j, c] for j <= i (j < i when exclusive;
/// j >= i / j > i when reversed): one thread per (o, c) line.
template <typename T, typename A>
__global__ void cumsumLines(const T *__restrict__ x, T *__restrict__ y,
                            int64_t outer, int64_t axisSize, int64_t inner,
                            bool exclusive, bool reverse) {
  int64_t lines = outer * inner;
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       line < lines; line += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = line / inner, c = line - o * inner;
    int64_t base = o * axisSize * inner + c;
    A acc = A(0);
    for (int64_t k = 0; k < axisSize; ++k) {
      int64_t at = base + (reverse ? axisSize - 1 - k : k) * inner;
      A v = A(loadValue(x[at]));
      if (exclusive) {
        y[at] = finish<T, Reduce::Sum, A>(acc, 1);
        acc = combine<Reduce::Sum, A>(acc, v);
      } else {
        acc = combine<Reduce::Sum, A>(acc, v);
        y[at] = finish<T, Reduce::Sum, A>(acc, 1);
      }
    }
  }
}

Status cumsum(const KernelArgs &a, cudaStream_t stream) {
  ops::CumsumPlan p;
  CLEAVE_CHECK(ops::checkCumsum(a, p));
  auto run = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using A = typename AccOf<T, Reduce::Sum>::type;
    int64_t lines = p.outer * p.inner;
    if (lines == 0 || p.axisSize == 0)
      return Status::ok();
    cumsumLines<T, A><<<blocksFor(lines), kBlockThreads, 0, stream>>>(
        a.in(0).as<T>(), a.out().as<T>(), p.outer, p.axisSize, p.inner,
        p.exclusive, p.reverse);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  };
  switch (a.in(0).dtype) {
  case DType::F32:
    return run(Tag<float>{});
  case DType::BF16:
    return run(Tag<__nv_bfloat16>{});
  case DType::F16:
    return run(Tag<__half>{});
  case DType::I64:
    return run(Tag<int64_t>{});
  case DType::I32:
    return run(Tag<int32_t>{});
  default:
    return a.error(std::string("no CUDA kernel for element type ") +
                   dtypeName(a.in(0).dtype) +
                   " (x); this CUDA kernel takes f32, bf16, f16, i64 and i32");
  }
}

} // namespace

namespace cleave::runtime::cuda {

Status reduceSumKernel(const KernelArgs &a, cudaStream_t stream) {
  return reduce<Reduce::Sum>(a, stream);
}
Status reduceMeanKernel(const KernelArgs &a, cudaStream_t stream) {
  return reduce<Reduce::Mean>(a, stream);
}
Status reduceMaxKernel(const KernelArgs &a, cudaStream_t stream) {
  return reduce<Reduce::Max>(a, stream);
}
Status reduceMinKernel(const KernelArgs &a, cudaStream_t stream) {
  return reduce<Reduce::Min>(a, stream);
}
Status cumsumKernel(const KernelArgs &a, cudaStream_t stream) {
  return cumsum(a, stream);
}

} // namespace cleave::runtime::cuda
