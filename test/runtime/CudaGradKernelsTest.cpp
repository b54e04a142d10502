//===- CudaGradKernelsTest.cpp - the CUDA backward kernels against the CPU's //
//
// softmax_grad, log_softmax_grad, layer_norm_grad, rms_norm_grad,
// softmax_cross_entropy_grad, softmax_cross_entropy_fused (also in place),
// nll_loss, nll_loss_grad, gather,
// embedding_grad, gather_grad, accumulate_grad, sum_squares and sgd, each
// run on the CPU and on the GPU from the same inputs (compareWithCpu) for
// f32, bf16 and f16: sums in another order within a tolerance scaled by the
// result's magnitude, the scatter-adds of the lookups' gradients and the
// elementwise optimizer steps bit for bit (they add in the CPU's order and
// round the same way). Also the loss scaling's helpers (countNonFinite,
// scaleInPlace). The tests skip without a GPU; ErrorsInsteadOfCrashes
// checks the kernels' own operand and attribute errors with or without one.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/CudaTestSupport.h"

#include <cstring>
#include <iostream>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

class CudaGradKernelsTyped : public ::testing::TestWithParam<DType> {};

/// Sums over a row or over rows, added in another order than the CPU's:
/// the absolute part relative to the largest |reference| (the results
/// cancel towards zero).
Tolerance sumTolerance(DType dtype) {
  Tolerance t = dtype == DType::F32 ? Tolerance{1e-4, 1e-5} : tolerance(dtype);
  t.scaled = true;
  return t;
}

const Tolerance kExact = {0, 0};

//===----------------------------------------------------------------------===//
// Without a device too: the kernels' own checks
//===----------------------------------------------------------------------===//

TEST(CudaGradKernelsTest, ErrorsInsteadOfCrashes) {
  for (const char *op :
       {"accumulate_grad", "embedding_grad", "gather", "gather_grad",
        "layer_norm_grad", "log_softmax_grad", "nll_loss", "nll_loss_grad",
        "rms_norm_grad", "sgd", "softmax_cross_entropy_grad", "softmax_grad",
        "sum_squares"})
    EXPECT_TRUE(std::binary_search(cudaKernelOps().begin(),
                                   cudaKernelOps().end(), std::string(op)))
        << op << " has no CUDA kernel";

  auto t = fakeTensor;
  const DType F32 = DType::F32, BF16 = DType::BF16, F64 = DType::F64,
              I64 = DType::I64;

  // softmax_grad, log_softmax_grad
  expectError(runCudaKernel("softmax_grad", {},
                            {t(F32, {2, 4}), t(F32, {2, 3})},
                            {t(F32, {2, 4})}, nullptr),
              "softmax_grad: dy has shape [2, 3], expected [2, 4]");
  expectError(runCudaKernel("log_softmax_grad", {{"axis", intA(2)}},
                            {t(F32, {2, 4}), t(F32, {2, 4})},
                            {t(F32, {2, 4})}, nullptr),
              "log_softmax_grad: axis 2 is out of range for rank 2");
  expectError(runCudaKernel("softmax_grad", {},
                            {t(F32, {2, 4}), t(BF16, {2, 4})},
                            {t(F32, {2, 4})}, nullptr),
              "dy has element type bf16, expected f32");
  expectError(runCudaKernel("softmax_grad", {},
                            {t(F64, {2, 4}), t(F64, {2, 4})},
                            {t(F64, {2, 4})}, nullptr),
              "no CUDA kernel for element type f64");

  // layer_norm_grad, rms_norm_grad
  expectError(runCudaKernel("layer_norm_grad", {},
                            {t(F32, {2, 3}), t(F32, {2, 3}), t(F32, {3})},
                            {t(F32, {2, 3}), t(F32, {4}), t(F32, {3})},
                            nullptr),
              "layer_norm_grad: dscale has shape [4], expected [3]");
  expectError(runCudaKernel("layer_norm_grad", {},
                            {t(F32, {2, 3}), t(F32, {2, 3}), TensorRef()},
                            {t(F32, {2, 3}), t(F32, {3}), t(BF16, {3})},
                            nullptr),
              "dbias has element type bf16, expected f32");
  expectError(runCudaKernel("rms_norm_grad", {},
                            {t(F32, {2, 5}), t(F32, {2, 3}), t(F32, {3})},
                            {t(F32, {2, 3}), t(F32, {3})}, nullptr),
              "rms_norm_grad: dy has shape [2, 5], expected [2, 3]");
  expectError(runCudaKernel("rms_norm_grad", {{"axis", intA(0)}},
                            {t(F32, {2, 3}), t(F32, {2, 3}), t(F32, {3})},
                            {t(F32, {2, 3}), t(F32, {3})}, nullptr),
              "scale has shape [3], expected [2, 3]");
  expectError(runCudaKernel("rms_norm_grad", {},
                            {t(F64, {2, 3}), t(F64, {2, 3}), t(F64, {3})},
                            {t(F64, {2, 3}), t(F64, {3})}, nullptr),
              "no CUDA kernel for element type f64");

  // softmax_cross_entropy_grad, nll_loss, nll_loss_grad
  expectError(runCudaKernel("softmax_cross_entropy_grad",
                            {{"reduction", stringA("avg")}},
                            {t(F32, {}), t(F32, {4, 10}), t(I64, {4})},
                            {t(F32, {4, 10})}, nullptr),
              "reduction must be");
  expectError(runCudaKernel("softmax_cross_entropy_grad",
                            {{"reduction", stringA("none")}},
                            {t(F32, {}), t(F32, {4, 10}), t(I64, {4})},
                            {t(F32, {4, 10})}, nullptr),
              "dloss has shape [], expected [4]");
  expectError(runCudaKernel("softmax_cross_entropy_grad", {},
                            {t(F32, {}), t(F32, {4, 10}), t(I64, {4})},
                            {t(F32, {4, 11})}, nullptr),
              "the result has shape [4, 11], expected [4, 10]");
  expectError(runCudaKernel("softmax_cross_entropy_grad", {},
                            {t(F32, {}), t(F32, {4, 10}), t(F32, {4})},
                            {t(F32, {4, 10})}, nullptr),
              "no kernel for element type f32 (target)");
  expectError(runCudaKernel("nll_loss", {},
                            {t(F32, {4, 10, 3}), t(I64, {4})}, {t(F32, {})},
                            nullptr),
              "nll_loss: target has shape [4], expected [4, 3]");
  expectError(runCudaKernel("nll_loss", {{"reduction", stringA("none")}},
                            {t(F32, {4, 10}), t(I64, {4})}, {t(F32, {})},
                            nullptr),
              "the result has shape [], expected [4]");
  expectError(runCudaKernel("nll_loss_grad", {}, {t(F32, {}), t(I64, {4})},
                            {t(F32, {4})}, nullptr),
              "nll_loss_grad: the result must have rank 2 or more");
  expectError(runCudaKernel("nll_loss_grad", {}, {t(BF16, {}), t(I64, {4})},
                            {t(F32, {4, 10})}, nullptr),
              "dloss has element type bf16, expected f32");

  // gather, embedding_grad, gather_grad
  expectError(runCudaKernel("gather", {{"axis", intA(3)}},
                            {t(F32, {5, 4}), t(I64, {3})}, {t(F32, {3, 4})},
                            nullptr),
              "gather: axis 3 is out of range for rank 2");
  expectError(runCudaKernel("gather", {{"axis", intA(1)}},
                            {t(F32, {5, 4}), t(I64, {3})}, {t(F32, {3, 4})},
                            nullptr),
              "the result has shape [3, 4], expected [5, 3]");
  expectError(runCudaKernel("gather", {}, {t(F32, {5, 4}), t(F32, {3})},
                            {t(F32, {3, 4})}, nullptr),
              "no kernel for element type f32 (indices)");
  expectError(runCudaKernel("embedding_grad", {},
                            {t(F32, {3, 4}), t(I64, {3})}, {t(F32, {40})},
                            nullptr),
              "embedding_grad: the result must have rank 2");
  expectError(runCudaKernel("embedding_grad", {},
                            {t(F32, {3, 5}), t(I64, {3})}, {t(F32, {10, 4})},
                            nullptr),
              "dy has shape [3, 5], expected [3, 4]");
  expectError(runCudaKernel("embedding_grad", {{"padding_idx", intA(10)}},
                            {t(F32, {3, 4}), t(I64, {3})}, {t(F32, {10, 4})},
                            nullptr),
              "embedding_grad: padding_idx 10 is not a row of the 10-row "
              "table");
  expectError(runCudaKernel("gather_grad", {{"axis", intA(1)}},
                            {t(F32, {2, 4, 3}), t(I64, {3})},
                            {t(F32, {2, 7, 3})}, nullptr),
              "gather_grad: dy has shape [2, 4, 3], expected [2, 3, 3]");
  expectError(runCudaKernel("gather_grad", {}, {t(I64, {3}), t(I64, {3})},
                            {t(I64, {7})}, nullptr),
              "no CUDA kernel for element type i64");

  // accumulate_grad, sum_squares, sgd
  expectError(runCudaKernel("accumulate_grad", {}, {t(F32, {4})},
                            {t(BF16, {4})}, nullptr),
              "cannot add a f32 gradient into a bf16 gradient buffer");
  expectError(runCudaKernel("accumulate_grad", {}, {t(F32, {4})},
                            {t(F32, {5})}, nullptr),
              "grad is f32[4], but the gradient buffer is f32[5]");
  expectError(runCudaKernel("sum_squares", {}, {t(F32, {4}), t(F64, {4})},
                            {t(F32, {})}, nullptr),
              "no CUDA kernel for element type f64 (operand 1)");
  expectError(runCudaKernel("sum_squares", {}, {t(F32, {4})}, {t(F32, {1})},
                            nullptr),
              "the result must be an f32 scalar, got f32[1]");
  Attributes sgd = {{"lr", floatA(0.1)}};
  Attributes momentum = {{"lr", floatA(0.1)}, {"momentum", floatA(0.9)}};
  expectError(runCudaKernel("sgd", momentum, {t(F32, {4}), t(I64, {})},
                            {t(F32, {4})}, nullptr),
              "needs a momentum buffer as result 1");
  expectError(runCudaKernel("sgd", sgd, {t(F32, {4}), t(I64, {})},
                            {t(F32, {4}), t(F32, {4})}, nullptr),
              "a momentum buffer without momentum");
  expectError(runCudaKernel("sgd", momentum, {t(F32, {4}), t(I64, {})},
                            {t(F32, {4}), t(F32, {3})}, nullptr),
              "the momentum buffer has shape [3], expected [4]");
  expectError(runCudaKernel("sgd", sgd, {t(F32, {3}), t(I64, {})},
                            {t(F32, {4})}, nullptr),
              "grad is f32[3], but the parameter is f32[4]");
  expectError(runCudaKernel("sgd", sgd, {t(F32, {4}), t(DType::I32, {})},
                            {t(F32, {4})}, nullptr),
              "step must be an i64 scalar, got i32[]");
  expectError(runCudaKernel("sgd", {}, {t(F32, {4}), t(I64, {})},
                            {t(F32, {4})}, nullptr),
              "sgd: missing attribute 'lr'");
  expectError(runCudaKernel("sgd", sgd, {t(F64, {4}), t(I64, {})},
                            {t(F32, {4})}, nullptr),
              "no CUDA kernel for element type f64 (grad)");
  expectError(runCudaKernel("sgd", sgd, {t(F32, {4}), t(I64, {})},
                            {t(F32, {4}), t(F32, {4}), t(F32, {4})}, nullptr),
              "sgd: got 3 results");

  // The loss scaling's helpers.
  expectError(cuda::countNonFinite(t(BF16, {4}), nullptr, nullptr),
              "countNonFinite: expected an f32 tensor, got bf16[4]");
  expectError(cuda::scaleInPlace(t(F64, {4}), 2.0f, nullptr),
              "scaleInPlace: expected an f32 tensor, got f64[4]");
  unsigned flag = 0;
  ASSERT_STATUS_OK(cuda::countNonFinite(t(F32, {0}), &flag, nullptr));
  ASSERT_STATUS_OK(cuda::scaleInPlace(t(F32, {3, 0}), 2.0f, nullptr));

  if (cudaDeviceCount() > 0)
    return;
  // No device: errors that name the op and the failed call, not crashes.
  // The pointers are never dereferenced: every launch or allocation fails.
  std::vector<std::pair<std::string, Status>> runs;
  auto run = [&](const std::string &op, const Attributes &attrs,
                 const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
    runs.emplace_back(op, runCudaKernel(op, attrs, in, out, nullptr));
  };
  run("softmax_grad", {}, {t(F32, {2, 4}), t(F32, {2, 4})}, {t(F32, {2, 4})});
  run("log_softmax_grad", {{"axis", intA(0)}},
      {t(BF16, {2, 4}), t(BF16, {2, 4})}, {t(BF16, {2, 4})});
  run("layer_norm_grad", {}, {t(F32, {2, 3}), t(F32, {2, 3}), TensorRef()},
      {t(F32, {2, 3}), t(F32, {3}), t(F32, {3})});
  run("rms_norm_grad", {}, {t(F32, {2, 3}), t(F32, {2, 3}), t(F32, {3})},
      {t(F32, {2, 3}), t(F32, {3})});
  run("softmax_cross_entropy_grad", {},
      {t(F32, {}), t(F32, {4, 10}), t(I64, {4})}, {t(F32, {4, 10})});
  run("nll_loss", {{"reduction", stringA("none")}},
      {t(F32, {4, 10}), t(I64, {4})}, {t(F32, {4})});
  run("nll_loss_grad", {{"reduction", stringA("sum")}},
      {t(F32, {}), t(I64, {4})}, {t(F32, {4, 10})});
  run("gather", {}, {t(F32, {5, 4}), t(I64, {3})}, {t(F32, {3, 4})});
  run("embedding_grad", {}, {t(F32, {3, 4}), t(I64, {3})}, {t(F32, {10, 4})});
  run("gather_grad", {}, {t(F32, {3, 4}), t(I64, {3})}, {t(F32, {5, 4})});
  run("accumulate_grad", {}, {t(BF16, {4})}, {t(F32, {4})});
  run("sum_squares", {}, {t(F32, {4}), t(BF16, {4})}, {t(F32, {})});
  run("sgd", sgd, {t(F32, {4}), t(I64, {})}, {t(F32, {4})});
  for (const auto &[op, status] : runs) {
    EXPECT_FALSE(status.isOk()) << op << " ran without a device";
    EXPECT_NE(status.message().find(op + ": "), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("failed"), std::string::npos)
        << status.message();
  }
  for (Status s : {cuda::countNonFinite(t(F32, {4}), &flag, nullptr),
                   cuda::scaleInPlace(t(F32, {4}), 2.0f, nullptr)})
    expectError(s, "failed");
}

//===----------------------------------------------------------------------===//
// softmax_grad, log_softmax_grad
//===----------------------------------------------------------------------===//

TEST_P(CudaGradKernelsTyped, SoftmaxGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{64, 1000}, -1},  {{7, 3001}, -1}, {{5, 3}, -1},      {{1, 1}, -1},
      {{3, 2, 1500}, 2}, {{4, 33, 6}, 1}, {{2, 3, 4, 5}, 0}, {{0, 8}, -1},
      {{3, 0, 4}, 1},
  };
  unsigned seed = 100;
  for (const char *op : {"softmax_grad", "log_softmax_grad"})
    for (const auto &[shape, axis] : cases) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(shape) + " axis " +
                   std::to_string(axis));
      bool log = std::string(op) == "log_softmax_grad";
      // y: probabilities, or log-probabilities.
      Buf y = log ? random(dtype, shape, -8, 0, ++seed)
                  : random(dtype, shape, 0, 1, ++seed);
      Buf dy = random(dtype, shape, -1, 1, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(op, {{"axis", intA(axis)}},
                                             {&y, &dy}, {Buf(dtype, shape)},
                                             sumTolerance(dtype)));
    }
}

//===----------------------------------------------------------------------===//
// layer_norm_grad, rms_norm_grad
//===----------------------------------------------------------------------===//

TEST_P(CudaGradKernelsTyped, LayerNormGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    Shape shape;
    int64_t axis;
    bool scale;
  };
  const std::vector<Case> cases = {
      {{32, 768}, -1, true},  {{3, 5, 17}, -1, true},
      {{3, 5, 17}, -1, false}, {{4, 2000}, -1, true}, // rows over 1024
      {{6, 4, 8}, 1, true},    {{2, 3}, 0, true},
      {{2048, 33}, -1, true},  // many rows per chunk of the weight sums
      {{1, 1}, -1, true},      {{0, 16}, -1, true}, // no rows: zero dscale
      {{4, 0}, -1, true},
  };
  unsigned seed = 200;
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeText(c.shape) + " axis " + std::to_string(c.axis) +
                 (c.scale ? " scale" : ""));
    int64_t axis = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
    Shape normalized(c.shape.begin() + axis, c.shape.end());
    Buf dy = random(dtype, c.shape, -1, 1, ++seed);
    Buf x = random(dtype, c.shape, -3, 5, ++seed);
    Buf scale = random(dtype, normalized, 0.5, 1.5, ++seed);
    Attributes attrs = {{"axis", intA(c.axis)}, {"epsilon", floatA(1e-5)}};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "layer_norm_grad", attrs, {&dy, &x, c.scale ? &scale : &absent()},
        {Buf(dtype, c.shape), Buf(dtype, normalized), Buf(dtype, normalized)},
        sumTolerance(dtype)));
  }
}

TEST_P(CudaGradKernelsTyped, RmsNormGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{32, 768}, -1}, {{3, 5, 17}, -1}, {{3, 5, 17}, 1},
      {{2, 4096}, -1}, {{1500, 65}, -1}, {{0, 7}, -1}};
  unsigned seed = 300;
  for (const auto &[shape, axis] : cases) {
    SCOPED_TRACE(shapeText(shape) + " axis " + std::to_string(axis));
    int64_t a = axis < 0 ? axis + int64_t(shape.size()) : axis;
    Shape normalized(shape.begin() + a, shape.end());
    Buf dy = random(dtype, shape, -1, 1, ++seed);
    Buf x = random(dtype, shape, -3, 3, ++seed);
    Buf scale = random(dtype, normalized, 0.5, 1.5, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "rms_norm_grad", {{"axis", intA(axis)}, {"epsilon", floatA(1e-6)}},
        {&dy, &x, &scale}, {Buf(dtype, shape), Buf(dtype, normalized)},
        sumTolerance(dtype)));
  }
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy_grad, nll_loss, nll_loss_grad
//===----------------------------------------------------------------------===//

struct LossCase {
  Shape shape;
  const char *reduction;
  DType idType;
  bool ignore;
};

std::vector<LossCase> lossCases() {
  std::vector<LossCase> cases;
  for (const Shape &shape : std::vector<Shape>{{64, 1000},
                                               {7, 50257},
                                               {5, 3},
                                               {4, 5, 3},
                                               {2, 7, 3, 4},
                                               {0, 10}})
    for (const char *reduction : {"none", "sum", "mean"})
      for (DType idType : {DType::I64, DType::I32})
        for (bool ignore : {false, true})
          cases.push_back({shape, reduction, idType, ignore});
  return cases;
}

std::string lossCaseText(const LossCase &c) {
  return shapeText(c.shape) + " " + c.reduction + " " + dtypeName(c.idType) +
         (c.ignore ? " ignore_index" : "");
}

Shape targetShapeOf(const Shape &shape) {
  Shape target{shape[0]};
  target.insert(target.end(), shape.begin() + 2, shape.end());
  return target;
}

/// Targets in [0, C), every third one ignore_index (-100) when `ignore`.
Buf targetsFor(const LossCase &c, Attributes &attrs, unsigned seed) {
  Buf target = random(c.idType, targetShapeOf(c.shape), 0,
                      double(c.shape[1]), seed);
  attrs["reduction"] = stringA(c.reduction);
  if (c.ignore) {
    attrs["ignore_index"] = intA(-100);
    for (int64_t i = 0; i < target.size(); i += 3)
      target.set(i, -100);
  }
  return target;
}

/// dloss: one per position (none) or a scalar.
Buf dlossFor(DType dtype, const LossCase &c, unsigned seed) {
  Shape shape = std::string(c.reduction) == "none" ? targetShapeOf(c.shape)
                                                   : Shape{};
  return random(dtype, shape, 0.5, 2, seed);
}

TEST_P(CudaGradKernelsTyped, SoftmaxCrossEntropyGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // exp(x - logsumexp) in float: a few ulps of the shift.
  Tolerance tol =
      dtype == DType::F32 ? Tolerance{5e-5, 1e-6, true} : tolerance(dtype);
  unsigned seed = 400;
  for (const LossCase &c : lossCases()) {
    SCOPED_TRACE(lossCaseText(c));
    Attributes attrs;
    Buf target = targetsFor(c, attrs, ++seed);
    Buf x = random(dtype, c.shape, -8, 8, ++seed);
    Buf dloss = dlossFor(dtype, c, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("softmax_cross_entropy_grad", attrs,
                                           {&dloss, &x, &target},
                                           {Buf(dtype, c.shape)}, tol));
  }
  // Every target ignored: zeros (the mean's 0 / 0 is never used).
  Buf x = random(dtype, {6, 11}, -8, 8, ++seed);
  Buf target = make(DType::I64, {6}, {-1, -1, -1, -1, -1, -1});
  Buf dloss = make(dtype, {}, {1.0});
  ASSERT_NO_FATAL_FAILURE(compareWithCpu(
      "softmax_cross_entropy_grad",
      {{"reduction", stringA("mean")}, {"ignore_index", intA(-1)}},
      {&dloss, &x, &target}, {Buf(dtype, {6, 11})}, kExact));
}

TEST_P(CudaGradKernelsTyped, NllLoss) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // Sums of many losses: the CPU adds in double, the GPU in double in
  // another order.
  Tolerance tol = dtype == DType::F32 ? Tolerance{1e-5, 1e-5} : tolerance(dtype);
  unsigned seed = 500;
  for (const LossCase &c : lossCases()) {
    SCOPED_TRACE(lossCaseText(c));
    Attributes attrs;
    Buf target = targetsFor(c, attrs, ++seed);
    Buf x = random(dtype, c.shape, -8, 0, ++seed); // log-probabilities
    Shape out = std::string(c.reduction) == "none" ? targetShapeOf(c.shape)
                                                   : Shape{};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("nll_loss", attrs, {&x, &target},
                                           {Buf(dtype, out)}, tol));
  }
  for (const char *reduction : {"sum", "mean"}) {
    SCOPED_TRACE(std::string("all ignored, ") + reduction);
    Buf x = random(dtype, {6, 11}, -8, 0, ++seed);
    Buf target = make(DType::I32, {6}, {7, 7, 7, 7, 7, 7});
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "nll_loss",
        {{"reduction", stringA(reduction)}, {"ignore_index", intA(7)}},
        {&x, &target}, {Buf(dtype, {})}, tolerance(dtype)));
  }
}

TEST_P(CudaGradKernelsTyped, NllLossGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 600;
  for (const LossCase &c : lossCases()) {
    SCOPED_TRACE(lossCaseText(c));
    Attributes attrs;
    Buf target = targetsFor(c, attrs, ++seed);
    Buf dloss = dlossFor(dtype, c, ++seed);
    // -dloss (over the counted targets for mean) at the target, as the CPU
    // computes it: the same value.
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("nll_loss_grad", attrs,
                                           {&dloss, &target},
                                           {Buf(dtype, c.shape)}, kExact));
  }
}

TEST_P(CudaGradKernelsTyped, SoftmaxCrossEntropyFused) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // The loss as SoftmaxCrossEntropy's (sums in double in another order),
  // the gradient as SoftmaxCrossEntropyGrad's (a few ulps of the shift).
  Tolerance tol =
      dtype == DType::F32 ? Tolerance{5e-5, 1e-5, true} : tolerance(dtype);
  unsigned seed = 800;
  for (const LossCase &c : lossCases()) {
    SCOPED_TRACE(lossCaseText(c));
    Attributes attrs;
    Buf target = targetsFor(c, attrs, ++seed);
    Buf x = random(dtype, c.shape, -8, 8, ++seed);
    Buf dloss = dlossFor(dtype, c, ++seed);
    Shape lossShape = std::string(c.reduction) == "none"
                          ? targetShapeOf(c.shape)
                          : Shape{};
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "softmax_cross_entropy_fused", attrs, {&x, &target, &dloss},
        {Buf(dtype, lossShape), Buf(dtype, c.shape)}, tol));
  }
  // Every target ignored: zeros, and the mean's 0 / 0 = NaN loss.
  for (const char *reduction : {"sum", "mean"}) {
    SCOPED_TRACE(std::string("all ignored, ") + reduction);
    Buf x = random(dtype, {6, 11}, -8, 8, ++seed);
    Buf target = make(DType::I64, {6}, {-1, -1, -1, -1, -1, -1});
    Buf dloss = make(dtype, {}, {1.0});
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "softmax_cross_entropy_fused",
        {{"reduction", stringA(reduction)}, {"ignore_index", intA(-1)}},
        {&x, &target, &dloss}, {Buf(dtype, {}), Buf(dtype, {6, 11})},
        tolerance(dtype)));
  }
}

TEST(CudaGradKernelsTest, SoftmaxCrossEntropyFusedInPlace) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // The memory plan writes the gradient over the logits: the same results
  // as into a buffer of its own (rows and positions kernels).
  for (const Shape &shape : std::vector<Shape>{{9, 1500}, {3, 37, 5}}) {
    SCOPED_TRACE(shapeText(shape));
    Shape targetShape = targetShapeOf(shape);
    Buf x = random(DType::F32, shape, -8, 8, 850);
    Buf target = random(DType::I64, targetShape, 0, double(shape[1]), 851);
    target.set(1, -100);
    Buf dloss = make(DType::F32, {}, {0.5});
    Attributes attrs{{"reduction", stringA("mean")},
                     {"ignore_index", intA(-100)}};
    Buf loss(DType::F32, {}), grad(DType::F32, shape);
    Buf lossInPlace(DType::F32, {}), gradInPlace(DType::F32, shape);
    DevicePtr dX, dT, dD, dL, dG;
    ASSERT_NO_FATAL_FAILURE(toDevice(x, dX));
    ASSERT_NO_FATAL_FAILURE(toDevice(target, dT));
    ASSERT_NO_FATAL_FAILURE(toDevice(dloss, dD));
    ASSERT_NO_FATAL_FAILURE(toDevice(loss, dL));
    ASSERT_NO_FATAL_FAILURE(toDevice(grad, dG));
    ASSERT_STATUS_OK(runCudaKernel("softmax_cross_entropy_fused", attrs,
                                   {dX->ref, dT->ref, dD->ref},
                                   {dL->ref, dG->ref}, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    ASSERT_NO_FATAL_FAILURE(toHost(dL, loss));
    ASSERT_NO_FATAL_FAILURE(toHost(dG, grad));
    ASSERT_STATUS_OK(runCudaKernel("softmax_cross_entropy_fused", attrs,
                                   {dX->ref, dT->ref, dD->ref},
                                   {dL->ref, dX->ref}, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    ASSERT_NO_FATAL_FAILURE(toHost(dL, lossInPlace));
    ASSERT_NO_FATAL_FAILURE(toHost(dX, gradInPlace));
    expectClose(lossInPlace, loss, kExact, "loss in place");
    expectClose(gradInPlace, grad, kExact, "dinput in place");
  }
}

/// Without a device: the fused kernel's checks are those of the CPU's.
TEST(CudaGradKernelsTest, SoftmaxCrossEntropyFusedErrors) {
  EXPECT_TRUE(std::binary_search(cudaKernelOps().begin(),
                                 cudaKernelOps().end(),
                                 std::string("softmax_cross_entropy_fused")))
      << "softmax_cross_entropy_fused has no CUDA kernel";
  auto t = fakeTensor;
  const DType F32 = DType::F32, BF16 = DType::BF16, F64 = DType::F64,
              I64 = DType::I64;
  const char *op = "softmax_cross_entropy_fused";
  Attributes mean{{"reduction", stringA("mean")}};
  expectError(runCudaKernel(op, {{"reduction", stringA("avg")}},
                            {t(F32, {4, 10}), t(I64, {4}), t(F32, {})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "softmax_cross_entropy_fused: reduction must be");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(I64, {3}), t(F32, {})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "target has shape [3], expected [4]");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(I64, {4}), t(F32, {4})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "dloss has shape [4], expected []");
  expectError(runCudaKernel(op, {{"reduction", stringA("none")}},
                            {t(F32, {4, 10}), t(I64, {4}), t(F32, {4})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "the result has shape [], expected [4]");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(I64, {4}), t(BF16, {})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "dloss has element type bf16, expected f32");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(I64, {4}), t(F32, {})},
                            {t(F32, {}), t(F32, {4, 11})}, nullptr),
              "dinput has shape [4, 11], expected [4, 10]");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(F32, {4}), t(F32, {})},
                            {t(F32, {}), t(F32, {4, 10})}, nullptr),
              "no kernel for element type f32 (target)");
  expectError(runCudaKernel(op, mean,
                            {t(F64, {4, 10}), t(I64, {4}), t(F64, {})},
                            {t(F64, {}), t(F64, {4, 10})}, nullptr),
              "no CUDA kernel for element type f64");
  expectError(runCudaKernel(op, mean,
                            {t(F32, {4, 10}), t(I64, {4}), t(F32, {})},
                            {t(F32, {})}, nullptr),
              "got 1 result, expected 2");
}

TEST(CudaGradKernelsTest, OutOfRangeTargetsGiveNaN) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // The CPU refuses them; the device marks the position's gradient (NaN)
  // instead, and the loss as softmax_cross_entropy does.
  Buf x = random(DType::F32, {3, 4}, -1, 1, 700);
  Buf target = make(DType::I64, {3}, {0, 4, -1});
  Buf dloss = make(DType::F32, {}, {1.0});
  DevicePtr dX, dTarget, dLoss, dOut;
  ASSERT_NO_FATAL_FAILURE(toDevice(x, dX));
  ASSERT_NO_FATAL_FAILURE(toDevice(target, dTarget));
  ASSERT_NO_FATAL_FAILURE(toDevice(dloss, dLoss));
  for (const char *op : {"softmax_cross_entropy_grad", "nll_loss_grad"}) {
    SCOPED_TRACE(op);
    bool ce = std::string(op) == "softmax_cross_entropy_grad";
    Buf out(DType::F32, {3, 4});
    ASSERT_NO_FATAL_FAILURE(toDevice(out, dOut));
    std::vector<TensorRef> in = {dLoss->ref};
    if (ce)
      in.push_back(dX->ref);
    in.push_back(dTarget->ref);
    ASSERT_STATUS_OK(runCudaKernel(op, {{"reduction", stringA("sum")}}, in,
                                   {dOut->ref}, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    ASSERT_NO_FATAL_FAILURE(toHost(dOut, out));
    for (int64_t c = 0; c < 4; ++c) {
      EXPECT_TRUE(std::isfinite(out.at(c)));
      EXPECT_TRUE(std::isnan(out.at(4 + c)));
      EXPECT_TRUE(std::isnan(out.at(8 + c)));
    }
  }
  Buf losses(DType::F32, {3});
  DevicePtr dLosses;
  ASSERT_NO_FATAL_FAILURE(toDevice(losses, dLosses));
  ASSERT_STATUS_OK(runCudaKernel("nll_loss", {{"reduction", stringA("none")}},
                                 {dX->ref, dTarget->ref}, {dLosses->ref},
                                 nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_NO_FATAL_FAILURE(toHost(dLosses, losses));
  EXPECT_EQ(losses.at(0), -x.at(0));
  EXPECT_TRUE(std::isnan(losses.at(1)));
  EXPECT_TRUE(std::isnan(losses.at(2)));
}

//===----------------------------------------------------------------------===//
// gather, embedding_grad, gather_grad
//===----------------------------------------------------------------------===//

struct GatherCase {
  Shape data;
  int64_t axis;
  Shape indices;
  DType idType;
  size_t offset; // bytes into the allocations (indices stay aligned):
                 // narrower copies
};

const std::vector<GatherCase> &gatherCases() {
  static const std::vector<GatherCase> cases = {
      {{1000, 768}, 0, {4, 17}, DType::I64, 0},
      {{1000, 768}, 0, {4, 17}, DType::I32, 0},
      {{5, 40, 33}, 1, {9}, DType::I64, 0},
      {{5, 40, 33}, 1, {3, 3}, DType::I32, 4},
      {{6, 7, 5}, -1, {11}, DType::I64, 8}, // inner of one element
      {{7, 4}, 0, {}, DType::I64, 0},       // a scalar index
      {{7, 4}, 0, {3, 5}, DType::I64, 8},   // repeated indices
      {{7, 8}, 0, {0}, DType::I64, 0},      // no indices
      {{7, 0}, 0, {5}, DType::I64, 0},      // empty rows
  };
  return cases;
}

std::string gatherCaseText(const GatherCase &c) {
  return shapeText(c.data) + " axis " + std::to_string(c.axis) + " indices " +
         shapeText(c.indices) + " " + dtypeName(c.idType) + " offset " +
         std::to_string(c.offset);
}

/// The gathered shape, with data [outer, axisSize, inner] around the axis.
Shape gatheredShape(const GatherCase &c, int64_t &axisSize) {
  int64_t axis = c.axis < 0 ? c.axis + int64_t(c.data.size()) : c.axis;
  axisSize = c.data[axis];
  Shape out(c.data.begin(), c.data.begin() + axis);
  out.insert(out.end(), c.indices.begin(), c.indices.end());
  out.insert(out.end(), c.data.begin() + axis + 1, c.data.end());
  return out;
}

void checkGather(DType dtype, unsigned seed) {
  for (const GatherCase &c : gatherCases()) {
    SCOPED_TRACE(gatherCaseText(c) + " " + dtypeName(dtype));
    int64_t axisSize;
    Shape out = gatheredShape(c, axisSize);
    Buf data = random(dtype, c.data, -100, 100, ++seed);
    // Negative indices count from the end.
    Buf indices = random(c.idType, c.indices, -double(axisSize),
                         double(axisSize), ++seed);
    size_t offset = c.offset % dtypeSize(dtype) == 0 ? c.offset : 0;
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("gather", {{"axis", intA(c.axis)}},
                                           {&data, &indices}, {Buf(dtype, out)},
                                           kExact, /*inPlace=*/false, offset));
  }
}

TEST_P(CudaGradKernelsTyped, Gather) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_NO_FATAL_FAILURE(checkGather(GetParam(), 800));
}

TEST(CudaGradKernelsTest, GatherMovesAnyElementType) {
  SKIP_WITHOUT_CUDA_DEVICE();
  unsigned seed = 900;
  for (DType dtype : {DType::I64, DType::I32, DType::U8, DType::Bool,
                      DType::F64, DType::I16})
    ASSERT_NO_FATAL_FAILURE(checkGather(dtype, seed += 100));
}

TEST_P(CudaGradKernelsTyped, EmbeddingGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    int64_t vocabulary, dim;
    Shape ids;
    DType idType;
    int64_t padding = -1; // padding_idx, when not negative
  };
  const std::vector<Case> cases = {
      {1000, 768, {4, 17}, DType::I64}, {1000, 768, {4, 17}, DType::I32},
      {50257, 64, {2, 300}, DType::I64}, // mostly untouched rows
      {50, 33, {9}, DType::I64},         {7, 1, {3, 5}, DType::I64},
      {3, 1500, {40}, DType::I32}, // many repeats, rows over 1024
      {7, 8, {0}, DType::I64},     // no ids: zeros
      {7, 0, {5}, DType::I64},     {0, 4, {0}, DType::I64},
      // nn.Embedding's padding row: zero however often it is picked.
      {3, 1500, {40}, DType::I32, 1}, {7, 33, {3, 5}, DType::I64, 0},
      {7, 33, {3, 5}, DType::I64, 6},   {1000, 768, {4, 17}, DType::I64, 999},
  };
  unsigned seed = 1000;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.vocabulary) + " x " + std::to_string(c.dim) +
                 " ids " + shapeText(c.ids) + " " + dtypeName(c.idType) +
                 " padding_idx " + std::to_string(c.padding));
    Shape dyShape = c.ids;
    dyShape.push_back(c.dim);
    Buf dy = random(dtype, dyShape, -1, 1, ++seed);
    Buf ids = random(c.idType, c.ids, -double(c.vocabulary),
                     double(c.vocabulary), ++seed);
    // The rows are added in the CPU's order and rounded the same way.
    Attributes attrs;
    if (c.padding >= 0)
      attrs["padding_idx"] = intA(c.padding);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("embedding_grad", attrs,
                                           {&dy, &ids},
                                           {Buf(dtype, {c.vocabulary, c.dim})},
                                           kExact));
  }
}

TEST_P(CudaGradKernelsTyped, GatherGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 1100;
  for (const GatherCase &c : gatherCases()) {
    SCOPED_TRACE(gatherCaseText(c));
    int64_t axisSize;
    Shape dyShape = gatheredShape(c, axisSize);
    Buf dy = random(dtype, dyShape, -1, 1, ++seed);
    Buf indices = random(c.idType, c.indices, -double(axisSize),
                         double(axisSize), ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "gather_grad", {{"axis", intA(c.axis)}}, {&dy, &indices},
        {Buf(dtype, c.data)}, kExact, /*inPlace=*/false,
        c.offset % dtypeSize(dtype) == 0 ? c.offset : 0));
  }
}

//===----------------------------------------------------------------------===//
// accumulate_grad, sum_squares, sgd
//===----------------------------------------------------------------------===//

TEST_P(CudaGradKernelsTyped, AccumulateGrad) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 1200;
  // Into a buffer of the same type, and a 16-bit gradient into f32.
  for (DType accType : {dtype, DType::F32})
    for (const Shape &shape :
         {Shape{1000, 129}, Shape{17, 1 << 20}, Shape{}, Shape{0, 5}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " into " +
                   dtypeName(accType) + " " + shapeText(shape));
      Buf grad = random(dtype, shape, -1, 1, ++seed);
      Buf acc = random(accType, shape, -1, 1, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu("accumulate_grad", {}, {&grad},
                                             {acc}, kExact,
                                             /*inPlace=*/true));
    }
}

TEST_P(CudaGradKernelsTyped, SumSquares) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  // Around the 2^14-element blocks, an empty operand, mixed types, and more
  // operands than one launch takes (512).
  std::vector<Buf> operands;
  unsigned seed = 1300;
  for (const Shape &shape : {Shape{1}, Shape{16383}, Shape{16384},
                             Shape{16385}, Shape{0, 3}, Shape{300, 333},
                             Shape{768, 768}, Shape{}})
    operands.push_back(random(dtype, shape, -1, 1, ++seed));
  operands.push_back(random(DType::F32, {4097}, -1, 1, ++seed));
  std::vector<const Buf *> few;
  for (const Buf &b : operands)
    few.push_back(&b);
  // The CPU and GPU add doubles in different orders, then round to float.
  Tolerance tol = {1e-6, 0};
  ASSERT_NO_FATAL_FAILURE(
      compareWithCpu("sum_squares", {}, few, {Buf(DType::F32, {})}, tol));
  for (int i = 0; i < 600; ++i)
    operands.push_back(
        random(i % 2 ? dtype : DType::F32, {int64_t(1 + i % 7)}, -3, 3, ++seed));
  std::vector<const Buf *> many;
  for (const Buf &b : operands)
    many.push_back(&b);
  ASSERT_NO_FATAL_FAILURE(
      compareWithCpu("sum_squares", {}, many, {Buf(DType::F32, {})}, tol));
  Buf empty(dtype, {0});
  ASSERT_NO_FATAL_FAILURE(
      compareWithCpu("sum_squares", {}, {&empty}, {Buf(DType::F32, {})}, tol));
}

TEST_P(CudaGradKernelsTyped, SgdMatchesCpuBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType gradType = GetParam();
  // Steps in the warmup, in the cosine decay and after it (the first step
  // starts the momentum buffer); with and without clipping, weight decay
  // and momentum.
  unsigned seed = 1400;
  for (int64_t stepValue : {1, 7, 10, 11, 55, 100, 1000})
    for (bool clip : {false, true})
      for (double decay : {0.0, 0.01})
        for (double momentum : {0.0, 0.9}) {
          SCOPED_TRACE("step " + std::to_string(stepValue) +
                       (clip ? ", clipped" : "") + ", weight_decay " +
                       std::to_string(decay) + ", momentum " +
                       std::to_string(momentum));
          Attributes attrs = {{"lr", floatA(0.05)},
                              {"weight_decay", floatA(decay)},
                              {"momentum", floatA(momentum)},
                              {"max_norm", floatA(1.0)},
                              {"warmup_steps", intA(10)},
                              {"decay_steps", intA(100)},
                              {"min_lr", floatA(0.005)}};
          Shape shape = {37, 129};
          Buf grad = random(gradType, shape, -1, 1, ++seed);
          Buf step = make(DType::I64, {}, {double(stepValue)});
          Buf sumSquares = make(DType::F32, {}, {37.5});
          std::vector<Buf> state = {random(DType::F32, shape, -1, 1, ++seed)};
          if (momentum != 0)
            state.push_back(random(DType::F32, shape, -0.1, 0.1, ++seed));
          ASSERT_NO_FATAL_FAILURE(compareWithCpu(
              "sgd", attrs, {&grad, &step, clip ? &sumSquares : &absent()},
              state, kExact, /*inPlace=*/true));
        }
}

TEST(CudaGradKernelsTest, SgdSkipsStepZero) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // The CPU refuses step 0; the device cannot refuse without a sync, so
  // it leaves the parameter as it was.
  Buf grad = random(DType::F32, {1000}, -1, 1, 1500);
  Buf param = random(DType::F32, {1000}, -1, 1, 1501);
  Buf step = make(DType::I64, {}, {0});
  DevicePtr dGrad, dParam, dStep;
  ASSERT_NO_FATAL_FAILURE(toDevice(grad, dGrad));
  ASSERT_NO_FATAL_FAILURE(toDevice(param, dParam));
  ASSERT_NO_FATAL_FAILURE(toDevice(step, dStep));
  ASSERT_STATUS_OK(runCudaKernel("sgd", {{"lr", floatA(0.1)}},
                                 {dGrad->ref, dStep->ref}, {dParam->ref},
                                 nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  Buf after = param;
  ASSERT_NO_FATAL_FAILURE(toHost(dParam, after));
  EXPECT_EQ(std::memcmp(after.bytes.data(), param.bytes.data(),
                        param.bytes.size() - 1),
            0);
}

TEST(CudaGradKernelsTest, LossScalingHelpers) {
  SKIP_WITHOUT_CUDA_DEVICE();
  Buf g = random(DType::F32, {17, 1 << 16}, -1, 1, 1600);
  DevicePtr dG, dFlag;
  ASSERT_NO_FATAL_FAILURE(toDevice(g, dG));
  Buf flag = make(DType::U32, {}, {0});
  ASSERT_NO_FATAL_FAILURE(toDevice(flag, dFlag));
  unsigned *deviceFlag = static_cast<unsigned *>(dFlag->ref.data);
  auto readFlag = [&]() {
    unsigned value = 7;
    EXPECT_EQ(cudaMemcpy(&value, deviceFlag, 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return value;
  };

  // Finite: the flag stays 0.
  ASSERT_STATUS_OK(cuda::countNonFinite(dG->ref, deviceFlag, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(readFlag(), 0u);

  // x *= 2^-10 then 2^10: the same bits (powers of two, no underflow).
  ASSERT_STATUS_OK(cuda::scaleInPlace(dG->ref, 1.0f / 1024, nullptr));
  Buf scaled = g;
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_NO_FATAL_FAILURE(toHost(dG, scaled));
  for (int64_t i = 0; i < g.size(); i += 997)
    ASSERT_EQ(scaled.as<float>()[i], g.as<float>()[i] / 1024) << i;
  ASSERT_STATUS_OK(cuda::scaleInPlace(dG->ref, 1024.0f, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  ASSERT_NO_FATAL_FAILURE(toHost(dG, scaled));
  EXPECT_EQ(std::memcmp(scaled.bytes.data(), g.bytes.data(),
                        g.bytes.size() - 1),
            0);

  // One infinity, or one NaN, anywhere: the flag is set, and stays set.
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (int64_t at : {int64_t(0), g.size() / 3, g.size() - 1}) {
      SCOPED_TRACE(std::to_string(bad) + " at " + std::to_string(at));
      Buf one = g;
      one.as<float>()[at] = bad;
      DevicePtr dOne;
      ASSERT_NO_FATAL_FAILURE(toDevice(one, dOne));
      ASSERT_CUDA(cudaMemset(deviceFlag, 0, 4));
      ASSERT_STATUS_OK(cuda::countNonFinite(dOne->ref, deviceFlag, nullptr));
      ASSERT_STATUS_OK(cuda::countNonFinite(dG->ref, deviceFlag, nullptr));
      ASSERT_CUDA(cudaDeviceSynchronize());
      EXPECT_EQ(readFlag(), 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGradKernelsTyped,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtypeParamName);

} // namespace
