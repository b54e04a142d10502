//===- lookup.cu - CUDA kernel of embedding -------------------------------===//
//
// The CUDA side of cpu::embeddingKernel (runtime/cpu/lookup.cpp): out[i, :]
// = table[ids[i], :], negative ids counting from the end. Like the CPU
// kernel it only moves bytes, so it takes every element type: a grid-stride
// loop copies words of the widest size (16, 8, 4, 2 or 1 bytes) that divides
// the row and both pointers' alignment. The CPU checks every id before
// copying; the device cannot report without a sync, so a row whose id is out
// of [-vocabulary, vocabulary) is filled with 0xff bytes instead (NaN in
// every float type, so a loss computed from it shows it).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

#include <cstdint>

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using cpu::KernelArgs;

namespace {

template <typename W> __device__ __forceinline__ W allOnes() {
  W w;
  memset(&w, 0xff, sizeof(W));
  return w;
}

/// out[i, c] = table[ids[i], c] for rows of `rowWords` words of type W.
template <typename W, typename I>
__global__ void embeddingRows(const W *__restrict__ table,
                              const I *__restrict__ ids, W *__restrict__ out,
                              int64_t count, int64_t vocabulary,
                              int64_t rowWords) {
  int64_t total = count * rowWords;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = e / rowWords, c = e - i * rowWords;
    int64_t id = int64_t(ids[i]);
    if (id < 0)
      id += vocabulary;
    out[e] =
        (id < 0 || id >= vocabulary) ? allOnes<W>() : table[id * rowWords + c];
  }
}

template <typename W, typename I>
Status launchEmbedding(const void *table, const I *ids, void *out,
                       int64_t count, int64_t vocabulary, int64_t rowBytes,
                       cudaStream_t stream) {
  int64_t rowWords = rowBytes / int64_t(sizeof(W));
  embeddingRows<W, I>
      <<<blocksFor(count * rowWords), kBlockThreads, 0, stream>>>(
          static_cast<const W *>(table), ids, static_cast<W *>(out), count,
          vocabulary, rowWords);
  CLEAVE_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

} // namespace

namespace cleave::runtime::cuda {

Status embeddingKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &table = a.in(0), &ids = a.in(1);
  if (table.rank() != 2)
    return a.error("table must have rank 2 ([vocabulary, dim]), got shape " +
                   cpu::shapeString(table.shape));
  CLEAVE_CHECK(a.expectDType(a.out(), table.dtype, "the result"));
  cpu::Shape expected = ids.shape;
  expected.push_back(table.shape[1]);
  CLEAVE_CHECK(a.expectShape(a.out(), expected, "the result"));
  if (dtypeSize(table.dtype) == 0)
    return a.unsupported(table.dtype, "table");
  int64_t vocabulary = table.shape[0];
  int64_t rowBytes = table.shape[1] * int64_t(dtypeSize(table.dtype));
  int64_t count = ids.numElements();
  return cpu::visitIndex(
      a, ids.dtype,
      [&](auto tag) -> Status {
        using I = typename decltype(tag)::type;
        if (count == 0 || rowBytes == 0)
          return Status::ok();
        const I *idp = ids.as<I>();
        uintptr_t align = reinterpret_cast<uintptr_t>(table.data) |
                          reinterpret_cast<uintptr_t>(a.out().data) |
                          uintptr_t(rowBytes);
        if (align % 16 == 0)
          return launchEmbedding<uint4>(table.data, idp, a.out().data, count,
                                        vocabulary, rowBytes, stream);
        if (align % 8 == 0)
          return launchEmbedding<uint2>(table.data, idp, a.out().data, count,
                                        vocabulary, rowBytes, stream);
        if (align % 4 == 0)
          return launchEmbedding<uint32_t>(table.data, idp, a.out().data, count,
                                           vocabulary, rowBytes, stream);
        if (align % 2 == 0)
          return launchEmbedding<uint16_t>(table.data, idp, a.out().data, count,
                                           vocabulary, rowBytes, stream);
        return launchEmbedding<uint8_t>(table.data, idp, a.out().data, count,
                                        vocabulary, rowBytes, stream);
      },
      "ids");
}

} // namespace cleave::runtime::cuda
