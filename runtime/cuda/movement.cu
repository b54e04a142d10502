//===- movement.cu - CUDA kernels that move elements ----------------------===//
//
// reshape, transpose, broadcast_to, slice, slice_grad and concat: the CUDA
// side of runtime/cpu/movement.cpp. They move elements without looking at
// them, so they work on the element's size (1, 2, 4 or 8 bytes) for every
// element type, and give the CPU's results bit for bit. The operand and
// attribute checks are the CPU's (runtime/ops/MovementShape.h).
//
// reshape, and a transpose that moves nothing, are a device-to-device copy.
// broadcast_to, slice and a transpose that keeps the source's last
// dimension last are one strided gather: the result's dimensions merged as
// the CPU merges them (planFromStrides, at most 8 after merging), one
// result element per thread per step of a grid-stride loop, the source
// offset from its coordinates (32-bit index arithmetic below 2^31 elements).
// A transpose that moves the source's contiguous dimension goes through
// 32 x 32 tiles in shared memory (blocks of 32 x 8 threads) so that both
// the reads and the writes coalesce. slice_grad is zeros (a memset) and
// then the strided scatter of dy. concat copies each operand's rows into
// the result's, in the widest word (up to 16 bytes) that the rows'
// sizes, offsets and pointers allow.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/MovementShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <climits>
#include <cstdint>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;
using ops::Shape;

namespace {

/// The most dimensions a strided copy or a transpose's outer walk may have
/// after merging.
constexpr int kMaxDims = 8;

/// A strided walk: the (merged) dimensions of the contiguous side and the
/// other side's stride (in elements, possibly 0 or negative) along each,
/// innermost last.
struct StridedIndex {
  int rank = 0;
  int64_t dims[kMaxDims];
  int64_t strides[kMaxDims];
};

template <typename I>
__device__ __forceinline__ int64_t stridedOffset(I i,
                                                 const StridedIndex &index) {
  int64_t offset = 0;
  I rest = i;
  for (int d = index.rank - 1; d >= 0; --d) {
    I dim = I(index.dims[d]);
    I coordinate = rest % dim;
    rest /= dim;
    offset += int64_t(coordinate) * index.strides[d];
  }
  return offset;
}

/// out[i] = in[offset(i)] for the n elements of the contiguous out.
template <typename W, typename I>
__global__ void gatherStrided(const W *__restrict__ in, W *__restrict__ out,
                              I n, StridedIndex index) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[i] = in[stridedOffset(i, index)];
}

/// out[offset(i)] = in[i] for the n elements of the contiguous in (the
/// offsets are distinct).
template <typename W, typename I>
__global__ void scatterStrided(const W *__restrict__ in, W *__restrict__ out,
                               I n, StridedIndex index) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x)
    out[stridedOffset(i, index)] = in[i];
}

/// A transpose by tiles: result dimension `a` is the source's contiguous
/// one, the result's last dimension is contiguous in the result; the other
/// result dimensions are walked as `outer`.
struct TileIndex {
  int64_t na, nb;                // sizes of result dimension a and of the last
  int64_t inStrideB;             // source stride of the result's last dimension
  int64_t outStrideA;            // result stride of dimension a
  int64_t tilesA, tilesB, items; // items: outer * tilesA * tilesB
  int otherRank = 0;
  int64_t otherDims[kMaxDims], otherIn[kMaxDims], otherOut[kMaxDims];
};

constexpr int kTile = 32, kTileRows = 8;

/// One 32 x 32 tile per step of a grid-stride loop over blocks of 32 x 8
/// threads: read with threadIdx.x along the source's contiguous dimension,
/// written with threadIdx.x along the result's.
template <typename W>
__global__ void __launch_bounds__(kTile *kTileRows)
    transposeTiles(const W *__restrict__ in, W *__restrict__ out, TileIndex t) {
  __shared__ W tile[kTile][kTile + 1];
  for (int64_t item = blockIdx.x; item < t.items; item += gridDim.x) {
    int64_t o = item / (t.tilesA * t.tilesB), r = item % (t.tilesA * t.tilesB);
    int64_t a0 = (r / t.tilesB) * kTile, b0 = (r % t.tilesB) * kTile;
    int64_t inBase = 0, outBase = 0;
    for (int d = t.otherRank - 1; d >= 0; --d) {
      int64_t coordinate = o % t.otherDims[d];
      o /= t.otherDims[d];
      inBase += coordinate * t.otherIn[d];
      outBase += coordinate * t.otherOut[d];
    }
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t i = a0 + threadIdx.x, j = b0 + k;
      if (i < t.na && j < t.nb)
        tile[k][threadIdx.x] = in[inBase + i + j * t.inStrideB];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t i = a0 + k, j = b0 + threadIdx.x;
      if (i < t.na && j < t.nb)
        out[outBase + i * t.outStrideA + j] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

/// dst[row * rowOut + column] = src[row * rowIn + column]: the rows of one
/// concat operand into the result's rows (dst points at the operand's
/// first column).
template <typename V, typename I>
__global__ void copyRows(const V *__restrict__ src, V *__restrict__ dst, I n,
                         I rowIn, int64_t rowOut) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += I(gridDim.x) * blockDim.x) {
    I row = i / rowIn;
    dst[int64_t(row) * rowOut + (i - row * rowIn)] = src[i];
  }
}

/// The merged walk of `dims` (contiguous) with `strides` on the other side.
Status stridedIndex(const KernelArgs &a, const Shape &dims,
                    const Shape &strides, StridedIndex &index) {
  ops::BroadcastPlan plan = ops::planFromStrides(dims, {strides});
  size_t rank = plan.outerDims.size() + 1;
  if (rank > size_t(kMaxDims))
    return a.error("a strided copy over " + std::to_string(rank) +
                   " dimensions (after merging) has no CUDA kernel; at most " +
                   std::to_string(kMaxDims));
  index.rank = int(rank);
  for (size_t d = 0; d + 1 < rank; ++d) {
    index.dims[d] = plan.outerDims[d];
    index.strides[d] = plan.outerStrides[0][d];
  }
  index.dims[rank - 1] = plan.inner;
  index.strides[rank - 1] = plan.innerStride[0];
  return Status::ok();
}

/// Calls launch(I{}) with I the index type for `n` elements and checks the
/// launch; nothing for n == 0.
template <typename Launch> Status launchIndexed(int64_t n, Launch &&launch) {
  if (n == 0)
    return Status::ok();
  if (n <= INT_MAX)
    launch(uint32_t(0));
  else
    launch(int64_t(0));
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// out (contiguous, shape `dims`) = in[base + sum_k index_k strides[k]].
Status stridedCopy(const KernelArgs &a, const TensorRef &in, int64_t base,
                   const Shape &dims, const Shape &strides,
                   const TensorRef &out, cudaStream_t stream) {
  StridedIndex index;
  CLEAVE_CHECK(stridedIndex(a, dims, strides, index));
  int64_t n = out.numElements();
  return ops::visitBytes(a, in.dtype, [&](auto tag) -> Status {
    using W = typename decltype(tag)::type;
    const W *src = in.as<W>() + base;
    W *dst = out.as<W>();
    return launchIndexed(n, [&](auto zero) {
      using I = decltype(zero);
      gatherStrided<W, I>
          <<<blocksFor(n), kBlockThreads, 0, stream>>>(src, dst, I(n), index);
    });
  });
}

/// out[base + sum_k index_k strides[k]] = in (contiguous, shape `dims`).
Status stridedScatter(const KernelArgs &a, const TensorRef &in,
                      const Shape &dims, const Shape &strides, int64_t base,
                      const TensorRef &out, cudaStream_t stream) {
  StridedIndex index;
  CLEAVE_CHECK(stridedIndex(a, dims, strides, index));
  int64_t n = in.numElements();
  return ops::visitBytes(a, in.dtype, [&](auto tag) -> Status {
    using W = typename decltype(tag)::type;
    const W *src = in.as<W>();
    W *dst = out.as<W>() + base;
    return launchIndexed(n, [&](auto zero) {
      using I = decltype(zero);
      scatterStrided<W, I>
          <<<blocksFor(n), kBlockThreads, 0, stream>>>(src, dst, I(n), index);
    });
  });
}

Status copyAll(const TensorRef &from, const TensorRef &to,
               cudaStream_t stream) {
  size_t bytes = from.sizeBytes();
  if (bytes && from.data != to.data)
    CLEAVE_CUDA_CHECK(cudaMemcpyAsync(to.data, from.data, bytes,
                                      cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

/// The transpose of `in` (merged dims `inDims`) by `perm` where the
/// source's last dimension is not the result's last, by tiles.
Status tiledTranspose(const KernelArgs &a, const Shape &inDims,
                      const Shape &perm, cudaStream_t stream) {
  int64_t rank = int64_t(perm.size());
  Shape inStrides = ops::stridesOf(inDims), outDims(rank);
  for (int64_t k = 0; k < rank; ++k)
    outDims[k] = inDims[perm[k]];
  Shape outStrides = ops::stridesOf(outDims);
  int64_t dimA = 0;
  while (perm[dimA] != rank - 1)
    ++dimA;
  int64_t last = rank - 1;
  TileIndex t;
  int64_t outer = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == dimA || k == last)
      continue;
    if (t.otherRank == kMaxDims)
      return a.error("a transpose of " + std::to_string(rank) +
                     " dimensions (after merging) has no CUDA kernel; at "
                     "most " +
                     std::to_string(kMaxDims + 2));
    t.otherDims[t.otherRank] = outDims[k];
    t.otherIn[t.otherRank] = inStrides[perm[k]];
    t.otherOut[t.otherRank] = outStrides[k];
    ++t.otherRank;
    outer *= outDims[k];
  }
  t.na = outDims[dimA];
  t.nb = outDims[last];
  t.inStrideB = inStrides[perm[last]];
  t.outStrideA = outStrides[dimA];
  t.tilesA = (t.na + kTile - 1) / kTile;
  t.tilesB = (t.nb + kTile - 1) / kTile;
  t.items = outer * t.tilesA * t.tilesB;
  if (t.items == 0)
    return Status::ok();
  unsigned blocks = unsigned(t.items < kMaxBlocks ? t.items : kMaxBlocks);
  return ops::visitBytes(a, a.in(0).dtype, [&](auto tag) -> Status {
    using W = typename decltype(tag)::type;
    transposeTiles<W><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(
        a.in(0).as<W>(), a.out().as<W>(), t);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

/// Calls f(V{}) for the unsigned word of `bytes` bytes (1 to 16).
template <typename F> Status visitWord(size_t bytes, F &&f) {
  switch (bytes) {
  case 16:
    return f(uint4());
  case 8:
    return f(uint64_t());
  case 4:
    return f(uint32_t());
  case 2:
    return f(uint16_t());
  default:
    return f(uint8_t());
  }
}

} // namespace

namespace cleave::runtime::cuda {

Status reshapeKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(ops::checkReshape(a));
  return copyAll(a.in(0), a.out(), stream);
}

Status transposeKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &x = a.in(0);
  Shape inDims, perm;
  bool identity;
  CLEAVE_CHECK(ops::transposePlan(a, inDims, perm, identity));
  if (x.numElements() == 0)
    return Status::ok();
  if (identity)
    return copyAll(x, a.out(), stream);
  int64_t rank = int64_t(inDims.size());
  if (perm[rank - 1] != rank - 1)
    return tiledTranspose(a, inDims, perm, stream);
  // The source's last dimension stays last: a gather with rows.
  Shape inStrides = ops::stridesOf(inDims), outDims(rank), strides(rank);
  for (int64_t k = 0; k < rank; ++k) {
    outDims[k] = inDims[perm[k]];
    strides[k] = inStrides[perm[k]];
  }
  return stridedCopy(a, x, 0, outDims, strides, a.out(), stream);
}

Status broadcastToKernel(const KernelArgs &a, cudaStream_t stream) {
  Shape strides;
  CLEAVE_CHECK(ops::broadcastStrides(a, strides));
  if (a.out().numElements() == 0)
    return Status::ok();
  return stridedCopy(a, a.in(0), 0, a.out().shape, strides, a.out(), stream);
}

Status sliceKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  Shape expected, steps;
  int64_t base;
  CLEAVE_CHECK(ops::slicePlan(a, x.shape, expected, steps, base));
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));
  if (a.out().numElements() == 0)
    return Status::ok();
  return stridedCopy(a, x, base, expected, steps, a.out(), stream);
}

/// Zeros, then dy at the positions the slice took.
Status sliceGradKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &dy = a.in(0), &out = a.out();
  CLEAVE_CHECK(a.expectDType(out, dy.dtype, "the result"));
  Shape expected, steps;
  int64_t base;
  CLEAVE_CHECK(ops::slicePlan(a, out.shape, expected, steps, base));
  CLEAVE_CHECK(a.expectShape(dy, expected, "dy"));
  if (out.sizeBytes())
    CLEAVE_CUDA_CHECK(cudaMemsetAsync(out.data, 0, out.sizeBytes(), stream));
  if (dy.numElements() == 0)
    return Status::ok();
  return stridedScatter(a, dy, expected, steps, base, out, stream);
}

Status concatKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &out = a.out();
  int64_t axis;
  CLEAVE_CHECK(ops::concatAxis(a, axis));
  if (out.numElements() == 0)
    return Status::ok();
  int64_t outer = ops::product(out.shape, 0, axis);
  int64_t innerBytes =
      ops::product(out.shape, axis + 1) * int64_t(dtypeSize(out.dtype));
  int64_t rowBytes = out.shape[axis] * innerBytes;
  char *dst = static_cast<char *>(out.data);
  int64_t offset = 0; // bytes into the result's row
  for (const TensorRef &t : a.inputs) {
    int64_t bytes = t.shape[axis] * innerBytes; // per row of t
    if (bytes == 0)
      continue;
    // The widest word dividing the sizes, the offset and both pointers.
    size_t word = 16;
    auto fits = [&](uint64_t v) { return v % word == 0; };
    while (word > 1 && !(fits(uint64_t(bytes)) && fits(uint64_t(rowBytes)) &&
                         fits(uint64_t(offset)) && fits(uintptr_t(t.data)) &&
                         fits(uintptr_t(dst + offset))))
      word /= 2;
    int64_t n = outer * (bytes / int64_t(word));
    CLEAVE_CHECK(visitWord(word, [&](auto zeroWord) -> Status {
      using V = decltype(zeroWord);
      const V *src = static_cast<const V *>(t.data);
      V *to = reinterpret_cast<V *>(dst + offset);
      int64_t rowIn = bytes / int64_t(sizeof(V));
      int64_t rowOut = rowBytes / int64_t(sizeof(V));
      return launchIndexed(n, [&](auto zero) {
        using I = decltype(zero);
        copyRows<V, I><<<blocksFor(n), kBlockThreads, 0, stream>>>(
            src, to, I(n), I(rowIn), rowOut);
      });
    }));
    offset += bytes;
  }
  return Status::ok();
}

} // namespace cleave::runtime::cuda
