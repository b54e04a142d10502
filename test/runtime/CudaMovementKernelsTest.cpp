//===- CudaMovementKernelsTest.cpp - CUDA elementwise, movement, reductions
//===//
//
// The CUDA kernels of runtime/cuda/elementwise.cu (all but add, sub, mul,
// div, gelu, silu and cast, which CudaKernelsTest.cpp covers), movement.cu
// and reductions.cu against the CPU kernels of the same ops, on the same
// random inputs: f32, bf16 and f16 (the typed tests), and the integer and
// bool types the CUDA kernels take (the untyped ones). Elementwise math
// within tolerance(dtype); comparisons, select, max/min, every movement op
// and reduce_max/reduce_min exactly; sums and means (float accumulation on
// the GPU, double on the CPU) within 1e-4 of the result's scale for f32.
// GPU results are poisoned first, so an element a kernel leaves unwritten
// fails. ErrorsInsteadOfCrashes runs without a device too and checks the
// operand and attribute errors.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/CudaTestSupport.h"

#include <algorithm>
#include <cmath>
#include <iostream>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

class CudaMovementKernelsTyped : public ::testing::TestWithParam<DType> {};

/// Exact agreement (NaN matching NaN).
const Tolerance kExact = {0, 0};

/// Sums and means: the GPU adds in float, the CPU in double; the absolute
/// part is relative to the largest result (sums cancel to near zero).
Tolerance sumTolerance(DType dtype) {
  Tolerance t = dtype == DType::F32 ? Tolerance{1e-4, 1e-4} : tolerance(dtype);
  t.scaled = true;
  return t;
}

/// Values in [lo, hi) that are integers (so that comparisons meet ties).
Buf integral(DType dtype, Shape shape, double lo, double hi, unsigned seed) {
  Buf b = random(dtype, std::move(shape), lo, hi, seed);
  for (int64_t i = 0; i < b.size(); ++i)
    b.set(i, std::floor(b.at(i)));
  return b;
}

//===----------------------------------------------------------------------===//
// Without a device too: operand and attribute errors
//===----------------------------------------------------------------------===//

TEST(CudaMovementKernelsTest, ErrorsInsteadOfCrashes) {
  const std::vector<std::string> ops = {
      "abs",           "and",        "broadcast_to", "concat",     "cos",
      "equal",         "erf",        "exp",          "gelu_grad",  "greater",
      "greater_equal", "less",       "less_equal",   "log",        "max",
      "min",           "neg",        "not",          "or",         "pow",
      "reciprocal",    "reduce_max", "reduce_mean",  "reduce_min", "reduce_sum",
      "relu",          "reshape",    "rsqrt",        "select",     "sigmoid",
      "silu_grad",     "sin",        "slice",        "slice_grad", "sqrt",
      "tanh",          "transpose"};
  const std::vector<std::string> &have = cudaKernelOps();
  for (const std::string &op : ops)
    EXPECT_TRUE(std::binary_search(have.begin(), have.end(), op))
        << op << " has no CUDA kernel";

  // Checks that need no device: element types, shapes, attributes.
  static double fakeResult[64];
  auto t = fakeTensor;
  const DType f32 = DType::F32, i64 = DType::I64, b8 = DType::Bool;

  // Elementwise.
  expectError(runCudaKernel("pow", {}, {t(f32, {4}), t(DType::F16, {4})},
                            {t(f32, {4})}, nullptr),
              "pow: rhs has element type f16, expected f32");
  expectError(runCudaKernel("max", {}, {t(f32, {2, 3}), t(f32, {2})},
                            {t(f32, {2, 3})}, nullptr),
              "max: operands of shapes [2, 3] and [2] do not broadcast to the "
              "result shape [2, 3]");
  expectError(runCudaKernel("min", {}, {t(f32, {4}), t(f32, {4})},
                            {t(f32, {5})}, nullptr),
              "do not broadcast to the result shape [5]");
  expectError(runCudaKernel("min", {}, {t(DType::F64, {4}), t(DType::F64, {4})},
                            {t(DType::F64, {4})}, nullptr),
              "min: no CUDA kernel for element type f64 (lhs)");
  expectError(runCudaKernel("pow", {}, {t(DType::U8, {4}), t(DType::U8, {4})},
                            {t(DType::U8, {4})}, nullptr),
              "no CUDA kernel for element type u8");
  expectError(runCudaKernel("div", {}, {t(i64, {4}), t(i64, {4})},
                            {t(i64, {4})}, nullptr),
              "div: no CUDA kernel for element type i64 (lhs)");
  expectError(runCudaKernel("equal", {}, {t(f32, {4}), t(f32, {4})},
                            {t(f32, {4})}, nullptr),
              "equal: the result has element type f32, expected bool");
  expectError(runCudaKernel("less", {}, {t(f32, {4}), t(i64, {4})},
                            {t(b8, {4})}, nullptr),
              "less: rhs has element type i64, expected f32");
  expectError(runCudaKernel("greater_equal", {},
                            {t(DType::U16, {4}), t(DType::U16, {4})},
                            {t(b8, {4})}, nullptr),
              "no CUDA kernel for element type u16 (lhs)");
  expectError(runCudaKernel("and", {}, {t(f32, {4}), t(f32, {4})},
                            {t(f32, {4})}, nullptr),
              "and: no CUDA kernel for element type f32 (lhs)");
  expectError(
      runCudaKernel("or", {}, {t(b8, {4}), t(b8, {3})}, {t(b8, {4})}, nullptr),
      "do not broadcast");
  expectError(runCudaKernel("not", {}, {t(i64, {4})}, {t(i64, {4})}, nullptr),
              "not: no CUDA kernel for element type i64 (x)");
  expectError(runCudaKernel("select", {},
                            {t(f32, {4}), t(f32, {4}), t(f32, {4})},
                            {t(f32, {4})}, nullptr),
              "select: cond has element type f32, expected bool");
  expectError(runCudaKernel("select", {},
                            {t(b8, {4}), t(f32, {4}), t(DType::F16, {4})},
                            {t(f32, {4})}, nullptr),
              "on_false has element type f16, expected f32");
  expectError(runCudaKernel("select", {},
                            {t(b8, {2}), t(f32, {3}), t(f32, {2})},
                            {t(f32, {2})}, nullptr),
              "operands of shapes [2], [3] and [2] do not broadcast");
  expectError(runCudaKernel("neg", {}, {t(f32, {4})}, {t(f32, {5})}, nullptr),
              "neg: the result has shape [5], expected [4]");
  expectError(runCudaKernel("abs", {}, {t(b8, {4})}, {t(b8, {4})}, nullptr),
              "abs: no CUDA kernel for element type bool");
  expectError(runCudaKernel("exp", {}, {t(i64, {4})}, {t(i64, {4})}, nullptr),
              "exp: no CUDA kernel for element type i64");
  expectError(
      runCudaKernel("sqrt", {}, {t(f32, {4})}, {t(DType::BF16, {4})}, nullptr),
      "sqrt: the result has element type bf16, expected f32");
  expectError(runCudaKernel("gelu_grad", {{"approximate", stringA("fast")}},
                            {t(f32, {4}), t(f32, {4})}, {t(f32, {4})}, nullptr),
              "approximate must be");
  expectError(runCudaKernel("silu_grad", {}, {t(f32, {4}), t(f32, {3})},
                            {t(f32, {4})}, nullptr),
              "silu_grad: dy has shape [3], expected [4]");

  // Movement.
  expectError(
      runCudaKernel("reshape", {}, {t(f32, {2, 3})}, {t(f32, {4})}, nullptr),
      "cannot reshape [2, 3] (6 elements) to [4] (4 elements)");
  expectError(
      runCudaKernel("reshape", {}, {t(f32, {2, 3})}, {t(i64, {6})}, nullptr),
      "the result has element type i64, expected f32");
  expectError(runCudaKernel("transpose", {{"perm", intsA({0, 0})}},
                            {t(f32, {2, 3})}, {t(f32, {3, 2})}, nullptr),
              "perm [0, 0] is not a permutation of the 2 dimensions of x");
  expectError(runCudaKernel("transpose", {}, {t(f32, {2, 3})}, {t(f32, {3, 2})},
                            nullptr),
              "missing attribute 'perm'");
  expectError(runCudaKernel("transpose", {{"perm", intsA({1, 0})}},
                            {t(f32, {2, 3})}, {t(f32, {2, 3})}, nullptr),
              "the result has shape [2, 3], expected [3, 2]");
  expectError(runCudaKernel("broadcast_to", {}, {t(f32, {3})}, {t(f32, {2, 4})},
                            nullptr),
              "x of shape [3] does not broadcast to the result shape [2, 4]");
  Attributes slice = {{"start", intsA({0, 1})},
                      {"limit", intsA({2, 3})},
                      {"step", intsA({1, 1})}};
  expectError(runCudaKernel("slice", slice, {t(f32, {2, 3})}, {t(f32, {2, 3})},
                            nullptr),
              "slice: the result has shape [2, 3], expected [2, 2]");
  expectError(
      runCudaKernel(
          "slice",
          {{"start", intsA({0})}, {"limit", intsA({2})}, {"step", intsA({0})}},
          {t(f32, {4})}, {t(f32, {2})}, nullptr),
      "step of dimension 0 is 0");
  expectError(
      runCudaKernel(
          "slice",
          {{"start", intsA({1})}, {"limit", intsA({6})}, {"step", intsA({1})}},
          {t(f32, {4})}, {t(f32, {5})}, nullptr),
      "dimension 0 of size 4 cannot be sliced from 1 to 6 by 1");
  expectError(
      runCudaKernel(
          "slice",
          {{"start", intsA({1})}, {"limit", intsA({3})}, {"step", intsA({1})}},
          {t(f32, {4, 2})}, {t(f32, {2, 2})}, nullptr),
      "start, limit and step need one entry per dimension of x (2)");
  expectError(runCudaKernel("slice_grad", slice, {t(f32, {2, 3})},
                            {t(f32, {2, 3})}, nullptr),
              "slice_grad: dy has shape [2, 3], expected [2, 2]");
  expectError(runCudaKernel("slice_grad", slice, {t(f32, {2, 2})},
                            {t(DType::BF16, {2, 3})}, nullptr),
              "the result has element type bf16, expected f32");
  expectError(runCudaKernel("concat", {{"axis", intA(1)}},
                            {t(f32, {2, 3}), t(f32, {2, 2})}, {t(f32, {2, 6})},
                            nullptr),
              "the operands' sizes along axis 1 add up to 5, but the result "
              "has 6");
  expectError(runCudaKernel("concat", {{"axis", intA(2)}},
                            {t(f32, {2, 3}), t(f32, {2, 2})}, {t(f32, {2, 5})},
                            nullptr),
              "axis 2 is out of range for rank 2");
  expectError(runCudaKernel("concat", {{"axis", intA(0)}},
                            {t(f32, {2, 3}), t(f32, {2, 2})}, {t(f32, {4, 3})},
                            nullptr),
              "operand 1 has shape [2, 2], expected [2, 3]");
  expectError(runCudaKernel("concat", {{"axis", intA(0)}},
                            {t(f32, {2}), t(i64, {2})}, {t(f32, {4})}, nullptr),
              "operand 1 has element type i64, expected f32");
  expectError(runCudaKernel("concat", {{"axis", intA(0)}}, {t(f32, {})},
                            {t(f32, {})}, nullptr),
              "the result must have rank 1 or more");

  // Reductions.
  expectError(runCudaKernel("reduce_sum",
                            {{"axes", intsA({1, -1})}, {"keepdims", intA(0)}},
                            {t(f32, {2, 3})}, {t(f32, {2})}, nullptr),
              "reduce_sum: axis 1 is reduced twice");
  expectError(runCudaKernel("reduce_mean", {{"axes", intsA({2})}},
                            {t(f32, {2, 3})}, {t(f32, {2, 1})}, nullptr),
              "axis 2 is out of range for rank 2");
  expectError(runCudaKernel("reduce_max", {{"axes", intsA({1})}},
                            {t(f32, {2, 3})}, {t(f32, {2})}, nullptr),
              "the result has shape [2], expected [2, 1]");
  expectError(runCudaKernel("reduce_min",
                            {{"axes", intsA({1})}, {"keepdims", intA(0)}},
                            {t(f32, {2, 3})}, {t(f32, {2, 1})}, nullptr),
              "the result has shape [2, 1], expected [2]");
  expectError(runCudaKernel("reduce_sum", {{"axes", intsA({0})}},
                            {t(b8, {2, 3})}, {t(b8, {1, 3})}, nullptr),
              "reduce_sum: no CUDA kernel for element type bool (x)");
  expectError(runCudaKernel("reduce_max", {{"axes", intsA({0})}},
                            {t(DType::F64, {2, 3})}, {t(DType::F64, {1, 3})},
                            nullptr),
              "reduce_max: no CUDA kernel for element type f64 (x)");
  expectError(runCudaKernel("reduce_sum", {}, {t(f32, {2, 3})},
                            {t(f32, {2, 3})}, nullptr),
              "missing attribute 'axes'");

  if (cudaDeviceCount() > 0)
    return;
  // No device: errors that say so, not crashes. The pointers are never
  // dereferenced: every launch, copy or memset fails first.
  Attributes axes0 = {{"axes", intsA({0})}, {"keepdims", intA(0)}};
  Attributes axes1 = {{"axes", intsA({1})}, {"keepdims", intA(0)}};
  std::vector<std::pair<std::string, Status>> runs;
  auto add = [&](const std::string &op, const Attributes &attrs,
                 std::vector<TensorRef> in, std::vector<TensorRef> out) {
    for (TensorRef &r : out) // apart from the operands: reshape copies
      r.data = fakeResult;
    runs.emplace_back(op, runCudaKernel(op, attrs, in, out, nullptr));
  };
  add("pow", {}, {t(f32, {4}), t(f32, {})}, {t(f32, {4})});
  add("max", {}, {t(i64, {2, 2}), t(i64, {2, 2})}, {t(i64, {2, 2})});
  add("equal", {}, {t(b8, {4}), t(b8, {1})}, {t(b8, {4})});
  add("and", {}, {t(b8, {4}), t(b8, {4})}, {t(b8, {4})});
  add("select", {}, {t(b8, {2, 1}), t(DType::F64, {2}), t(DType::F64, {1})},
      {t(DType::F64, {2, 2})});
  add("not", {}, {t(b8, {4})}, {t(b8, {4})});
  add("relu", {}, {t(DType::I32, {4})}, {t(DType::I32, {4})});
  add("exp", {}, {t(DType::BF16, {4})}, {t(DType::BF16, {4})});
  add("gelu_grad", {{"approximate", stringA("tanh")}},
      {t(f32, {4}), t(f32, {4})}, {t(f32, {4})});
  add("reshape", {}, {t(f32, {2, 3})}, {t(f32, {6})});
  add("transpose", {{"perm", intsA({1, 0})}}, {t(f32, {2, 3})},
      {t(f32, {3, 2})});
  add("transpose", {{"perm", intsA({1, 0, 2})}}, {t(DType::F16, {2, 3, 4})},
      {t(DType::F16, {3, 2, 4})});
  add("broadcast_to", {}, {t(f32, {3})}, {t(f32, {2, 3})});
  add("slice", slice, {t(f32, {2, 3})}, {t(f32, {2, 2})});
  add("slice_grad", slice, {t(f32, {2, 2})}, {t(f32, {2, 3})});
  add("concat", {{"axis", intA(-1)}}, {t(f32, {2, 3}), t(f32, {2, 2})},
      {t(f32, {2, 5})});
  add("reduce_sum", axes1, {t(f32, {2, 3})}, {t(f32, {2})});
  add("reduce_mean", axes0, {t(DType::BF16, {2, 3})}, {t(DType::BF16, {3})});
  add("reduce_max", {{"axes", intsA({0, 2})}}, {t(f32, {2, 3, 2})},
      {t(f32, {1, 3, 1})});
  add("reduce_min", axes1, {t(b8, {2, 0})}, {t(b8, {2})}); // over nothing
  for (const auto &[op, status] : runs) {
    EXPECT_FALSE(status.isOk()) << op << " ran without a device";
    EXPECT_NE(status.message().find(op + ": "), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("failed"), std::string::npos)
        << status.message();
  }
  // Nothing to do is no error, device or not.
  ASSERT_STATUS_OK(runCudaKernel("transpose", {{"perm", intsA({1, 0})}},
                                 {t(f32, {0, 3})}, {t(f32, {3, 0})}, nullptr));
  ASSERT_STATUS_OK(runCudaKernel("reduce_sum", axes0, {t(f32, {2, 0})},
                                 {t(f32, {0})}, nullptr));
  ASSERT_STATUS_OK(runCudaKernel("add", {}, {t(i64, {0, 2}), t(i64, {2})},
                                 {t(i64, {0, 2})}, nullptr));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

const std::vector<std::pair<Shape, Shape>> kBroadcastShapes = {
    {{4, 37, 65}, {4, 37, 65}}, // same shape
    {{4, 37, 65}, {65}},        // trailing dimensions
    {{4, 37, 65}, {37, 1}},     // a column
    {{65}, {4, 37, 65}},        // the lhs broadcast
    {{4, 1, 65}, {1, 37, 1}},   // both
    {{4, 37, 65}, {}},          // a scalar
    {{0, 5}, {5}},              // empty
};

TEST_P(CudaMovementKernelsTyped, BinaryArithmetic) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 1;
  for (const char *op : {"pow", "max", "min"})
    for (const auto &[ls, rs] : kBroadcastShapes) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(ls) + " " + shapeText(rs));
      Shape out;
      ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
      bool pow = std::string(op) == "pow";
      Buf x = random(dtype, ls, pow ? 0.25 : -2, 2, ++seed);
      Buf y = random(dtype, rs, -2, 2, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(op, {}, {&x, &y},
                                             {Buf(dtype, out)},
                                             pow ? tolerance(dtype) : kExact));
    }
  // pow by a scalar 1, 2 or 3 (which the CPU multiplies out), of negative
  // bases too.
  for (double e : {1.0, 2.0, 3.0, 0.5}) {
    SCOPED_TRACE("pow by " + std::to_string(e));
    Buf x = random(dtype, {33, 65}, e == 0.5 ? 0 : -3, 3, ++seed);
    Buf y = make(dtype, {}, {e});
    ASSERT_NO_FATAL_FAILURE(compareWithCpu(
        "pow", {}, {&x, &y}, {Buf(dtype, x.shape)}, tolerance(dtype)));
  }
  // NaN propagates through max and min, from either side.
  Buf x = make(dtype, {6}, {NAN, 1, NAN, -INFINITY, 2, 0});
  Buf y = make(dtype, {6}, {1, NAN, NAN, 3, INFINITY, -0.0});
  for (const char *op : {"max", "min"}) {
    SCOPED_TRACE(std::string(op) + " with NaN");
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu(op, {}, {&x, &y}, {Buf(dtype, {6})}, kExact));
  }
}

TEST_P(CudaMovementKernelsTyped, Comparisons) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 100;
  for (const char *op :
       {"equal", "less", "less_equal", "greater", "greater_equal"})
    for (const auto &[ls, rs] : kBroadcastShapes) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(ls) + " " + shapeText(rs));
      Shape out;
      ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
      Buf x = integral(dtype, ls, -3, 3, ++seed); // ties
      Buf y = integral(dtype, rs, -3, 3, ++seed);
      if (x.size() > 1)
        x.set(1, NAN);
      ASSERT_NO_FATAL_FAILURE(
          compareWithCpu(op, {}, {&x, &y}, {Buf(DType::Bool, out)}, kExact));
    }
}

TEST_P(CudaMovementKernelsTyped, Select) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    Shape cond, onTrue, onFalse;
  };
  const std::vector<Case> cases = {
      {{4, 37, 65}, {4, 37, 65}, {4, 37, 65}},
      {{4, 37, 65}, {4, 37, 65}, {}}, // a masked fill
      {{1, 37, 65}, {}, {4, 37, 65}},
      {{37, 1}, {4, 1, 65}, {65}}, // all three broadcast
      {{}, {3, 5}, {3, 5}},
      {{0, 3}, {3}, {1}},
  };
  unsigned seed = 200;
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeText(c.cond) + " " + shapeText(c.onTrue) + " " +
                 shapeText(c.onFalse));
    Shape both, out;
    ASSERT_TRUE(ops::broadcastShapes(c.cond, c.onTrue, both));
    ASSERT_TRUE(ops::broadcastShapes(both, c.onFalse, out));
    Buf cond = random(DType::Bool, c.cond, 0, 2, ++seed);
    Buf x = random(dtype, c.onTrue, -2, 2, ++seed);
    Buf y = random(dtype, c.onFalse, -2, 2, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("select", {}, {&cond, &x, &y},
                                           {Buf(dtype, out)}, kExact));
  }
}

TEST_P(CudaMovementKernelsTyped, Unary) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  struct Case {
    const char *op;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"neg", -3, 3},       {"abs", -3, 3},          {"relu", -3, 3},
      {"exp", -10, 10},     {"log", 0.01, 100},      {"sqrt", 0, 100},
      {"rsqrt", 0.01, 100}, {"reciprocal", 0.1, 10}, {"tanh", -6, 6},
      {"erf", -4, 4},       {"sigmoid", -20, 20},    {"sin", -6, 6},
      {"cos", -6, 6},
  };
  unsigned seed = 300;
  for (const Case &c : cases)
    for (const Shape &shape : {Shape{1000, 129}, Shape{}, Shape{0, 5}}) {
      SCOPED_TRACE(std::string(c.op) + " " + shapeText(shape));
      Buf x = random(dtype, shape, c.lo, c.hi, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(
          c.op, {}, {&x}, {Buf(dtype, shape)}, tolerance(dtype)));
    }
  // Special values: NaN, infinities, zeros, a negative log/sqrt.
  Buf x = make(dtype, {7}, {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1, 1});
  for (const char *op : {"neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt",
                         "reciprocal", "tanh", "erf", "sigmoid"}) {
    SCOPED_TRACE(std::string(op) + " of special values");
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu(op, {}, {&x}, {Buf(dtype, {7})}, tolerance(dtype)));
  }
}

TEST_P(CudaMovementKernelsTyped, ActivationGrads) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  const std::vector<std::pair<std::string, Attributes>> ops = {
      {"gelu_grad", {}},
      {"gelu_grad", {{"approximate", stringA("none")}}},
      {"gelu_grad", {{"approximate", stringA("tanh")}}},
      {"silu_grad", {}},
  };
  unsigned seed = 400;
  for (const auto &[op, attrs] : ops)
    for (const Shape &shape : {Shape{1000, 129}, Shape{}, Shape{0, 5}}) {
      SCOPED_TRACE(op + " " + shapeText(shape) +
                   (attrs.empty() ? "" : " " + attrs.begin()->second.s));
      Buf x = random(dtype, shape, -6, 6, ++seed);
      Buf dy = random(dtype, shape, -2, 2, ++seed);
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(
          op, attrs, {&x, &dy}, {Buf(dtype, shape)}, tolerance(dtype)));
    }
}

/// Integer and bool elementwise ops, exactly; integer arithmetic wraps.
TEST(CudaMovementKernelsTest, IntegerAndBoolElementwise) {
  SKIP_WITHOUT_CUDA_DEVICE();
  unsigned seed = 500;
  for (DType dtype : {DType::I64, DType::I32}) {
    for (const char *op : {"add", "sub", "mul", "pow", "max", "min"})
      for (const auto &[ls, rs] : kBroadcastShapes) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + op + " " +
                     shapeText(ls) + " " + shapeText(rs));
        Shape out;
        ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
        bool pow = std::string(op) == "pow";
        Buf x = random(dtype, ls, -50, 50, ++seed);
        Buf y = random(dtype, rs, pow ? -3 : -50, pow ? 40 : 50, ++seed);
        ASSERT_NO_FATAL_FAILURE(
            compareWithCpu(op, {}, {&x, &y}, {Buf(dtype, out)}, kExact));
      }
    // Wrapping at the type's limits.
    double big = dtype == DType::I32 ? 2147483647.0 : 4611686018427387904.0;
    Buf x = make(dtype, {4}, {big, -big, big, 3});
    Buf y = make(dtype, {4}, {big, big, 2, 7});
    for (const char *op : {"add", "sub", "mul"}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + op + " wrapping");
      ASSERT_NO_FATAL_FAILURE(
          compareWithCpu(op, {}, {&x, &y}, {Buf(dtype, {4})}, kExact));
    }
    for (const char *op : {"neg", "abs", "relu"}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + op);
      Buf v = random(dtype, {1000, 33}, -1000, 1000, ++seed);
      ASSERT_NO_FATAL_FAILURE(
          compareWithCpu(op, {}, {&v}, {Buf(dtype, v.shape)}, kExact));
    }
  }
  for (DType dtype : {DType::I64, DType::I32, DType::Bool})
    for (const char *op :
         {"equal", "less", "less_equal", "greater", "greater_equal"})
      for (const auto &[ls, rs] : kBroadcastShapes) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + op + " " +
                     shapeText(ls) + " " + shapeText(rs));
        Shape out;
        ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
        double hi = dtype == DType::Bool ? 2 : 4;
        Buf x = random(dtype, ls, 0, hi, ++seed);
        Buf y = random(dtype, rs, 0, hi, ++seed);
        ASSERT_NO_FATAL_FAILURE(
            compareWithCpu(op, {}, {&x, &y}, {Buf(DType::Bool, out)}, kExact));
      }
  for (const char *op : {"and", "or"})
    for (const auto &[ls, rs] : kBroadcastShapes) {
      SCOPED_TRACE(std::string(op) + " " + shapeText(ls) + " " + shapeText(rs));
      Shape out;
      ASSERT_TRUE(ops::broadcastShapes(ls, rs, out));
      Buf x = random(DType::Bool, ls, 0, 2, ++seed);
      Buf y = random(DType::Bool, rs, 0, 2, ++seed);
      ASSERT_NO_FATAL_FAILURE(
          compareWithCpu(op, {}, {&x, &y}, {Buf(DType::Bool, out)}, kExact));
    }
  Buf b = random(DType::Bool, {1000, 33}, 0, 2, ++seed);
  ASSERT_NO_FATAL_FAILURE(
      compareWithCpu("not", {}, {&b}, {Buf(DType::Bool, b.shape)}, kExact));
  // select moves elements of any size.
  for (DType dtype : {DType::F64, DType::I64, DType::I32, DType::U16,
                      DType::Bool, DType::I8}) {
    SCOPED_TRACE(std::string("select ") + dtypeName(dtype));
    Buf cond = random(DType::Bool, {37, 1}, 0, 2, ++seed);
    Buf x = random(dtype, {4, 1, 65}, 0, 100, ++seed);
    Buf y = random(dtype, {65}, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("select", {}, {&cond, &x, &y},
                                           {Buf(dtype, {4, 37, 65})}, kExact));
  }
}

//===----------------------------------------------------------------------===//
// Movement
//===----------------------------------------------------------------------===//

/// The movement ops on `dtype`: every result exact.
void checkMovement(DType dtype, unsigned seed) {
  {
    SCOPED_TRACE("reshape");
    Buf x = random(dtype, {6, 35}, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu("reshape", {}, {&x}, {Buf(dtype, {5, 42})}, kExact));
    Buf empty = random(dtype, {0, 3}, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu("reshape", {}, {&empty}, {Buf(dtype, {3, 0})}, kExact));
  }
  const std::vector<std::pair<Shape, Shape>> transposes = {
      {{2, 3}, {1, 0}},
      {{37, 65}, {1, 0}},              // tiles with ragged edges
      {{1000, 1500}, {1, 0}},          // many tiles
      {{4, 33, 65}, {0, 2, 1}},        // a batch of tiles
      {{3, 4, 5, 6}, {2, 0, 3, 1}},    // tiles with two outer dimensions
      {{5, 6, 7}, {1, 0, 2}},          // the last dimension stays: a gather
      {{2, 3, 4, 5}, {2, 3, 0, 1}},    // merges to [6, 20] -> [20, 6]
      {{1, 7, 1, 9}, {3, 2, 1, 0}},    // sizes 1 dropped
      {{4, 5}, {0, 1}},                // the identity: a copy
      {{2, 1, 3}, {1, 0, 2}},          // the identity after merging
      {{3, 0, 5}, {2, 1, 0}},          // empty
      {{2, 2, 2, 2, 2, 2, 2, 2, 2, 3}, // ten dimensions
       {9, 0, 2, 1, 4, 3, 6, 5, 8, 7}},
  };
  for (const auto &[shape, perm] : transposes) {
    SCOPED_TRACE("transpose " + shapeText(shape) + " by " + shapeText(perm));
    Shape out;
    for (int64_t p : perm)
      out.push_back(shape[p]);
    Buf x = random(dtype, shape, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("transpose", {{"perm", intsA(perm)}},
                                           {&x}, {Buf(dtype, out)}, kExact));
  }
  const std::vector<std::pair<Shape, Shape>> broadcasts = {
      {{65}, {4, 37, 65}}, {{37, 1}, {4, 37, 65}}, {{4, 1, 65}, {4, 37, 65}},
      {{}, {3, 5}},        {{1, 1}, {0, 3}},       {{2, 3}, {2, 3}},
  };
  for (const auto &[from, to] : broadcasts) {
    SCOPED_TRACE("broadcast_to " + shapeText(from) + " to " + shapeText(to));
    Buf x = random(dtype, from, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu("broadcast_to", {}, {&x}, {Buf(dtype, to)}, kExact));
  }
  struct Slice {
    Shape shape, start, limit, step;
  };
  const std::vector<Slice> slices = {
      {{10, 37}, {2, 0}, {7, 37}, {1, 1}},  // rows
      {{10, 37}, {0, 5}, {10, 30}, {1, 1}}, // columns
      {{8, 9, 10}, {1, 2, 3}, {8, 9, 10}, {2, 3, 2}},
      {{8, 9}, {7, 8}, {-1, 0}, {-1, -3}},     // backwards
      {{6, 1000}, {0, 999}, {6, -1}, {5, -7}}, // long rows, backwards
      {{5, 4}, {2, 0}, {2, 4}, {1, 1}},        // empty
  };
  for (const Slice &s : slices) {
    SCOPED_TRACE("slice " + shapeText(s.shape) + " " + shapeText(s.start) +
                 " " + shapeText(s.limit) + " " + shapeText(s.step));
    Shape part;
    for (size_t d = 0; d < s.shape.size(); ++d) {
      int64_t extent =
          s.step[d] > 0 ? s.limit[d] - s.start[d] : s.start[d] - s.limit[d];
      int64_t k = std::abs(s.step[d]);
      part.push_back(extent <= 0 ? 0 : (extent + k - 1) / k);
    }
    Attributes attrs = {{"start", intsA(s.start)},
                        {"limit", intsA(s.limit)},
                        {"step", intsA(s.step)}};
    Buf x = random(dtype, s.shape, 0, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(
        compareWithCpu("slice", attrs, {&x}, {Buf(dtype, part)}, kExact));
    Buf dy = random(dtype, part, 1, 100, ++seed);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("slice_grad", attrs, {&dy},
                                           {Buf(dtype, s.shape)}, kExact));
  }
  struct Concat {
    std::vector<Shape> parts;
    int64_t axis;
    size_t offset; // bytes into the allocations
  };
  const std::vector<Concat> concats = {
      {{{3, 5}, {4, 5}, {1, 5}}, 0, 0},
      {{{3, 5}, {3, 7}, {3, 1}}, 1, 0},
      {{{2, 3, 64}, {2, 3, 128}, {2, 3, 64}}, -1, 0}, // 16-byte words
      {{{2, 3, 64}, {2, 3, 128}}, -1, 2},             // narrower words
      {{{4, 0, 6}, {4, 3, 6}, {4, 2, 6}}, 1, 0},      // an empty operand
      {{{7}}, 0, 0},                                  // one operand
      {{{1000, 33}, {1000, 31}}, 1, 0},
  };
  for (const Concat &c : concats) {
    std::string text;
    for (const Shape &s : c.parts)
      text += shapeText(s) + " ";
    SCOPED_TRACE("concat " + text + "axis " + std::to_string(c.axis) +
                 " offset " + std::to_string(c.offset));
    int64_t rank = int64_t(c.parts[0].size());
    int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
    Shape out = c.parts[0];
    out[axis] = 0;
    std::vector<Buf> bufs;
    for (const Shape &s : c.parts) {
      out[axis] += s[axis];
      bufs.push_back(random(dtype, s, 0, 100, ++seed));
    }
    std::vector<const Buf *> in;
    for (const Buf &b : bufs)
      in.push_back(&b);
    ASSERT_NO_FATAL_FAILURE(compareWithCpu("concat", {{"axis", intA(c.axis)}},
                                           in, {Buf(dtype, out)}, kExact,
                                           /*inPlace=*/false, c.offset));
  }
}

TEST_P(CudaMovementKernelsTyped, Movement) {
  SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_NO_FATAL_FAILURE(checkMovement(GetParam(), 600));
}

/// Elements of 1, 2 and 8 bytes (the typed test covers 2 and 4).
TEST(CudaMovementKernelsTest, MovementOfOtherSizes) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (DType dtype :
       {DType::Bool, DType::I8, DType::U16, DType::I64, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    ASSERT_NO_FATAL_FAILURE(checkMovement(dtype, 700));
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
};

const std::vector<ReduceCase> kReduceCases = {
    {{64, 1000}, {-1}},     // rows, a warp each
    {{7, 5000}, {1}},       // rows, a block each
    {{3, 2, 1500}, {1, 2}}, // rows of merged dimensions
    {{4096, 77}, {0}},      // columns
    {{4, 33, 65}, {1}},     // columns with an outer dimension
    {{3, 5}, {0}},          // few rows
    {{4, 33, 65}, {0, 2}},  // the general pattern
    {{2, 3, 4, 5}, {0, 2}}, //
    {{6, 7, 8, 9}, {1, 3}}, //
    {{2, 3, 4}, {0, 1, 2}}, // everything
    {{5, 1, 6}, {1}},       // a dimension of 1
    {{3, 4}, {}},           // nothing
    {{}, {}},               // a scalar
    {{5, 0, 3}, {1}},       // over nothing
    {{0, 4}, {1}},          // no results
};

TEST_P(CudaMovementKernelsTyped, Reductions) {
  SKIP_WITHOUT_CUDA_DEVICE();
  DType dtype = GetParam();
  unsigned seed = 800;
  for (const char *op :
       {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
    for (const ReduceCase &c : kReduceCases)
      for (int64_t keepdims : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + shapeText(c.shape) + " axes " +
                     shapeText(c.axes) + " keepdims " +
                     std::to_string(keepdims));
        Shape out;
        for (int64_t d = 0; d < int64_t(c.shape.size()); ++d) {
          bool reduced = false;
          for (int64_t axis : c.axes)
            reduced |= axis == d || axis + int64_t(c.shape.size()) == d;
          if (!reduced)
            out.push_back(c.shape[d]);
          else if (keepdims)
            out.push_back(1);
        }
        bool extreme =
            std::string(op) == "reduce_max" || std::string(op) == "reduce_min";
        Buf x = random(dtype, c.shape, -2, 2, ++seed);
        ASSERT_NO_FATAL_FAILURE(compareWithCpu(
            op, {{"axes", intsA(c.axes)}, {"keepdims", intA(keepdims)}}, {&x},
            {Buf(dtype, out)}, extreme ? kExact : sumTolerance(dtype)));
      }
  // NaN propagates through max and min (and sums).
  Buf x = random(dtype, {6, 40}, -2, 2, ++seed);
  x.set(3, NAN);
  x.set(40 * 4 + 39, NAN);
  for (const char *op : {"reduce_sum", "reduce_max", "reduce_min"})
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(std::string(op) + " with NaN, axis " + std::to_string(axis));
      Shape out = {axis ? int64_t(6) : int64_t(40)};
      ASSERT_NO_FATAL_FAILURE(compareWithCpu(
          op, {{"axes", intsA({axis})}, {"keepdims", intA(0)}}, {&x},
          {Buf(dtype, out)},
          std::string(op) == "reduce_sum" ? sumTolerance(dtype) : kExact));
    }
}

/// Integer sums (int64 accumulators, wrapping) and means (truncating), and
/// max/min of bools (any, all).
TEST(CudaMovementKernelsTest, IntegerAndBoolReductions) {
  SKIP_WITHOUT_CUDA_DEVICE();
  unsigned seed = 900;
  for (DType dtype : {DType::I64, DType::I32, DType::Bool})
    for (const char *op :
         {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
      for (const ReduceCase &c : kReduceCases) {
        bool extreme =
            std::string(op) == "reduce_max" || std::string(op) == "reduce_min";
        if (dtype == DType::Bool && !extreme)
          continue;
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + op + " " +
                     shapeText(c.shape) + " axes " + shapeText(c.axes));
        Shape out;
        for (int64_t d = 0; d < int64_t(c.shape.size()); ++d) {
          bool reduced = false;
          for (int64_t axis : c.axes)
            reduced |= axis == d || axis + int64_t(c.shape.size()) == d;
          out.push_back(reduced ? 1 : c.shape[d]);
        }
        Buf x = dtype == DType::Bool
                    ? random(dtype, c.shape, 0, 2, ++seed)
                    : random(dtype, c.shape, -1e6, 1e6, ++seed);
        ASSERT_NO_FATAL_FAILURE(compareWithCpu(
            op, {{"axes", intsA(c.axes)}}, {&x}, {Buf(dtype, out)}, kExact));
      }
  // i32 sums that leave the type wrap as the CPU's int64 sum stored to i32.
  Buf big = make(DType::I32, {2, 3}, {2147483647, 2147483647, 5, -7, -8, -9});
  ASSERT_NO_FATAL_FAILURE(compareWithCpu(
      "reduce_sum", {{"axes", intsA({1})}, {"keepdims", intA(0)}}, {&big},
      {Buf(DType::I32, {2})}, kExact));
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMovementKernelsTyped,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         dtypeParamName);

} // namespace
