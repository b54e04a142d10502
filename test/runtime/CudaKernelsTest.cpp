//===- CudaKernelsTest.cpp - the CUDA kernels against the CPU kernels -----===//
//
// Each CUDA kernel runs on random inputs and is compared with the CPU
// kernel of the same op (runCpuKernel) on the same inputs, for f32, bf16 and
// f16: f32 within 1e-5 relative and 1e-6 absolute (matmul 1e-4 of the
// result's scale), 16-bit types within a few of their ulps, adamw bit for
// bit. GPU results are poisoned with NaN before a run, so an element a
// kernel leaves unwritten fails. Every test that needs a GPU skips when
// there is none (cudaDeviceCount() == 0); ErrorsInsteadOfCrashes always
// runs and checks the error paths, with or without a device.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/CudaTestSupport.h"

#include <cstring>
#include <iostream>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

class CudaKernelsTyped : public ::testing::TestWithParam<DType> {};

//===----------------------------------------------------------------------===//
// Without a device too: the dispatcher's errors and the list of ops
//===----------------------------------------------------------------------===//

TEST(CudaKernelsTest, ErrorsInsteadOfCrashes) {
  // Every op of the CPU backend has a CUDA kernel.
  EXPECT_EQ(cudaKernelOps(), cpuKernelOps());
  EXPECT_TRUE(std::is_sorted(cudaKernelOps().begin(), cudaKernelOps().end()));

  Status missing = runCudaKernel("fft", {}, {}, {}, nullptr);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("fft: no CUDA kernel"), std::string::npos)
      << missing.message();
  EXPECT_NE(missing.message().find("matmul"), std::string::npos)
      << missing.message();

  // Checks that need no device: operand counts and shapes, attributes.
  auto t = fakeTensor;
  expectError(runCudaKernel("add", {}, {t(DType::F32, {4})},
                            {t(DType::F32, {4})}, nullptr),
              "add: got 1 operand, expected 2 operands");
  expectError(runCudaKernel("add", {}, {t(DType::F32, {4}), t(DType::F32, {3})},
                            {t(DType::F32, {4})}, nullptr),
              "do not broadcast");
  expectError(runCudaKernel("add", {}, {t(DType::F64, {4}), t(DType::F64, {4})},
                            {t(DType::F64, {4})}, nullptr),
              "no CUDA kernel for element type f64");
  expectError(runCudaKernel("gelu", {{"approximate", stringA("fast")}},
                            {t(DType::F32, {4})}, {t(DType::F32, {4})},
                            nullptr),
              "approximate must be");
  expectError(runCudaKernel("matmul", {},
                            {t(DType::F32, {2, 3}), t(DType::F32, {4, 2})},
                            {t(DType::F32, {2, 2})}, nullptr),
              "do not agree on the contracted dimension");
  expectError(runCudaKernel("rms_norm", {},
                            {t(DType::F32, {2, 3}), t(DType::F32, {2})},
                            {t(DType::F32, {2, 3})}, nullptr),
              "scale has shape [2], expected [3]");
  expectError(runCudaKernel(
                  "adamw", {{"lr", floatA(1e-3)}},
                  {t(DType::F32, {3}), t(DType::I64, {})},
                  {t(DType::F32, {4}), t(DType::F32, {4}), t(DType::F32, {4})},
                  nullptr),
              "grad is f32[3], but the parameter is f32[4]");

  expectError(runCudaKernel("embedding", {},
                            {t(DType::F32, {10, 4}), t(DType::F32, {3})},
                            {t(DType::F32, {3, 4})}, nullptr),
              "no kernel for element type f32 (ids)");
  expectError(runCudaKernel("embedding", {},
                            {t(DType::F32, {10, 4}), t(DType::I64, {3})},
                            {t(DType::F32, {3, 5})}, nullptr),
              "the result has shape [3, 5], expected [3, 4]");
  expectError(runCudaKernel("softmax_cross_entropy",
                            {{"reduction", stringA("avg")}},
                            {t(DType::F32, {4, 10}), t(DType::I64, {4})},
                            {t(DType::F32, {})}, nullptr),
              "reduction must be");
  expectError(runCudaKernel("softmax_cross_entropy", {},
                            {t(DType::F32, {4, 10}), t(DType::I64, {5})},
                            {t(DType::F32, {})}, nullptr),
              "target has shape [5], expected [4]");
  expectError(runCudaKernel("cast", {}, {t(DType::F32, {4})},
                            {t(DType::F64, {4})}, nullptr),
              "no CUDA kernel for element type f64 (the result)");
  expectError(
      runCudaKernel("attention", {},
                    {t(DType::F32, {1, 3, 4, 8}), t(DType::F32, {1, 2, 4, 8}),
                     t(DType::F32, {1, 2, 4, 8})},
                    {t(DType::F32, {1, 3, 4, 8})}, nullptr),
      "not a multiple of the 2 key/value heads");
  expectError(runCudaKernel("attention", {},
                            {t(DType::F32, {1, 1, 2, 512}),
                             t(DType::F32, {1, 1, 2, 512}),
                             t(DType::F32, {1, 1, 2, 8})},
                            {t(DType::F32, {1, 1, 2, 8})}, nullptr),
              "head dimensions up to 256");
  expectError(runCudaKernel("rotary", {},
                            {t(DType::F32, {2, 4, 6}), t(DType::F32, {4, 5}),
                             t(DType::F32, {4, 6})},
                            {t(DType::F32, {2, 4, 6})}, nullptr),
              "cos has shape [4, 5], expected [4, 6]");

  int device = -1;
  int count = cudaDeviceCount();
  std::cout << "[ INFO     ] cudaDeviceCount() = " << count << "\n";
  if (count > 0) {
    ASSERT_STATUS_OK(selectCudaDevice(count + 1, device));
    EXPECT_EQ(device, (count + 1) % count);
    ASSERT_STATUS_OK(selectCudaDevice(0, device));
    EXPECT_EQ(device, 0);
    expectError(selectCudaDevice(-1, device), "must not be negative");
    return;
  }
  // No device: errors that say so, not crashes. The pointers are never
  // dereferenced: every launch or library call fails first.
  Status select = selectCudaDevice(0, device);
  expectError(select, "no CUDA device");
  std::cout << "[ INFO     ] selectCudaDevice: " << select.message() << "\n";
  std::vector<std::pair<std::string, Status>> runs;
  runs.emplace_back(
      "add", runCudaKernel("add", {}, {t(DType::F32, {4}), t(DType::F32, {4})},
                           {t(DType::F32, {4})}, nullptr));
  runs.emplace_back("gelu", runCudaKernel("gelu", {}, {t(DType::BF16, {4})},
                                          {t(DType::BF16, {4})}, nullptr));
  runs.emplace_back("softmax",
                    runCudaKernel("softmax", {}, {t(DType::F32, {2, 4})},
                                  {t(DType::F32, {2, 4})}, nullptr));
  runs.emplace_back("layer_norm",
                    runCudaKernel("layer_norm", {}, {t(DType::F32, {2, 4})},
                                  {t(DType::F32, {2, 4})}, nullptr));
  runs.emplace_back(
      "matmul", runCudaKernel("matmul", {},
                              {t(DType::F32, {2, 3}), t(DType::F32, {3, 2})},
                              {t(DType::F32, {2, 2})}, nullptr));
  runs.emplace_back("adamw",
                    runCudaKernel("adamw", {{"lr", floatA(1e-3)}},
                                  {t(DType::F32, {4}), t(DType::I64, {})},
                                  {t(DType::F32, {4}), t(DType::F32, {4}),
                                   t(DType::F32, {4})},
                                  nullptr));
  runs.emplace_back("embedding",
                    runCudaKernel("embedding", {},
                                  {t(DType::F32, {10, 4}), t(DType::I64, {3})},
                                  {t(DType::F32, {3, 4})}, nullptr));
  runs.emplace_back("softmax_cross_entropy",
                    runCudaKernel("softmax_cross_entropy",
                                  {{"reduction", stringA("none")}},
                                  {t(DType::F32, {4, 10}), t(DType::I64, {4})},
                                  {t(DType::F32, {4})}, nullptr));
  runs.emplace_back("cast", runCudaKernel("cast", {}, {t(DType::F32, {4})},
                                          {t(DType::BF16, {4})}, nullptr));
  runs.emplace_back(
      "attention",
      runCudaKernel("attention", {{"causal", intA(1)}},
                    {t(DType::F32, {1, 2, 4, 8}), t(DType::F32, {1, 1, 4, 8}),
                     t(DType::F32, {1, 1, 4, 8})},
                    {t(DType::F32, {1, 2, 4, 8})}, nullptr));
  runs.emplace_back(
      "rotary", runCudaKernel("rotary", {},
                              {t(DType::F32, {2, 4, 6}), t(DType::F32, {4, 6}),
                               t(DType::F32, {4, 6})},
                              {t(DType::F32, {2, 4, 6})}, nullptr));
  for (const auto &[op, status] : runs) {
    EXPECT_FALSE(status.isOk()) << op << " ran without a device";
    EXPECT_NE(status.message().find(op + ": "), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("failed"), std::string::npos)
        << status.message();
    std::cout << "[ INFO     ] " << status.message() << "\n";
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, BinaryBroadcast) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 37, 65}, {4, 37, 65}}, // same shape
      {{4, 37, 65}, {65}},        // trailing dimensions (a bias)
      {{4, 37, 65}, {37, 1}},     // a column
      {{4, 37, 65}, {4, 1, 65}},  // a middle dimension
      {{65}, {4, 37, 65}},        // the lhs broadcast
      {{4, 1, 65}, {1, 37, 1}},   // both
      {{4, 37, 65}, {}},          // a scalar
      {{1, 1}, {1}},              // one element
      {{0, 5}, {5}},              // empty
  };
  unsigned seed = 1;
  for (const char *op : {"add", "sub", "mul", "div"})
    for (const auto &[ls, rs] : shapes) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(ls) + " " + shapeText(rs));
      Shape out;
      ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
      Buf x = random(dtype, ls, -2, 2, ++seed);
      Buf y = random(dtype, rs, 0.5, 2, ++seed); // away from 0 for div
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(
          op, {}, {&x, &y}, {Buf(dtype, out)}, tolerance(dtype)));
    }
}

TEST_P(CudaKernelsTyped, BinaryGridStride) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // More elements than one grid of 65536 blocks of 256 threads covers.
  Buf x = random(dtype, {17, 1 << 20}, -2, 2, 5);
  Buf y = random(dtype, {17, 1 << 20}, -2, 2, 6);
  Buf bias = random(dtype, {1 << 20}, -2, 2, 7);
  ASSERT_NO_FATAL_FAILURE(compareWithCpu(
      "add", {}, {&x, &y}, {Buf(dtype, x.shape)}, tolerance(dtype)));
  ASSERT_NO_FATAL_FAILURE(compareWithCpu(
      "mul", {}, {&x, &bias}, {Buf(dtype, x.shape)}, tolerance(dtype)));
}

TEST_P(CudaKernelsTyped, Activations) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<std::string, Attributes>> ops = {
      {"gelu", {}},
      {"gelu", {{"approximate", stringA("none")}}},
      {"gelu", {{"approximate", stringA("tanh")}}},
      {"silu", {}},
  };
  unsigned seed = 100;
  for (const auto &[op, attrs] : ops)
    for (const Shape &shape : {Shape{1000, 129}, Shape{}, Shape{0, 5}}) {
      SCOPED_TRACE(op + " " + shapeText(shape) +
                   (attrs.empty() ? "" : " " + attrs.begin()->second.s));
      Buf x = random(dtype, shape, -6, 6, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(
          op, attrs, {&x}, {Buf(dtype, shape)}, tolerance(dtype)));
    }
}

// dropout draws the CPU's mask (ops/DropoutStream.h): whole, and a slice
// of a full tensor at offsets, in a later microbatch; past one grid too.
TEST_P(CudaKernelsTyped, Dropout) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  Attributes attrs = {{"ratio", floatA(0.1)},  {"stream", stringA("/drop")},
                      {"seed", intA(5)},       {"step", intA(3)},
                      {"first_sample", intA(4)}, {"samples", intA(2)}};
  Buf x = random(dtype, {2, 37, 65}, -2, 2, 11);
  ASSERT_NO_FATAL_FAILURE(compareWithCpu("dropout", attrs, {&x},
                                         {Buf(dtype, x.shape)},
                                         tolerance(dtype)));
  attrs["full_shape"] = intsA({2, 74, 130});
  attrs["offsets"] = intsA({0, 37, 65});
  ASSERT_NO_FATAL_FAILURE(compareWithCpu("dropout", attrs, {&x},
                                         {Buf(dtype, x.shape)},
                                         tolerance(dtype)));
  Buf big = random(dtype, {2, 17, 1 << 20}, -2, 2, 12);
  attrs.erase("full_shape");
  attrs.erase("offsets");
  ASSERT_NO_FATAL_FAILURE(compareWithCpu("dropout", attrs, {&big},
                                         {Buf(dtype, big.shape)},
                                         tolerance(dtype)));
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, Softmax) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{64, 1000}, -1},  {{7, 50257}, -1}, {{5, 3}, -1},      {{1, 1}, -1},
      {{3, 2, 1500}, 2}, {{4, 33, 6}, 1},  {{2, 3, 4, 5}, 0}, {{0, 8}, -1},
  };
  unsigned seed = 200;
  for (const char *op : {"softmax", "log_softmax"})
    for (const auto &[shape, axis] : cases) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(shape) + " axis " +
                   std::to_string(axis));
      Buf x = random(dtype, shape, -8, 8, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(op, {{"axis", intA(axis)}}, {&x},
                                             {Buf(dtype, shape)},
                                             tolerance(dtype)));
    }
}

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, LayerNorm) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    Shape shape;
    int64_t axis;
    bool scale, bias;
  };
  const std::vector<Case> cases = {
      {{32, 768}, -1, true, true},    {{3, 5, 17}, -1, true, false},
      {{3, 5, 17}, -1, false, false}, {{4, 2000}, -1, false, true},
      {{6, 4, 8}, 1, true, true},     {{2, 3}, 0, true, true},
      {{0, 16}, -1, true, true},
  };
  unsigned seed = 300;
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeText(c.shape) + " axis " + std::to_string(c.axis) +
                 (c.scale ? " scale" : "") + (c.bias ? " bias" : ""));
    int64_t axis = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
    Shape normalized(c.shape.begin() + axis, c.shape.end());
    Buf x = random(dtype, c.shape, -3, 5, ++seed);
    Buf scale = random(dtype, normalized, 0.5, 1.5, ++seed);
    Buf bias = random(dtype, normalized, -1, 1, ++seed);
    Attributes attrs = {{"axis", intA(c.axis)}, {"epsilon", floatA(1e-5)}};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "layer_norm", attrs,
        {&x, c.scale ? &scale : &absent(), c.bias ? &bias : &absent()},
        {Buf(dtype, c.shape)}, tolerance(dtype)));
  }
}

TEST_P(CudaKernelsTyped, RmsNorm) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{32, 768}, -1}, {{3, 5, 17}, -1}, {{3, 5, 17}, 1}, {{2, 4096}, -1}};
  unsigned seed = 400;
  for (const auto &[shape, axis] : cases) {
    SCOPED_TRACE(shapeText(shape) + " axis " + std::to_string(axis));
    int64_t a = axis < 0 ? axis + int64_t(shape.size()) : axis;
    Buf x = random(dtype, shape, -3, 3, ++seed);
    Buf scale =
        random(dtype, Shape(shape.begin() + a, shape.end()), 0.5, 1.5, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "rms_norm", {{"axis", intA(axis)}, {"epsilon", floatA(1e-6)}},
        {&x, &scale}, {Buf(dtype, shape)}, tolerance(dtype)));
  }
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, Matmul) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    Shape lhs, rhs;
    bool transLhs, transRhs;
    size_t offset; // elements into the allocations
  };
  const std::vector<Case> cases = {
      {{64, 96}, {96, 80}, false, false, 0},
      {{96, 64}, {96, 80}, true, false, 0},
      {{64, 96}, {80, 96}, false, true, 0},
      {{96, 64}, {80, 96}, true, true, 0},
      {{2, 3, 33, 40}, {2, 3, 40, 24}, false, false, 0}, // strided batch
      {{2, 3, 40, 33}, {2, 3, 24, 40}, true, true, 0},
      {{4, 17, 32}, {32, 48}, false, false, 0}, // a linear layer: one GEMM
      {{4, 17, 32}, {48, 32}, false, true, 0},
      {{4, 32, 17}, {32, 48}, true, false, 0},         // rhs batch stride 0
      {{17, 32}, {4, 32, 48}, false, false, 0},        // lhs batch stride 0
      {{2, 1, 8, 16}, {1, 3, 16, 8}, false, false, 0}, // one GEMM per batch
      {{5, 7}, {7, 3}, false, false, 0},               // odd leading dims
      {{3, 5, 7}, {7, 3}, false, false, 1},      // pointers one element off
      {{3, 8, 16}, {3, 16, 8}, false, false, 2}, // 256-byte alignment
      {{4, 0}, {0, 5}, false, false, 0},         // an empty sum: zeros
      {{2, 0, 8}, {8, 3}, false, false, 0},
  };
  unsigned seed = 500;
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeText(c.lhs) + (c.transLhs ? "^T" : "") + " x " +
                 shapeText(c.rhs) + (c.transRhs ? "^T" : "") + " offset " +
                 std::to_string(c.offset));
    size_t lr = c.lhs.size(), rr = c.rhs.size();
    int64_t m = c.lhs[lr - (c.transLhs ? 1 : 2)];
    int64_t n = c.rhs[rr - (c.transRhs ? 2 : 1)];
    Shape out;
    ASSERT_TRUE(ops::broadcastShapes(Shape(c.lhs.begin(), c.lhs.end() - 2),
                                     Shape(c.rhs.begin(), c.rhs.end() - 2),
                                     out));
    out.push_back(m);
    out.push_back(n);
    Buf lhs = random(dtype, c.lhs, -2, 2, ++seed);
    Buf rhs = random(dtype, c.rhs, -2, 2, ++seed);
    Attributes attrs = {{"transpose_lhs", intA(c.transLhs)},
                        {"transpose_rhs", intA(c.transRhs)}};
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu("matmul", attrs, {&lhs, &rhs}, {Buf(dtype, out)},
                       productTolerance(dtype),
                       /*inPlace=*/false, c.offset * dtypeSize(dtype)));
  }
}

//===----------------------------------------------------------------------===//
// embedding, softmax_cross_entropy
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, Embedding) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    int64_t vocabulary, dim;
    Shape ids;
    DType idType;
    size_t offset; // bytes into the allocations (ids stay aligned): narrower
                   // copies
  };
  const std::vector<Case> cases = {
      {1000, 768, {4, 17}, DType::I64, 0}, {1000, 768, {4, 17}, DType::I32, 0},
      {50, 33, {9}, DType::I64, 0},        {50, 33, {9}, DType::I32, 4},
      {7, 1, {3, 5}, DType::I64, 0},       {7, 4, {3, 5}, DType::I64, 8},
      {7, 8, {0}, DType::I64, 0},          {7, 0, {5}, DType::I64, 0},
  };
  unsigned seed = 800;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.vocabulary) + " x " + std::to_string(c.dim) +
                 " ids " + shapeText(c.ids) + " " + dtypeName(c.idType) +
                 " offset " + std::to_string(c.offset));
    Buf table = random(dtype, {c.vocabulary, c.dim}, -2, 2, ++seed);
    // Negative ids count from the end.
    Buf ids = random(c.idType, c.ids, -double(c.vocabulary),
                     double(c.vocabulary), ++seed);
    Shape out = c.ids;
    out.push_back(c.dim);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("embedding", {}, {&table, &ids},
                                           {Buf(dtype, out)}, {0, 0},
                                           /*inPlace=*/false, c.offset));
  }
}

TEST(CudaKernelsTest, OutOfRangeIdsAndTargetsGiveNaN) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // The CPU refuses them; the device cannot without a sync, so it marks
  // the rows (0xff bytes) and the losses (NaN) instead.
  Buf table = random(DType::F32, {5, 3}, -1, 1, 1300);
  Buf ids = make(DType::I64, {3}, {1, 5, -6});
  Buf rows(DType::F32, {3, 3});
  DevicePtr dTable, dIds, dRows;
  ASSERT_NO_FATAL_FAILURE(toDevice(table, dTable));
  ASSERT_NO_FATAL_FAILURE(toDevice(ids, dIds));
  ASSERT_NO_FATAL_FAILURE(toDevice(rows, dRows));
  ASSERT_STATUS_OK(runCudaKernel("embedding", {}, {dTable->ref, dIds->ref},
                                 {dRows->ref}, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_NO_FATAL_FAILURE(toHost(dRows, rows));
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(rows.at(c), table.at(3 + c));
    EXPECT_TRUE(std::isnan(rows.at(3 + c)));
    EXPECT_TRUE(std::isnan(rows.at(6 + c)));
  }

  Buf x = random(DType::F32, {3, 4}, -1, 1, 1301);
  Buf target = make(DType::I64, {3}, {0, 4, -1});
  Buf losses(DType::F32, {3});
  DevicePtr dX, dTarget, dLosses;
  ASSERT_NO_FATAL_FAILURE(toDevice(x, dX));
  ASSERT_NO_FATAL_FAILURE(toDevice(target, dTarget));
  ASSERT_NO_FATAL_FAILURE(toDevice(losses, dLosses));
  ASSERT_STATUS_OK(
      runCudaKernel("softmax_cross_entropy", {{"reduction", stringA("none")}},
                    {dX->ref, dTarget->ref}, {dLosses->ref}, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_NO_FATAL_FAILURE(toHost(dLosses, losses));
  EXPECT_TRUE(std::isfinite(losses.at(0)));
  EXPECT_TRUE(std::isnan(losses.at(1)));
  EXPECT_TRUE(std::isnan(losses.at(2)));
}

TEST_P(CudaKernelsTyped, SoftmaxCrossEntropy) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<Shape> shapes = {{64, 1000}, {7, 50257},   {5, 3},
                                     {4, 5, 3},  {2, 7, 3, 4}, {0, 10}};
  unsigned seed = 900;
  for (const Shape &shape : shapes)
    for (const char *reduction : {"none", "sum", "mean"})
      for (DType idType : {DType::I64, DType::I32})
        for (bool ignore : {false, true}) {
          SCOPED_TRACE(shapeText(shape) + " " + reduction + " " +
                       dtypeName(idType) + (ignore ? " ignore_index" : ""));
          Shape targetShape{shape[0]};
          targetShape.insert(targetShape.end(), shape.begin() + 2, shape.end());
          Buf x = random(dtype, shape, -8, 8, ++seed);
          Buf target = random(idType, targetShape, 0, double(shape[1]), ++seed);
          Attributes attrs = {{"reduction", stringA(reduction)}};
          if (ignore) {
            attrs["ignore_index"] = intA(-100);
            for (int64_t i = 0; i < target.size(); i += 3)
              target.set(i, -100);
          }
          Shape out = std::string(reduction) == "none" ? targetShape : Shape{};
          // Sums of many losses: the CPU adds in double, the GPU in double
          // in another order; 16-bit results round the same value.
          Tolerance tol = tolerance(dtype);
          if (dtype == DType::F32)
            tol = {1e-5, 1e-5};
          ASSERT_NO_FATAL_FAILURE(compareWithCpu("softmax_cross_entropy", attrs,
                                                 {&x, &target},
                                                 {Buf(dtype, out)}, tol));
        }
  // Every target ignored: mean is 0 / 0 = NaN, sum is 0.
  for (const char *reduction : {"sum", "mean"}) {
    SCOPED_TRACE(std::string("all ignored, ") + reduction);
    Buf x = random(dtype, {6, 11}, -8, 8, ++seed);
    Buf target = make(DType::I64, {6}, {-1, -1, -1, -1, -1, -1});
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "softmax_cross_entropy",
        {{"reduction", stringA(reduction)}, {"ignore_index", intA(-1)}},
        {&x, &target}, {Buf(dtype, {})}, tolerance(dtype)));
  }
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, Cast) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType from = GetParam();
  unsigned seed = 1000;
  for (DType to : {DType::F32, DType::BF16, DType::F16})
    for (const Shape &shape : {Shape{1000, 129}, Shape{}, Shape{0, 5}})
      for (double range : {3.0, 1e5}) { // 1e5: past f16's largest finite
        SCOPED_TRACE(std::string(dtypeName(from)) + " to " + dtypeName(to) +
                     " " + shapeText(shape) + " range " +
                     std::to_string(range));
        Buf x = random(from, shape, -range, range, ++seed);
        // Both round to nearest even: equal values.
        ASSERT_NO_FATAL_FAILURE(
            compareWithCpu("cast", {}, {&x}, {Buf(to, shape)}, {0, 0}));
      }
}

/// Casts to and from bool and the integer types (the vocab-parallel
/// cross-entropy casts its rank's mask of targets), against the CPU's.
TEST(CudaKernels, CastIntegersAndBool) {
  SKIP_WITHOUT_CUDA_DEVICE();
  unsigned seed = 1100;
  const DType types[] = {DType::Bool, DType::I32, DType::I64,
                         DType::F32,  DType::BF16, DType::F16};
  auto floating = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  for (DType from : types)
    for (DType to : types) {
      if (floating(from) && floating(to))
        continue; // CudaKernelsTyped.Cast
      SCOPED_TRACE(std::string(dtypeName(from)) + " to " + dtypeName(to));
      // Zeros among the values (bool's false), and, from floats, fractions
      // to truncate.
      Buf x = from == DType::Bool ? random(from, {1000, 3}, 0, 2, ++seed)
                                  : random(from, {1000, 3}, -3, 3, ++seed);
      ASSERT_NO_FATAL_FAILURE(
          compareWithCpu("cast", {}, {&x}, {Buf(to, {1000, 3})}, {0, 0}));
    }
}

//===----------------------------------------------------------------------===//
// attention, rotary
//===----------------------------------------------------------------------===//

TEST_P(CudaKernelsTyped, Attention) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  enum MaskKind { kNone, kBool, kFloat, kHalf };
  struct Case {
    int64_t b, h, hkv, tq, tk, d, dv;
    bool causal;
    MaskKind mask;
    Shape maskShape; // empty: [B, H, Tq, Tk]
  };
  const std::vector<Case> cases = {
      {2, 4, 4, 64, 64, 64, 64, false, kNone, {}},
      {2, 4, 4, 64, 64, 64, 64, true, kNone, {}},
      {1, 8, 2, 37, 37, 32, 32, true, kNone, {}},    // GQA, odd lengths
      {1, 6, 3, 20, 75, 16, 48, false, kNone, {}},   // Tq != Tk, D != Dv
      {2, 2, 1, 33, 33, 128, 128, true, kNone, {}},  // Dv in 4 per lane
      {1, 2, 2, 17, 40, 256, 200, false, kNone, {}}, // 8 per lane, big smem
      {1, 2, 2, 1, 100, 64, 64, true, kNone, {}},    // one query row
      {2, 3, 3, 24, 30, 32, 32, false, kBool, {}},
      {2, 3, 3, 24, 30, 32, 32, false, kFloat, {}},
      {2, 3, 3, 24, 30, 32, 32, true, kFloat, {24, 30}}, // broadcast mask
      {2, 3, 3, 24, 30, 32, 32, false, kHalf, {2, 1, 24, 30}},
      {2, 3, 3, 24, 30, 32, 32, false, kBool, {2, 1, 1, 30}}, // padding
      {1, 2, 1, 0, 8, 16, 16, false, kNone, {}},              // empty
  };
  unsigned seed = 1100;
  for (const Case &c : cases) {
    SCOPED_TRACE("b " + std::to_string(c.b) + " h " + std::to_string(c.h) +
                 "/" + std::to_string(c.hkv) + " tq " + std::to_string(c.tq) +
                 " tk " + std::to_string(c.tk) + " d " + std::to_string(c.d) +
                 "/" + std::to_string(c.dv) + (c.causal ? " causal" : "") +
                 " mask " + std::to_string(int(c.mask)));
    Buf q = random(dtype, {c.b, c.h, c.tq, c.d}, -2, 2, ++seed);
    Buf k = random(dtype, {c.b, c.hkv, c.tk, c.d}, -2, 2, ++seed);
    Buf v = random(dtype, {c.b, c.hkv, c.tk, c.dv}, -2, 2, ++seed);
    Shape maskShape =
        c.maskShape.empty() ? Shape{c.b, c.h, c.tq, c.tk} : c.maskShape;
    Buf mask;
    if (c.mask == kBool) {
      mask = random(DType::Bool, maskShape, 0, 2, ++seed);
      // Keep the first key of every row, so no row is wholly masked...
      int64_t tk = maskShape.back();
      for (int64_t i = 0; i < mask.size(); i += tk)
        mask.set(i, 1);
    } else if (c.mask != kNone) {
      mask = random(c.mask == kHalf ? DType::F16 : DType::F32, maskShape, -3, 1,
                    ++seed);
      // ... and -inf entries as a float mask gives them.
      for (int64_t i = 1; i < mask.size(); i += 7)
        mask.set(i, -INFINITY);
    }
    Attributes attrs = {{"causal", intA(c.causal)}};
    std::vector<const Buf *> in = {&q, &k, &v};
    if (c.mask != kNone)
      in.push_back(&mask);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("attention", attrs, in,
                                           {Buf(dtype, {c.b, c.h, c.tq, c.dv})},
                                           productTolerance(dtype)));
  }
  // A row with every key masked is NaN on both.
  {
    SCOPED_TRACE("a wholly masked row");
    Buf q = random(dtype, {1, 1, 4, 8}, -2, 2, ++seed);
    Buf k = random(dtype, {1, 1, 5, 8}, -2, 2, ++seed);
    Buf v = random(dtype, {1, 1, 5, 8}, -2, 2, ++seed);
    Buf mask = make(DType::Bool, {4, 5}, {1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
                                          1, 0, 1, 0, 1, 0, 0, 0, 0, 1});
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "attention", {{"scale", floatA(0.5)}}, {&q, &k, &v, &mask},
        {Buf(dtype, {1, 1, 4, 8})}, productTolerance(dtype)));
  }
}

TEST_P(CudaKernelsTyped, Rotary) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<Shape> shapes = {
      {2, 12, 64, 64}, {3, 17, 32}, {5, 2}, {2, 0, 8}};
  unsigned seed = 1200;
  for (const Shape &shape : shapes) {
    SCOPED_TRACE(shapeText(shape));
    Shape table(shape.end() - 2, shape.end());
    Buf x = random(dtype, shape, -3, 3, ++seed);
    Buf cos = random(dtype, table, -1, 1, ++seed);
    Buf sin = random(dtype, table, -1, 1, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "rotary", {}, {&x, &cos, &sin}, {Buf(dtype, shape)}, tolerance(dtype)));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaKernelsTyped,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtypeParamName);

//===----------------------------------------------------------------------===//
// adamw
//===----------------------------------------------------------------------===//

/// Elements of two f32 tensors whose bits differ.
int64_t differingBits(const Buf &a, const Buf &b) {
  int64_t count = 0;
  for (int64_t i = 0; i < a.size(); ++i)
    count += std::memcmp(a.as<float>() + i, b.as<float>() + i, 4) != 0;
  return count;
}

Attributes adamwAttributes() {
  return {{"lr", floatA(6e-4)},       {"weight_decay", floatA(0.1)},
          {"beta1", floatA(0.9)},     {"beta2", floatA(0.95)},
          {"eps", floatA(1e-8)},      {"max_norm", floatA(1.0)},
          {"warmup_steps", intA(10)}, {"decay_steps", intA(100)},
          {"min_lr", floatA(6e-5)}};
}

/// One parameter's state, as the CPU and the GPU start it.
struct AdamWState {
  Buf grad, param, expAvg, expAvgSq;
};

AdamWState adamwState(DType gradType, Shape shape, unsigned seed) {
  AdamWState s;
  s.grad = random(gradType, shape, -1, 1, seed);
  s.param = random(DType::F32, shape, -1, 1, seed + 1);
  s.expAvg = random(DType::F32, shape, -0.1, 0.1, seed + 2);
  s.expAvgSq = random(DType::F32, shape, 0, 0.01, seed + 3);
  return s;
}

/// The CPU's update of `s` in place.
void adamwOnCpu(const Attributes &attrs, AdamWState &s, const Buf &step,
                const Buf *sumSquares) {
  std::vector<TensorRef> in = {s.grad.ref(), step.ref()};
  if (sumSquares)
    in.push_back(sumSquares->ref());
  ASSERT_STATUS_OK(runCpuKernel(
      "adamw", attrs, in, {s.param.ref(), s.expAvg.ref(), s.expAvgSq.ref()}));
}

void expectSameBits(const AdamWState &gpu, const AdamWState &cpu,
                    const std::string &what) {
  EXPECT_EQ(differingBits(gpu.param, cpu.param), 0) << what << ": param";
  EXPECT_EQ(differingBits(gpu.expAvg, cpu.expAvg), 0) << what << ": exp_avg";
  EXPECT_EQ(differingBits(gpu.expAvgSq, cpu.expAvgSq), 0)
      << what << ": exp_avg_sq";
}

TEST(CudaKernelsTest, AdamWMatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Steps in the warmup, in the cosine decay and after it; with and
  // without clipping; every grad type.
  for (DType gradType : {DType::F32, DType::BF16, DType::F16})
    for (int64_t stepValue : {1, 7, 10, 11, 55, 100, 1000})
      for (bool clip : {false, true}) {
        std::string what = std::string(dtypeName(gradType)) + " grad, step " +
                           std::to_string(stepValue) +
                           (clip ? ", clipped" : "");
        SCOPED_TRACE(what);
        Attributes attrs = adamwAttributes();
        AdamWState cpu = adamwState(gradType, {37, 129}, 600 + stepValue);
        AdamWState gpu = cpu;
        Buf step = make(DType::I64, {}, {double(stepValue)});
        Buf sumSquares = make(DType::F32, {}, {37.5});
        ASSERT_NO_FATAL_FAILURE(
            adamwOnCpu(attrs, cpu, step, clip ? &sumSquares : nullptr));
        // Through runCudaKernel, with a tolerance of zero (equal values)...
        ASSERT_NO_FATAL_FAILURE(compareWithCpu(
            "adamw", attrs, {&gpu.grad, &step, clip ? &sumSquares : &absent()},
            {gpu.param, gpu.expAvg, gpu.expAvgSq}, {0, 0}, /*inPlace=*/true));
        // ... and through adamwMultiTensor, compared bit for bit.
        std::vector<DevicePtr> d(6);
        ASSERT_NO_FATAL_FAILURE(toDevice(gpu.grad, d[0]));
        ASSERT_NO_FATAL_FAILURE(toDevice(gpu.param, d[1]));
        ASSERT_NO_FATAL_FAILURE(toDevice(gpu.expAvg, d[2]));
        ASSERT_NO_FATAL_FAILURE(toDevice(gpu.expAvgSq, d[3]));
        ASSERT_NO_FATAL_FAILURE(toDevice(step, d[4]));
        ASSERT_NO_FATAL_FAILURE(toDevice(sumSquares, d[5]));
        ASSERT_STATUS_OK(adamwMultiTensor(
            attrs, d[4]->ref, clip ? d[5]->ref : TensorRef(),
            {{d[0]->ref, d[1]->ref, d[2]->ref, d[3]->ref}}, nullptr));
        ASSERT_CUDA(cudaDeviceSynchronize());
        ASSERT_NO_FATAL_FAILURE(toHost(d[1], gpu.param));
        ASSERT_NO_FATAL_FAILURE(toHost(d[2], gpu.expAvg));
        ASSERT_NO_FATAL_FAILURE(toHost(d[3], gpu.expAvgSq));
        expectSameBits(gpu, cpu, what);
      }
}

TEST(CudaKernelsTest, AdamWMultiTensor) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // Sizes around the 4096-element chunk, an empty one, mixed grad types,
  // and more parameters than one launch takes (512).
  std::vector<std::pair<DType, Shape>> shapes = {
      {DType::F32, {1}},        {DType::BF16, {4095}},
      {DType::F16, {4096}},     {DType::F32, {4097}},
      {DType::F32, {0, 3}},     {DType::BF16, {300, 333}},
      {DType::F32, {768, 768}},
  };
  for (int i = 0; i < 600; ++i)
    shapes.push_back({i % 2 ? DType::F32 : DType::BF16, {int64_t(1 + i % 7)}});
  Attributes attrs = adamwAttributes();
  Buf step = make(DType::I64, {}, {42});
  Buf sumSquares = make(DType::F32, {}, {123.25});
  std::vector<AdamWState> cpu, gpu;
  for (size_t i = 0; i < shapes.size(); ++i) {
    cpu.push_back(adamwState(shapes[i].first, shapes[i].second, 7000 + 4 * i));
    gpu.push_back(cpu.back());
    ASSERT_NO_FATAL_FAILURE(adamwOnCpu(attrs, cpu.back(), step, &sumSquares));
  }
  std::vector<DevicePtr> d(shapes.size() * 4);
  std::vector<AdamWTensors> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(toDevice(gpu[i].grad, d[4 * i]));
    ASSERT_NO_FATAL_FAILURE(toDevice(gpu[i].param, d[4 * i + 1]));
    ASSERT_NO_FATAL_FAILURE(toDevice(gpu[i].expAvg, d[4 * i + 2]));
    ASSERT_NO_FATAL_FAILURE(toDevice(gpu[i].expAvgSq, d[4 * i + 3]));
    params.push_back({d[4 * i]->ref, d[4 * i + 1]->ref, d[4 * i + 2]->ref,
                      d[4 * i + 3]->ref});
  }
  DevicePtr dStep, dSum;
  ASSERT_NO_FATAL_FAILURE(toDevice(step, dStep));
  ASSERT_NO_FATAL_FAILURE(toDevice(sumSquares, dSum));
  cudaStream_t stream;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  Status status =
      adamwMultiTensor(attrs, dStep->ref, dSum->ref, params, stream);
  cudaError_t synced = cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  ASSERT_TRUE(status.isOk()) << status.message();
  ASSERT_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_NO_FATAL_FAILURE(toHost(d[4 * i + 1], gpu[i].param));
    ASSERT_NO_FATAL_FAILURE(toHost(d[4 * i + 2], gpu[i].expAvg));
    ASSERT_NO_FATAL_FAILURE(toHost(d[4 * i + 3], gpu[i].expAvgSq));
    expectSameBits(gpu[i], cpu[i],
                   "parameter " + std::to_string(i) + " " +
                       shapeText(shapes[i].second));
  }

  // A bad parameter is named.
  std::vector<AdamWTensors> bad = {params[0], params[1]};
  bad[1].expAvg.shape = {7};
  Status error = adamwMultiTensor(attrs, dStep->ref, dSum->ref, bad, nullptr);
  ASSERT_FALSE(error.isOk());
  EXPECT_NE(error.message().find("parameter 1: exp_avg has shape [7]"),
            std::string::npos)
      << error.message();
}

TEST(CudaKernelsTest, AdamWSkipsStepZero) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // The CPU refuses step 0; the device cannot refuse without a sync, so
  // it leaves the parameter as it was.
  AdamWState s = adamwState(DType::F32, {1000}, 9000);
  Buf step = make(DType::I64, {}, {0});
  std::vector<DevicePtr> d(5);
  ASSERT_NO_FATAL_FAILURE(toDevice(s.grad, d[0]));
  ASSERT_NO_FATAL_FAILURE(toDevice(s.param, d[1]));
  ASSERT_NO_FATAL_FAILURE(toDevice(s.expAvg, d[2]));
  ASSERT_NO_FATAL_FAILURE(toDevice(s.expAvgSq, d[3]));
  ASSERT_NO_FATAL_FAILURE(toDevice(step, d[4]));
  ASSERT_STATUS_OK(runCudaKernel("adamw", adamwAttributes(),
                                 {d[0]->ref, d[4]->ref},
                                 {d[1]->ref, d[2]->ref, d[3]->ref}, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  Buf param = s.param;
  ASSERT_NO_FATAL_FAILURE(toHost(d[1], param));
  EXPECT_EQ(differingBits(param, s.param), 0);
}

} // namespace
