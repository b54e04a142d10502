//===- lookup.cu - CUDA kernels of embedding, gather and their gradients --===//
//
// The CUDA side of runtime/cpu/lookup.cpp. embedding (out[i, :] =
// table[ids[i], :]) and gather (out[o, j, :] = data[o, indices[j], :] around
// the axis) only move bytes, so like the CPU kernels they take every
// element type: a grid-stride loop copies words of the widest size (16, 8,
// 4, 2 or 1 bytes) that divides the row and both pointers' alignment.
// Negative ids count from the end. The CPU checks every id before copying;
// the device cannot report without a sync, so a row whose id is out of
// [-size, size) is filled with 0xff bytes instead (NaN in every float type,
// so a loss computed from it shows it).
//
// The gradients (embedding_grad, gather_grad; f32, bf16 and f16) sum the
// rows of dy into the rows their ids pick, deterministically and in the
// CPU's order: the (id, position) pairs are sorted by id with CUB's stable
// radix sort (so each id's positions stay in increasing order), then one
// block per result row finds its run of positions by binary search and
// each thread adds up one column down the run: in f32 from the first row
// on, in float for 16-bit types, as the CPU does. Rows no id picks are
// zero; ids out of range are sorted after every row and add nothing; so
// is embedding_grad's `padding_idx` row (nn.Embedding's). The sort's
// buffers are stream-ordered allocations.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/LookupShape.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <type_traits>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;

namespace {

//===----------------------------------------------------------------------===//
// embedding and gather
//===----------------------------------------------------------------------===//

template <typename W> __device__ __forceinline__ W allOnes() {
  W w;
  memset(&w, 0xff, sizeof(W));
  return w;
}

/// out[o, j, c] = data[o, ids[j], c] for rows of `rowWords` words of type
/// W; data is [outer, axisSize, rowWords], ids has `count` elements.
template <typename W, typename I>
__global__ void gatherRows(const W *__restrict__ data, const I *__restrict__ ids,
                           W *__restrict__ out, int64_t outer, int64_t count,
                           int64_t axisSize, int64_t rowWords) {
  int64_t total = outer * count * rowWords;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = e / rowWords, c = e - row * rowWords;
    int64_t o = row / count, j = row - o * count;
    int64_t id = int64_t(ids[j]);
    if (id < 0)
      id += axisSize;
    out[e] = (id < 0 || id >= axisSize)
                 ? allOnes<W>()
                 : data[(o * axisSize + id) * rowWords + c];
  }
}

template <typename W, typename I>
Status launchGather(const void *data, const I *ids, void *out, int64_t outer,
                    int64_t count, int64_t axisSize, int64_t rowBytes,
                    cudaStream_t stream) {
  int64_t rowWords = rowBytes / int64_t(sizeof(W));
  gatherRows<W, I>
      <<<blocksFor(outer * count * rowWords), kBlockThreads, 0, stream>>>(
          static_cast<const W *>(data), ids, static_cast<W *>(out), outer,
          count, axisSize, rowWords);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// Copies the rows `ids` (operand `idsIndex`, named `what`) picks, with
/// the widest words the row size and pointers allow.
Status gatherBytes(const KernelArgs &a, const void *data, const TensorRef &ids,
                   int64_t outer, int64_t axisSize, int64_t rowBytes,
                   const char *what, cudaStream_t stream) {
  int64_t count = ids.numElements();
  void *out = a.out().data;
  return ops::visitIndex(
      a, ids.dtype,
      [&](auto tag) -> Status {
        using I = typename decltype(tag)::type;
        if (outer == 0 || count == 0 || rowBytes == 0)
          return Status::ok();
        const I *idp = ids.as<I>();
        uintptr_t align = reinterpret_cast<uintptr_t>(data) |
                          reinterpret_cast<uintptr_t>(out) |
                          uintptr_t(rowBytes);
        if (align % 16 == 0)
          return launchGather<uint4>(data, idp, out, outer, count, axisSize,
                                     rowBytes, stream);
        if (align % 8 == 0)
          return launchGather<uint2>(data, idp, out, outer, count, axisSize,
                                     rowBytes, stream);
        if (align % 4 == 0)
          return launchGather<uint32_t>(data, idp, out, outer, count, axisSize,
                                        rowBytes, stream);
        if (align % 2 == 0)
          return launchGather<uint16_t>(data, idp, out, outer, count, axisSize,
                                        rowBytes, stream);
        return launchGather<uint8_t>(data, idp, out, outer, count, axisSize,
                                     rowBytes, stream);
      },
      what);
}

//===----------------------------------------------------------------------===//
// embedding_grad and gather_grad
//===----------------------------------------------------------------------===//

/// keys[j] = indices[j] in [0, axisSize) (negative ones counted from the
/// end), or axisSize when out of range; positions[j] = j.
template <typename I>
__global__ void indexKeys(const I *__restrict__ indices, int64_t count,
                          int64_t axisSize, uint64_t *__restrict__ keys,
                          int64_t *__restrict__ positions) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += int64_t(gridDim.x) * blockDim.x) {
    int64_t id = int64_t(indices[j]);
    if (id < 0)
      id += axisSize;
    keys[j] = (id < 0 || id >= axisSize) ? uint64_t(axisSize) : uint64_t(id);
    positions[j] = j;
  }
}

/// The first i in [0, count) with keys[i] >= key (count if none).
__device__ __forceinline__ int64_t lowerBound(const uint64_t *keys,
                                              int64_t count, uint64_t key) {
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// out[o, a, c] = the sum of dy[o, j, c] over the positions j whose index
/// is a, in increasing j (keys sorted, positions in their order); one block
/// per result row (o, a), one thread per column. Row `skip` (if not
/// negative) is zero.
template <typename T>
__global__ void scatterAddRows(const T *__restrict__ dy,
                               const uint64_t *__restrict__ keys,
                               const int64_t *__restrict__ positions,
                               T *__restrict__ out, int64_t outer,
                               int64_t axisSize, int64_t count, int64_t inner,
                               int64_t skip) {
  for (int64_t row = blockIdx.x; row < outer * axisSize; row += gridDim.x) {
    int64_t o = row / axisSize, a = row - o * axisSize;
    int64_t lo = lowerBound(keys, count, uint64_t(a));
    int64_t hi = lowerBound(keys, count, uint64_t(a) + 1);
    if (a == skip)
      hi = lo;
    const T *src = dy + o * count * inner;
    T *dst = out + row * inner;
    for (int64_t c = threadIdx.x; c < inner; c += blockDim.x) {
      if (lo == hi) {
        dst[c] = fromFloat<T>(0.0f);
        continue;
      }
      // f32: the first row as it is, then the others added (the CPU copies
      // the first); 16-bit: a float sum from zero.
      float sum = toFloat(src[positions[lo] * inner + c]);
      if (!std::is_same<T, float>::value)
        sum = 0.0f + sum;
      for (int64_t n = lo + 1; n < hi; ++n)
        sum += toFloat(src[positions[n] * inner + c]);
      dst[c] = fromFloat<T>(sum);
    }
  }
}

/// The number of bits that hold every key in [0, axisSize].
int keyBits(int64_t axisSize) {
  int bits = 1;
  while (bits < 64 && (uint64_t(axisSize) >> bits) != 0)
    ++bits;
  return bits;
}

/// Rounds a byte count up to a multiple of 256 (CUB's alignment).
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

template <typename T, typename I>
Status enqueueScatterAdd(const T *dy, const I *indices, T *out, int64_t outer,
                         int64_t axisSize, int64_t count, int64_t inner,
                         int64_t skip, char *scratch, size_t sortBytes,
                         cudaStream_t stream) {
  size_t keyBytes = aligned(size_t(count) * sizeof(uint64_t));
  uint64_t *keys = reinterpret_cast<uint64_t *>(scratch);
  uint64_t *sortedKeys = reinterpret_cast<uint64_t *>(scratch + keyBytes);
  int64_t *positions = reinterpret_cast<int64_t *>(scratch + 2 * keyBytes);
  int64_t *sortedPositions =
      reinterpret_cast<int64_t *>(scratch + 3 * keyBytes);
  void *sortTemp = scratch + 4 * keyBytes;
  indexKeys<I><<<blocksFor(count), kBlockThreads, 0, stream>>>(
      indices, count, axisSize, keys, positions);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  CLEAVE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      sortTemp, sortBytes, keys, sortedKeys, positions, sortedPositions, count,
      0, keyBits(axisSize), stream));
  int64_t rows = outer * axisSize;
  unsigned blocks = unsigned(rows < (1 << 20) ? rows : (1 << 20));
  scatterAddRows<T><<<blocks, rowThreads(inner, 256), 0, stream>>>(
      dy, sortedKeys, sortedPositions, out, outer, axisSize, count, inner,
      skip);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

/// The gradient of a gather of [outer, axisSize, inner] by `indices`: dy
/// is [outer, indices..., inner], the result [outer, axisSize, inner];
/// row `skip` along the axis (if not negative) is zero.
Status scatterAdd(const KernelArgs &a, const TensorRef &indices, int64_t outer,
                  int64_t axisSize, int64_t inner, int64_t skip,
                  const char *what, cudaStream_t stream) {
  const TensorRef &dy = a.in(0), &out = a.out();
  int64_t count = indices.numElements();
  return visitDeviceFloat(a, dy.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return ops::visitIndex(
        a, indices.dtype,
        [&](auto index) -> Status {
          using I = typename decltype(index)::type;
          if (out.numElements() == 0)
            return Status::ok();
          if (count == 0) { // no index picks a row
            CLEAVE_CUDA_CHECK(cudaMemsetAsync(
                out.data, 0, size_t(out.numElements()) * sizeof(T), stream));
            return Status::ok();
          }
          size_t sortBytes = 0;
          CLEAVE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
              nullptr, sortBytes, static_cast<const uint64_t *>(nullptr),
              static_cast<uint64_t *>(nullptr),
              static_cast<const int64_t *>(nullptr),
              static_cast<int64_t *>(nullptr), count, 0, keyBits(axisSize),
              stream));
          size_t bytes =
              4 * aligned(size_t(count) * sizeof(uint64_t)) + sortBytes;
          char *scratch = nullptr;
          CLEAVE_CUDA_CHECK(cudaMallocAsync(
              reinterpret_cast<void **>(&scratch), bytes, stream));
          Status status = enqueueScatterAdd<T, I>(
              dy.as<T>(), indices.as<I>(), out.as<T>(), outer, axisSize, count,
              inner, skip, scratch, sortBytes, stream);
          (void)cudaFreeAsync(scratch, stream);
          return status;
        },
        what);
  });
}

} // namespace

namespace cleave::runtime::cuda {


Status embeddingKernel(const KernelArgs &a, cudaStream_t stream) {
  CLEAVE_CHECK(ops::checkEmbedding(a));
  const TensorRef &table = a.in(0);
  return gatherBytes(a, table.data, a.in(1), 1, table.shape[0],
                     table.shape[1] * int64_t(dtypeSize(table.dtype)), "ids",
                     stream);
}

Status gatherKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t outer, axisSize, inner;
  CLEAVE_CHECK(ops::checkGather(a, outer, axisSize, inner));
  const TensorRef &data = a.in(0);
  return gatherBytes(a, data.data, a.in(1), outer, axisSize,
                     inner * int64_t(dtypeSize(data.dtype)), "indices",
                     stream);
}

Status embeddingGradKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t paddingRow;
  CLEAVE_CHECK(ops::checkEmbeddingGrad(a, paddingRow));
  const TensorRef &out = a.out();
  return scatterAdd(a, a.in(1), 1, out.shape[0], out.shape[1], paddingRow,
                    "ids", stream);
}

Status gatherGradKernel(const KernelArgs &a, cudaStream_t stream) {
  int64_t outer, axisSize, inner;
  CLEAVE_CHECK(ops::checkGatherGrad(a, outer, axisSize, inner));
  return scatterAdd(a, a.in(1), outer, axisSize, inner, /*skip=*/-1, "indices",
                    stream);
}

} // namespace cleave::runtime::cuda
