//===- rotary.cu - CUDA kernel of rotary (rotate-half) --------------------===//
//
// The CUDA side of cpu::rotaryKernel (runtime/cpu/rotary.cpp) for f32, bf16
// and f16: y = x * cos + rotate_half(x) * sin per row of D = head_dim
// elements, rotate_half(x) = concat(-x[D/2:], x[:D/2]); row r of x uses row
// r % T of the [T, D] tables. A grid-stride loop over x's elements, in
// float, each result rounded once.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaKernels.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cuda;
using ops::KernelArgs;

namespace {

template <typename T>
__global__ void rotate(const T *__restrict__ x, const T *__restrict__ cos,
                       const T *__restrict__ sin, T *__restrict__ y,
                       int64_t total, int64_t seq, int64_t d) {
  int64_t half = d / 2;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = e / d, i = e - r * d;
    int64_t t = (r % seq) * d + i;
    float c = toFloat(cos[t]), s = toFloat(sin[t]), v = toFloat(x[e]);
    float result = i < half ? v * c - toFloat(x[e + half]) * s
                            : v * c + toFloat(x[e - half]) * s;
    y[e] = fromFloat<T>(result);
  }
}

} // namespace

namespace cleave::runtime::cuda {

Status rotaryKernel(const KernelArgs &a, cudaStream_t stream) {
  const TensorRef &x = a.in(0);
  if (x.rank() < 2 || x.shape.back() % 2 != 0)
    return a.error("x must be [..., seq, head_dim] with an even head_dim, "
                   "got " +
                   ops::shapeString(x.shape));
  ops::Shape table(x.shape.end() - 2, x.shape.end());
  CLEAVE_CHECK(a.expectShape(a.in(1), table, "cos"));
  CLEAVE_CHECK(a.expectShape(a.in(2), table, "sin"));
  CLEAVE_CHECK(a.expectDType(a.in(1), x.dtype, "cos"));
  CLEAVE_CHECK(a.expectDType(a.in(2), x.dtype, "sin"));
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int64_t d = x.shape.back(), seq = table[0];
  int64_t total = x.numElements();
  return visitDeviceFloat(a, x.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (total == 0 || d == 0 || seq == 0)
      return Status::ok();
    rotate<T><<<blocksFor(total), kBlockThreads, 0, stream>>>(
        x.as<T>(), a.in(1).as<T>(), a.in(2).as<T>(), a.out().as<T>(), total,
        seq, d);
    CLEAVE_CUDA_CHECK(cudaGetLastError());
    return Status::ok();
  });
}

} // namespace cleave::runtime::cuda
