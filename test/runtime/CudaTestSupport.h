//===- CudaTestSupport.h - compare CUDA kernels with the CPU's -*- C++ -*-===//
//
// What the CUDA kernel tests share: device tensors, tolerances per element
// type, and compareWithCpu, which runs an op on the CPU and on the GPU from
// the same inputs (GPU results poisoned with NaN first) and compares them.
// Tests that need a GPU start with SKIP_WITHOUT_CUDA_DEVICE().
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_TEST_RUNTIME_CUDATESTSUPPORT_H
#define CLEAVE_TEST_RUNTIME_CUDATESTSUPPORT_H

#include "runtime/cuda/CudaKernels.h"
#include "test/runtime/KernelTestSupport.h"

#include <cuda_runtime.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace cleave::runtime::test {

#define SKIP_WITHOUT_CUDA_DEVICE()                                             \
  do {                                                                         \
    if (cudaDeviceCount() == 0)                                                \
      GTEST_SKIP() << "no CUDA device (cudaDeviceCount() == 0)";               \
  } while (0)

#define ASSERT_CUDA(call)                                                      \
  do {                                                                         \
    cudaError_t cuda_result_ = (call);                                         \
    ASSERT_EQ(cuda_result_, cudaSuccess)                                       \
        << #call << ": " << cudaGetErrorString(cuda_result_);                  \
  } while (0)

#define ASSERT_STATUS_OK(expr)                                                 \
  do {                                                                         \
    Status status_ = (expr);                                                   \
    ASSERT_TRUE(status_.isOk()) << status_.message();                          \
  } while (0)

/// A tensor in device memory, `offset` bytes into its allocation (to test
/// pointers that are not 256-byte aligned).
struct DeviceTensor {
  void *allocation = nullptr;
  TensorRef ref;
  DeviceTensor() = default;
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;
  ~DeviceTensor() {
    if (allocation)
      (void)cudaFree(allocation);
  }
};
using DevicePtr = std::unique_ptr<DeviceTensor>;

/// Copies `b` to the device; with `poison`, fills it with 0xff bytes (NaN
/// in every float type) instead.
inline void toDevice(const Buf &b, DevicePtr &d, size_t offset = 0,
              bool poison = false) {
  d = std::make_unique<DeviceTensor>();
  size_t bytes = size_t(b.size()) * dtypeSize(b.dtype);
  ASSERT_CUDA(cudaMalloc(&d->allocation, bytes + offset + 16));
  char *data = static_cast<char *>(d->allocation) + offset;
  d->ref.data = data;
  d->ref.shape = b.shape;
  d->ref.dtype = b.dtype;
  if (poison)
    ASSERT_CUDA(cudaMemset(data, 0xff, bytes));
  else
    ASSERT_CUDA(
        cudaMemcpy(data, b.bytes.data(), bytes, cudaMemcpyHostToDevice));
}

inline void toHost(const DevicePtr &d, Buf &b) {
  size_t bytes = size_t(b.size()) * dtypeSize(b.dtype);
  ASSERT_CUDA(
      cudaMemcpy(b.bytes.data(), d->ref.data, bytes, cudaMemcpyDeviceToHost));
}

struct Tolerance {
  double rel, abs;
  bool scaled = false; // abs is relative to the largest |reference|
};

inline Tolerance tolerance(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return {2e-2, 1e-2};
  case DType::F16:
    return {2e-3, 1e-3};
  default:
    return {1e-5, 1e-6};
  }
}

/// matmul: f32 1e-4, its absolute part scaled by the result's magnitude
/// (sums of products cancel to near zero).
inline Tolerance productTolerance(DType dtype) {
  Tolerance t = dtype == DType::F32 ? Tolerance{1e-4, 1e-4} : tolerance(dtype);
  t.scaled = true;
  return t;
}

inline void expectClose(const Buf &got, const Buf &want, Tolerance tol,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  if (tol.scaled) {
    scale = 0;
    for (int64_t i = 0; i < want.size(); ++i)
      if (std::isfinite(want.at(i)))
        scale = std::max(scale, std::fabs(want.at(i)));
    scale = std::max(scale, 1e-30);
  }
  int failures = 0;
  double worst = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    auto r = near(got.at(i), want.at(i), tol.rel, tol.abs * scale);
    if (!r) {
      worst = std::max(worst, std::fabs(got.at(i) - want.at(i)));
      if (++failures <= 5)
        ADD_FAILURE() << what << ", element " << i << ": " << r.message();
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size()
                         << " elements differ, by up to " << worst;
}

/// Runs `op` on the CPU and on the GPU from the same inputs and compares
/// the results. `outputs` give the results' types and shapes, and, for an
/// op that updates them in place, their initial values; otherwise the GPU's
/// are poisoned first. Device operands start `offset` bytes into their
/// allocations.
inline void compareWithCpu(const std::string &op, const Attributes &attrs,
                    const std::vector<const Buf *> &inputs,
                    const std::vector<Buf> &outputs, Tolerance tol,
                    bool inPlace = false, size_t offset = 0) {
  std::vector<TensorRef> cpuIn, gpuIn, cpuOutRefs, gpuOutRefs;
  std::vector<Buf> cpuOut = outputs, gpuOut = outputs;
  std::vector<DevicePtr> devIn(inputs.size()), devOut(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == &absent()) {
      cpuIn.push_back(TensorRef());
      gpuIn.push_back(TensorRef());
      continue;
    }
    cpuIn.push_back(inputs[i]->ref());
    ASSERT_NO_FATAL_FAILURE(toDevice(*inputs[i], devIn[i], offset));
    gpuIn.push_back(devIn[i]->ref);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    cpuOutRefs.push_back(cpuOut[i].ref());
    ASSERT_NO_FATAL_FAILURE(toDevice(outputs[i], devOut[i], offset, !inPlace));
    gpuOutRefs.push_back(devOut[i]->ref);
  }
  ASSERT_STATUS_OK(runCpuKernel(op, attrs, cpuIn, cpuOutRefs));

  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  Status status = runCudaKernel(op, attrs, gpuIn, gpuOutRefs, stream);
  cudaError_t synced = cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  ASSERT_TRUE(status.isOk()) << status.message();
  ASSERT_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
  for (size_t i = 0; i < outputs.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(toHost(devOut[i], gpuOut[i]));
    expectClose(gpuOut[i], cpuOut[i], tol,
                op + " result " + std::to_string(i) + " (" +
                    dtypeName(outputs[i].dtype) + ")");
  }
}

inline std::string shapeText(const Shape &s) { return ops::shapeString(s); }

/// A tensor for the checks that need no device: host memory that no kernel
/// may reach (a check must fail first), of any type and shape.
inline TensorRef fakeTensor(DType dtype, Shape shape) {
  static double fake[64];
  TensorRef r;
  r.data = fake;
  r.shape = std::move(shape);
  r.dtype = dtype;
  return r;
}

/// `s` is an error whose message contains `text`.
inline void expectError(const Status &s, const std::string &text) {
  ASSERT_FALSE(s.isOk()) << "expected an error containing: " << text;
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

inline std::string dtypeParamName(const ::testing::TestParamInfo<DType> &info) {
  return dtypeName(info.param);
}

} // namespace cleave::runtime::test

#endif // CLEAVE_TEST_RUNTIME_CUDATESTSUPPORT_H
