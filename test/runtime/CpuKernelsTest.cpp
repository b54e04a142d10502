//===- CpuKernelsTest.cpp - CPU kernels: dispatch, elementwise, movement --===//
//
// Every kernel against a naive double-precision reference written here.
// The neural-network kernels (matmul, reductions, norms, softmax,
// attention, lookups, losses) are in CpuNNKernelsTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"
#include "runtime/Random.h"

#include <algorithm>
#include <functional>
#include <limits>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

TEST(CpuKernelDispatch, EveryDialectOpHasAKernel) {
  // Every op of ir/CleaveOps.td except parameter, get_param and constant
  // (ops added later bring their own tests).
  std::vector<std::string> expected = {"abs",
                                       "add",
                                       "and",
                                       "attention",
                                       "broadcast_to",
                                       "cast",
                                       "concat",
                                       "cos",
                                       "div",
                                       "dropout",
                                       "embedding",
                                       "equal",
                                       "erf",
                                       "exp",
                                       "gather",
                                       "gelu",
                                       "greater",
                                       "greater_equal",
                                       "layer_norm",
                                       "less",
                                       "less_equal",
                                       "log",
                                       "log_softmax",
                                       "matmul",
                                       "max",
                                       "min",
                                       "mul",
                                       "neg",
                                       "nll_loss",
                                       "not",
                                       "or",
                                       "pow",
                                       "reciprocal",
                                       "reduce_max",
                                       "reduce_mean",
                                       "reduce_min",
                                       "reduce_sum",
                                       "relu",
                                       "reshape",
                                       "rms_norm",
                                       "rsqrt",
                                       "select",
                                       "sigmoid",
                                       "silu",
                                       "sin",
                                       "slice",
                                       "softmax",
                                       "softmax_cross_entropy",
                                       "sqrt",
                                       "sub",
                                       "tanh",
                                       "transpose"};
  const std::vector<std::string> &ops = cpuKernelOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const std::string &op : expected)
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
}

// The operand counts every backend checks (runtime/ops/OpTable.cpp) and the
// CPU's kernel functions (runtime/cpu/Kernels.cpp) are two tables: the CPU
// backend has a kernel for exactly the ops of the shared table, so no op
// passes the shared checks and then finds no CPU kernel, or the reverse.
TEST(CpuKernelDispatch, KernelsCoverTheOpTable) {
  EXPECT_EQ(cpuKernelOps(), tableOps());
}

TEST(CpuKernelDispatch, UnknownOp) {
  Buf x = make(DType::F32, {2}), y = make(DType::F32, {2});
  RUN_ERROR("frobnicate: no CPU kernel", "frobnicate", {}, {&x}, y);
}

TEST(CpuKernelDispatch, OperandCounts) {
  Buf x = make(DType::F32, {2}), y = make(DType::F32, {2});
  RUN_ERROR("add: got 1 operand, expected 2 operands", "add", {}, {&x}, y);
  RUN_ERROR("exp: got 2 operands, expected 1 operand", "exp", {}, {&x, &x}, y);
  RUN_ERROR("attention: got 2 operands, expected 3 to 4 operands", "attention",
            {}, {&x, &x}, y);
  RUN_ERROR("concat: got 0 operands, expected at least 1 operand", "concat",
            {{"axis", intA(0)}}, {}, y);
  Status s = runCpuKernel("exp", {}, {x.ref()}, {});
  EXPECT_EQ(s.message(), "exp: got 0 results, expected 1");
}

TEST(CpuKernelDispatch, MissingData) {
  Buf y = make(DType::F32, {2});
  RUN_ERROR("add: operand 1 has no data", "add", {}, {&y, &absent()}, y);
  // An empty tensor may come without data.
  Buf e = make(DType::F32, {0}), eo = make(DType::F32, {0});
  Status s = runCpuKernel("exp", {}, {TensorRef{nullptr, {0}, DType::F32}},
                          {TensorRef{nullptr, {0}, DType::F32}});
  EXPECT_TRUE(s.isOk()) << s.message();
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

using BinaryRef = std::function<double(double, double)>;

/// Runs `op` on a and b (broadcast to `outShape`) and compares with `ref`.
void checkBinary(const std::string &op, const Buf &a, const Buf &b,
                 const Shape &outShape, DType outType, BinaryRef ref,
                 double rel = -1) {
  SCOPED_TRACE(op + " " + ops::shapeString(a.shape) + " " +
               ops::shapeString(b.shape) + " " + dtypeName(a.dtype));
  Buf out = make(outType, outShape);
  RUN_OK(op, {}, {&a, &b}, out);
  std::vector<double> want(out.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    double r = ref(a.at(broadcastIndex(a.shape, outShape, i)),
                   b.at(broadcastIndex(b.shape, outShape, i)));
    // The reference rounds to the result type as the kernel does.
    Buf tmp = make(outType, {1}, {r});
    want[i] = outType == DType::F32 || outType == DType::F64 ? r : tmp.at(0);
  }
  expectAll(out, want, rel);
}

const std::vector<std::pair<std::string, BinaryRef>> &arithmeticOps() {
  static const std::vector<std::pair<std::string, BinaryRef>> ops = {
      {"add", [](double x, double y) { return x + y; }},
      {"sub", [](double x, double y) { return x - y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"div", [](double x, double y) { return x / y; }},
      {"max", [](double x, double y) { return std::max(x, y); }},
      {"min", [](double x, double y) { return std::min(x, y); }},
      {"pow", [](double x, double y) { return std::pow(x, y); }},
  };
  return ops;
}

struct BroadcastCase {
  Shape a, b, out;
};
const std::vector<BroadcastCase> kBroadcastCases = {
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, // same shape
    {{2, 3, 4}, {4}, {2, 3, 4}},       // bias
    {{2, 3, 4}, {}, {2, 3, 4}},        // scalar rhs
    {{}, {2, 3, 4}, {2, 3, 4}},        // scalar lhs
    {{2, 3, 1}, {1, 1, 4}, {2, 3, 4}}, // outer product
    {{3, 1}, {2, 1, 5}, {2, 3, 5}},    // both stretched
    {{2, 1, 4}, {3, 1}, {2, 3, 4}},    // middle
    {{1}, {1}, {1}},                   // one element
    {{5, 0}, {1}, {5, 0}},             // empty
    {{300, 257}, {257}, {300, 257}},   // large enough to thread
    {{300, 1}, {300, 257}, {300, 257}},
};

TEST(CpuElementwise, ArithmeticF32Broadcasting) {
  for (const auto &c : kBroadcastCases)
    for (const auto &[op, ref] : arithmeticOps()) {
      bool pow = op == "pow";
      Buf a = random(DType::F32, c.a, pow ? 0.1 : -3, 3, 1);
      Buf b = random(DType::F32, c.b, pow ? -2 : 0.5, 3, 2);
      checkBinary(op, a, b, c.out, DType::F32, ref);
    }
}

TEST(CpuElementwise, ArithmeticOtherFloatTypes) {
  for (DType t : {DType::F64, DType::F16, DType::BF16})
    for (const auto &[op, ref] : arithmeticOps()) {
      bool pow = op == "pow";
      Buf a = random(t, {3, 4, 5}, pow ? 0.1 : -3, 3, 3);
      Buf b = random(t, {4, 1}, pow ? -2 : 0.5, 3, 4);
      // The reference starts from the rounded inputs; one rounding of the
      // result apart.
      checkBinary(op, a, b, {3, 4, 5}, t, ref, relTol(t));
    }
}

TEST(CpuElementwise, ArithmeticIntegers) {
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8, DType::U8,
                  DType::U16, DType::U32, DType::U64}) {
    bool isUnsigned =
        t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
    Buf a = random(t, {4, 5}, isUnsigned ? 0 : -12, 12, 5);
    Buf b = random(t, {5}, 1, 9, 6);
    for (const auto &[op, ref] : arithmeticOps()) {
      if (op == "pow") {
        Buf small = random(t, {4, 5}, isUnsigned ? 0 : -5, 5, 7);
        Buf e = random(t, {5}, 0, 4, 8);
        checkBinary(op, small, e, {4, 5}, t, ref, 0);
        continue;
      }
      if (isUnsigned && op == "sub")
        continue; // wraps; checked below
      BinaryRef r = ref;
      if (op == "div") // C's truncation toward zero, as ONNX Div on ints
        r = [](double x, double y) { return std::trunc(x / y); };
      checkBinary(op, a, b, {4, 5}, t, r, 0);
    }
  }
}

TEST(CpuElementwise, IntegerEdgeCases) {
  // Truncating division, as C (and ONNX Div on integers) does.
  Buf a = make(DType::I32, {4}, {7, -7, 7, -7}),
      b = make(DType::I32, {4}, {2, 2, -2, -2});
  Buf out = make(DType::I32, {4});
  RUN_OK("div", {}, {&a, &b}, out);
  EXPECT_EQ(values(out), (std::vector<double>{3, -3, -3, 3}));
  // INT64_MIN / -1 wraps instead of trapping.
  Buf m = make(DType::I64, {1}), n = make(DType::I64, {1}, {-1});
  m.as<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  Buf mo = make(DType::I64, {1});
  RUN_OK("div", {}, {&m, &n}, mo);
  EXPECT_EQ(mo.as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  // Division by zero is an error, not a crash.
  Buf z = make(DType::I64, {2}, {1, 0}), zo = make(DType::I64, {2});
  RUN_ERROR("div: integer division by zero", "div", {}, {&z, &z}, zo);
  // Wrapping arithmetic.
  Buf u = make(DType::U8, {2}, {250, 3}), v = make(DType::U8, {2}, {10, 5});
  Buf uo = make(DType::U8, {2});
  RUN_OK("add", {}, {&u, &v}, uo);
  EXPECT_EQ(values(uo), (std::vector<double>{4, 8}));
  RUN_OK("sub", {}, {&v, &u}, uo);
  EXPECT_EQ(values(uo), (std::vector<double>{16, 2}));
  Buf w = make(DType::U16, {1}, {65535}), wo = make(DType::U16, {1});
  RUN_OK("mul", {}, {&w, &w}, wo);
  EXPECT_EQ(wo.at(0), 1);
  // Integer pow: negative exponents truncate 1 / x^n.
  Buf base = make(DType::I64, {5}, {2, -2, 1, -1, 3});
  Buf exps = make(DType::I64, {5}, {10, 3, -5, -3, -1});
  Buf po = make(DType::I64, {5});
  RUN_OK("pow", {}, {&base, &exps}, po);
  EXPECT_EQ(values(po), (std::vector<double>{1024, -8, 1, -1, 0}));
}

TEST(CpuElementwise, MaxMinPropagateNaN) {
  Buf a = make(DType::F32, {4}, {1, kNaN, 3, kNaN});
  Buf b = make(DType::F32, {4}, {kNaN, 2, 1, kNaN});
  Buf out = make(DType::F32, {4});
  for (const char *op : {"max", "min"}) {
    RUN_OK(op, {}, {&a, &b}, out);
    EXPECT_TRUE(std::isnan(out.at(0)) && std::isnan(out.at(1)) &&
                std::isnan(out.at(3)))
        << op;
    EXPECT_EQ(out.at(2), std::string(op) == "max" ? 3 : 1);
  }
}

TEST(CpuElementwise, PowSmallExponents) {
  Buf x = random(DType::F32, {1000}, -3, 3, 9);
  for (double e : {1.0, 2.0, 3.0, 0.5, -1.0}) {
    Buf ex = make(DType::F32, {}, {e});
    Buf xp = e == 0.5 ? random(DType::F32, {1000}, 0, 3, 9) : x;
    checkBinary("pow", xp, ex, {1000}, DType::F32,
                [](double a, double b) { return std::pow(a, b); });
  }
}

TEST(CpuElementwise, LogicalOps) {
  Buf a = make(DType::Bool, {2, 2}, {0, 0, 1, 1});
  Buf b = make(DType::Bool, {2}, {0, 1});
  checkBinary("and", a, b, {2, 2}, DType::Bool,
              [](double x, double y) { return double(x && y); });
  checkBinary("or", a, b, {2, 2}, DType::Bool,
              [](double x, double y) { return double(x || y); });
  Buf f = make(DType::F32, {2}), fo = make(DType::F32, {2});
  RUN_ERROR("and: no kernel for element type f32", "and", {}, {&f, &f}, fo);
  Buf n = make(DType::Bool, {2, 2});
  RUN_OK("not", {}, {&a}, n);
  EXPECT_EQ(values(n), (std::vector<double>{1, 1, 0, 0}));
}

TEST(CpuElementwise, Comparisons) {
  const std::vector<std::pair<std::string, BinaryRef>> ops = {
      {"equal", [](double x, double y) { return double(x == y); }},
      {"less", [](double x, double y) { return double(x < y); }},
      {"less_equal", [](double x, double y) { return double(x <= y); }},
      {"greater", [](double x, double y) { return double(x > y); }},
      {"greater_equal", [](double x, double y) { return double(x >= y); }},
  };
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
                  DType::I32, DType::I8, DType::U8})
    for (const auto &[op, ref] : ops) {
      Buf a = random(t, {8, 1}, 0, 5, 10), b = random(t, {8}, 0, 5, 11);
      checkBinary(op, a, b, {8, 8}, DType::Bool, ref, 0);
    }
  Buf a = make(DType::Bool, {3}, {0, 1, 1}),
      b = make(DType::Bool, {3}, {0, 0, 1});
  checkBinary(
      "equal", a, b, {3}, DType::Bool,
      [](double x, double y) { return double(x == y); }, 0);
  // NaN compares unequal.
  Buf n = make(DType::F32, {1}, {kNaN}), no = make(DType::Bool, {1});
  RUN_OK("equal", {}, {&n, &n}, no);
  EXPECT_EQ(no.at(0), 0);
  // The result must be bool.
  Buf wrong = make(DType::F32, {8, 8});
  Buf x = random(DType::F32, {8, 1}), y = random(DType::F32, {8});
  RUN_ERROR("less: the result has element type f32, expected bool", "less", {},
            {&x, &y}, wrong);
}

TEST(CpuElementwise, BinaryErrors) {
  Buf a = make(DType::F32, {2, 3}), b = make(DType::F32, {4});
  Buf out = make(DType::F32, {2, 3});
  RUN_ERROR("add: operands of shapes [2, 3] and [4] do not broadcast to the "
            "result shape [2, 3]",
            "add", {}, {&a, &b}, out);
  Buf c = make(DType::F32, {3}), big = make(DType::F32, {4, 2, 3});
  RUN_ERROR("do not broadcast to the result shape [4, 2, 3]", "mul", {},
            {&a, &c}, big);
  Buf i = make(DType::I32, {3});
  RUN_ERROR("sub: rhs has element type i32, expected f32", "sub", {}, {&a, &i},
            out);
  Buf bo = make(DType::Bool, {2}), bb = make(DType::Bool, {2});
  RUN_ERROR("add: no kernel for element type bool", "add", {}, {&bo, &bo}, bb);
}

TEST(CpuElementwise, Select) {
  // A causal mask [1, 1, T, T] over scores [B, H, T, T], filled with a
  // scalar: how imported attention masks look.
  Shape outShape{2, 3, 5, 5};
  Buf cond = make(DType::Bool, {1, 1, 5, 5});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j)
      cond.set(i * 5 + j, j <= i);
  Buf scores = random(DType::F32, outShape, -2, 2, 12);
  Buf fill = make(DType::F32, {}, {-kInf});
  Buf out = make(DType::F32, outShape);
  RUN_OK("select", {}, {&cond, &scores, &fill}, out);
  std::vector<double> want(out.size());
  for (int64_t i = 0; i < out.size(); ++i)
    want[i] =
        cond.at(broadcastIndex(cond.shape, outShape, i)) ? scores.at(i) : -kInf;
  expectAll(out, want, 0, 0);
  // Every operand broadcast, several element sizes.
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I64, DType::I8,
                  DType::Bool}) {
    Buf c = random(DType::Bool, {4, 1, 3}, 0, 2, 13);
    Buf x = random(t, {5, 1}, 0, 2, 14), y = random(t, {3}, 0, 2, 15);
    Buf o = make(t, {4, 5, 3});
    RUN_OK("select", {}, {&c, &x, &y}, o);
    for (int64_t i = 0; i < o.size(); ++i) {
      bool k = c.at(broadcastIndex(c.shape, o.shape, i));
      double w = k ? x.at(broadcastIndex(x.shape, o.shape, i))
                   : y.at(broadcastIndex(y.shape, o.shape, i));
      ASSERT_EQ(o.at(i), w) << dtypeName(t) << " element " << i;
    }
  }
  Buf badCond = make(DType::F32, {3});
  Buf x = make(DType::F32, {3}), o = make(DType::F32, {3});
  RUN_ERROR("select: cond has element type f32, expected bool", "select", {},
            {&badCond, &x, &x}, o);
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double geluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

void checkUnary(const std::string &op, const Buf &x,
                std::function<double(double)> ref, const Attributes &attrs = {},
                double rel = -1, double abs = -1) {
  SCOPED_TRACE(op + " " + dtypeName(x.dtype));
  Buf out = make(x.dtype, x.shape);
  RUN_OK(op, attrs, {&x}, out);
  std::vector<double> want(x.size());
  for (int64_t i = 0; i < x.size(); ++i)
    want[i] = ref(x.at(i));
  expectAll(out, want, rel, abs);
}

TEST(CpuElementwise, FloatUnaryOps) {
  struct Case {
    const char *op;
    std::function<double(double)> ref;
    double lo, hi;
  };
  std::vector<Case> cases = {
      {"exp", [](double x) { return std::exp(x); }, -80, 80},
      {"log", [](double x) { return std::log(x); }, 1e-3, 1e3},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 1e-3, 100},
      {"reciprocal", [](double x) { return 1 / x; }, 0.01, 100},
      {"tanh", [](double x) { return std::tanh(x); }, -10, 10},
      {"erf", [](double x) { return std::erf(x); }, -4, 4},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -30, 30},
      {"sin", [](double x) { return std::sin(x); }, -10, 10},
      {"cos", [](double x) { return std::cos(x); }, -10, 10},
      {"neg", [](double x) { return -x; }, -10, 10},
      {"abs", [](double x) { return std::fabs(x); }, -10, 10},
      {"relu", [](double x) { return std::max(x, 0.0); }, -10, 10},
  };
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const Case &c : cases) {
      double lo = c.lo, hi = c.hi;
      if (t == DType::F16 && std::string(c.op) == "exp")
        lo = -10, hi = 10; // inside f16's range
      Buf x = random(t, {3, 1000}, lo, hi, 16);
      // sin and cos of large arguments: absolute error.
      double abs = (std::string(c.op) == "sin" || std::string(c.op) == "cos")
                       ? relTol(t)
                       : -1;
      checkUnary(c.op, x, c.ref, {}, -1, abs);
    }
}

TEST(CpuElementwise, SmallArgumentsKeepRelativeAccuracy) {
  Buf x = make(DType::F32, {6}, {1e-6, -1e-6, 1e-3, -1e-3, 0.5, -0.7});
  checkUnary(
      "tanh", x, [](double v) { return std::tanh(v); }, {}, -1, 0);
  checkUnary("gelu", x, geluTanh, {{"approximate", stringA("tanh")}}, -1, 0);
  checkUnary("gelu", x, geluErf, {}, -1, 0);
  checkUnary(
      "silu", x, [](double v) { return v / (1 + std::exp(-v)); }, {}, -1, 0);
}

TEST(CpuElementwise, ExpSpecialValues) {
  Buf x =
      make(DType::F32, {9}, {-kInf, kInf, kNaN, 0, -100, 88.5, 89, -87, -110});
  Buf out = make(DType::F32, {9});
  RUN_OK("exp", {}, {&x}, out);
  EXPECT_EQ(out.at(0), 0);
  EXPECT_EQ(out.at(1), kInf);
  EXPECT_TRUE(std::isnan(out.at(2)));
  EXPECT_EQ(out.at(3), 1);
  EXPECT_NEAR(out.at(4), std::exp(-100.0), 1e-44); // subnormal
  EXPECT_TRUE(near(out.at(5), std::exp(88.5), 1e-5, 0));
  EXPECT_EQ(out.at(6), kInf);
  EXPECT_TRUE(near(out.at(7), std::exp(-87.0), 1e-5, 0));
  EXPECT_EQ(out.at(8), 0);
  Buf sx = make(DType::F32, {3}, {-kInf, kInf, kNaN}),
      so = make(DType::F32, {3});
  RUN_OK("sigmoid", {}, {&sx}, so);
  EXPECT_EQ(so.at(0), 0);
  EXPECT_EQ(so.at(1), 1);
  EXPECT_TRUE(std::isnan(so.at(2)));
  RUN_OK("tanh", {}, {&sx}, so);
  EXPECT_EQ(so.at(0), -1);
  EXPECT_EQ(so.at(1), 1);
  EXPECT_TRUE(std::isnan(so.at(2)));
}

TEST(CpuElementwise, Gelu) {
  for (DType t : {DType::F32, DType::F64, DType::BF16}) {
    Buf x = random(t, {2, 8, 300}, -12, 12, 17);
    checkUnary("gelu", x, geluTanh, {{"approximate", stringA("tanh")}}, -1,
               1e-6);
    checkUnary("gelu", x, geluErf, {{"approximate", stringA("none")}}, -1,
               1e-6);
    checkUnary("gelu", x, geluErf, {}, -1, 1e-6); // "none" by default
  }
  Buf x = make(DType::F32, {2}), out = make(DType::F32, {2});
  RUN_ERROR("gelu: approximate must be \"none\" or \"tanh\", got \"fast\"",
            "gelu", {{"approximate", stringA("fast")}}, {&x}, out);
}

TEST(CpuElementwise, IntegerUnaryOps) {
  for (DType t : {DType::I64, DType::I32, DType::I8}) {
    Buf x = random(t, {50}, -20, 20, 18);
    checkUnary(
        "neg", x, [](double v) { return -v; }, {}, 0, 0);
    checkUnary(
        "abs", x, [](double v) { return std::fabs(v); }, {}, 0, 0);
    checkUnary(
        "relu", x, [](double v) { return std::max(v, 0.0); }, {}, 0, 0);
  }
  Buf i = make(DType::I64, {2}), o = make(DType::I64, {2});
  RUN_ERROR("exp: no kernel for element type i64", "exp", {}, {&i}, o);
  Buf f = make(DType::F32, {2}), fo = make(DType::F32, {3});
  RUN_ERROR("exp: the result has shape [3], expected [2]", "exp", {}, {&f}, fo);
  Buf b = make(DType::F32, {2}), bo = make(DType::Bool, {2});
  RUN_ERROR("not: the result has element type bool, expected f32", "not", {},
            {&b}, bo);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(CpuMovement, CastFloatToIntTruncatesAndSaturates) {
  Buf x = make(DType::F32, {8}, {2.7, -2.7, 0.5, -0.5, kNaN, 1e20, -1e20, 3});
  Buf out = make(DType::I32, {8});
  RUN_OK("cast", {}, {&x}, out);
  EXPECT_EQ(values(out), (std::vector<double>{2, -2, 0, 0, 0, 2147483647,
                                              -2147483648.0, 3}));
  Buf u = make(DType::U8, {8});
  RUN_OK("cast", {}, {&x}, u);
  EXPECT_EQ(values(u), (std::vector<double>{2, 0, 0, 0, 0, 255, 0, 3}));
}

TEST(CpuMovement, CastToAndFromBool) {
  Buf x = make(DType::F32, {5}, {0, -0.0, 0.1, kNaN, -3});
  Buf b = make(DType::Bool, {5});
  RUN_OK("cast", {}, {&x}, b);
  EXPECT_EQ(values(b), (std::vector<double>{0, 0, 1, 1, 1}));
  Buf f = make(DType::F64, {5});
  RUN_OK("cast", {}, {&b}, f);
  EXPECT_EQ(values(f), (std::vector<double>{0, 0, 1, 1, 1}));
  Buf i = make(DType::I64, {3}, {0, 7, -1}), ib = make(DType::Bool, {3});
  RUN_OK("cast", {}, {&i}, ib);
  EXPECT_EQ(values(ib), (std::vector<double>{0, 1, 1}));
}

TEST(CpuMovement, CastSixteenBitFloatsRoundToNearestEven) {
  Buf x = make(DType::F32, {8});
  float in[8] = {1.0f,  65504.0f, 65520.0f,           1e-8f,
                 6e-8f, -2.0f,    1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048};
  std::memcpy(x.as<float>(), in, sizeof(in));
  Buf h = make(DType::F16, {8});
  RUN_OK("cast", {}, {&x}, h);
  uint16_t wantHalf[8] = {0x3C00, 0x7BFF, 0x7C00, 0x0000,
                          0x0001, 0xC000, 0x3C00, 0x3C02}; // ties to even
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(h.as<uint16_t>()[i], wantHalf[i]) << i;
  Buf bf = make(DType::BF16, {3});
  Buf y = make(DType::F32, {3});
  float in2[3] = {1.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256};
  std::memcpy(y.as<float>(), in2, sizeof(in2));
  RUN_OK("cast", {}, {&y}, bf);
  EXPECT_EQ(bf.as<uint16_t>()[0], 0x3F80);
  EXPECT_EQ(bf.as<uint16_t>()[1], 0x3F80); // tie to even
  EXPECT_EQ(bf.as<uint16_t>()[2], 0x3F82);
  // And back, exactly.
  Buf back = make(DType::F32, {8});
  RUN_OK("cast", {}, {&h}, back);
  EXPECT_EQ(back.at(1), 65504);
  EXPECT_EQ(back.at(2), kInf);
  EXPECT_NEAR(back.at(4), 5.960464477539063e-08, 1e-20);
}

TEST(CpuMovement, CastEveryPair) {
  std::vector<DType> types = {DType::F32, DType::F64, DType::F16, DType::BF16,
                              DType::I64, DType::I32, DType::I16, DType::I8,
                              DType::U8,  DType::U16, DType::U32, DType::U64,
                              DType::Bool};
  for (DType from : types)
    for (DType to : types) {
      Buf x = make(from, {4}, {0, 1, 2, 100});
      Buf out = make(to, {4});
      RUN_OK("cast", {}, {&x}, out);
      std::vector<double> want = {0, 1, 2, 100};
      if (to == DType::Bool || from == DType::Bool)
        want = {0, 1, 1, 1};
      EXPECT_EQ(values(out), want)
          << dtypeName(from) << " -> " << dtypeName(to);
    }
  // Integers wrap.
  Buf big = make(DType::I64, {1}, {300}), small = make(DType::I8, {1});
  RUN_OK("cast", {}, {&big}, small);
  EXPECT_EQ(small.at(0), 44);
  Buf wrongShape = make(DType::I8, {2});
  RUN_ERROR("cast: the result has shape [2], expected [1]", "cast", {}, {&big},
            wrongShape);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CpuMovement, Reshape) {
  Buf x = random(DType::F32, {2, 3, 4}), out = make(DType::F32, {6, 4});
  RUN_OK("reshape", {}, {&x}, out);
  EXPECT_EQ(values(out), values(x));
  Buf bad = make(DType::F32, {5, 4});
  RUN_ERROR("reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 4] (20 "
            "elements)",
            "reshape", {}, {&x}, bad);
}

void checkTranspose(const Buf &x, const std::vector<int64_t> &perm) {
  SCOPED_TRACE(ops::shapeString(x.shape) + " perm " + ops::shapeString(perm));
  Shape outShape(perm.size());
  for (size_t k = 0; k < perm.size(); ++k)
    outShape[k] = x.shape[perm[k]];
  Buf out = make(x.dtype, outShape);
  RUN_OK("transpose", {{"perm", intsA(perm)}}, {&x}, out);
  std::vector<double> want(out.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    auto o = unflatten(outShape, i);
    std::vector<int64_t> in(perm.size());
    for (size_t k = 0; k < perm.size(); ++k)
      in[perm[k]] = o[k];
    want[i] = x.at(flatten(x.shape, in));
  }
  expectAll(out, want, 0, 0);
}

TEST(CpuMovement, Transpose) {
  checkTranspose(random(DType::F32, {70, 45}), {1, 0});
  checkTranspose(random(DType::F32, {200, 136}), {1, 0}); // whole 8x8 blocks
  checkTranspose(random(DType::I32, {3, 67, 131}), {0, 2, 1});
  checkTranspose(random(DType::F32, {2, 9, 4, 16}), {0, 2, 1, 3});  // heads
  checkTranspose(random(DType::F32, {2, 4, 33, 16}), {0, 1, 3, 2}); // k^T
  checkTranspose(random(DType::F32, {3, 4, 5}), {2, 0, 1});
  checkTranspose(random(DType::F32, {3, 4, 5}), {1, 2, 0});
  checkTranspose(random(DType::F32, {3, 1, 5, 1}), {3, 2, 1, 0});
  checkTranspose(random(DType::F32, {3, 4, 5}), {0, 1, 2}); // identity
  checkTranspose(random(DType::F32, {2, 3, 4, 5, 6}), {4, 1, 3, 0, 2});
  checkTranspose(random(DType::F32, {}), {});
  checkTranspose(random(DType::F32, {0, 3}), {1, 0});
  for (DType t : {DType::F64, DType::F16, DType::I8, DType::Bool, DType::I64})
    checkTranspose(random(t, {5, 6, 7}, 0, 2), {2, 0, 1});
  Buf x = make(DType::F32, {2, 3}), out = make(DType::F32, {3, 2});
  RUN_ERROR("transpose: perm [0, 0] is not a permutation of the 2 dimensions "
            "of x",
            "transpose", {{"perm", intsA({0, 0})}}, {&x}, out);
  RUN_ERROR("transpose: the result has shape [3, 2], expected [2, 3]",
            "transpose", {{"perm", intsA({0, 1})}}, {&x}, out);
  RUN_ERROR("transpose: missing attribute 'perm'", "transpose", {}, {&x}, out);
}

TEST(CpuMovement, BroadcastTo) {
  for (auto [in, to] :
       std::vector<std::pair<Shape, Shape>>{{{1, 8}, {4, 8}},
                                            {{3, 1}, {2, 3, 5}},
                                            {{}, {2, 2}},
                                            {{4}, {4}},
                                            {{2, 1, 3}, {2, 4, 3}}}) {
    Buf x = random(DType::F32, in), out = make(DType::F32, to);
    RUN_OK("broadcast_to", {}, {&x}, out);
    std::vector<double> want(out.size());
    for (int64_t i = 0; i < out.size(); ++i)
      want[i] = x.at(broadcastIndex(in, to, i));
    expectAll(out, want, 0, 0);
  }
  Buf x = make(DType::F32, {3}), out = make(DType::F32, {2, 4});
  RUN_ERROR("broadcast_to: x of shape [3] does not broadcast to the result "
            "shape [2, 4]",
            "broadcast_to", {}, {&x}, out);
}

void checkSlice(const Buf &x, std::vector<int64_t> start,
                std::vector<int64_t> limit, std::vector<int64_t> step,
                Shape outShape) {
  SCOPED_TRACE("slice " + ops::shapeString(start) + " " +
               ops::shapeString(limit) + " " + ops::shapeString(step));
  Buf out = make(x.dtype, outShape);
  RUN_OK(
      "slice",
      {{"start", intsA(start)}, {"limit", intsA(limit)}, {"step", intsA(step)}},
      {&x}, out);
  std::vector<double> want(out.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    auto o = unflatten(outShape, i);
    for (size_t d = 0; d < o.size(); ++d)
      o[d] = start[d] + o[d] * step[d];
    want[i] = x.at(flatten(x.shape, o));
  }
  expectAll(out, want, 0, 0);
}

TEST(CpuMovement, Slice) {
  Buf x = random(DType::F32, {2, 8, 192});
  checkSlice(x, {0, 0, 64}, {2, 8, 128}, {1, 1, 1}, {2, 8, 64}); // qkv split
  checkSlice(x, {1, 1, 0}, {2, 8, 192}, {1, 3, 5}, {1, 3, 39});
  // Negative steps, normalized as the ONNX importer does: for step < 0,
  // -1 <= limit <= start < dim, and the count is ceil((start - limit) / -step).
  checkSlice(x, {1, 7, 191}, {-1, -1, -1}, {-1, -1, -1}, {2, 8, 192});
  checkSlice(x, {0, 6, 100}, {-1, 0, 3}, {-1, -2, -7}, {1, 3, 14});
  checkSlice(x, {0, 0, 0}, {2, 8, 0}, {1, 1, 1}, {2, 8, 0}); // empty
  Buf y = random(DType::I64, {10}, 0, 100);
  checkSlice(y, {9}, {-1}, {-3}, {4});
  Buf wide = make(DType::F32, {2, 8, 64});
  RUN_ERROR("slice: the result has shape [2, 8, 64], expected [2, 8, 32]",
            "slice",
            {{"start", intsA({0, 0, 0})},
             {"limit", intsA({2, 8, 32})},
             {"step", intsA({1, 1, 1})}},
            {&x}, wide);
  Buf out = make(DType::F32, {2, 8, 10});
  RUN_ERROR("slice: dimension 2 of size 192 cannot be sliced from 190 to 200 "
            "by 1",
            "slice",
            {{"start", intsA({0, 0, 190})},
             {"limit", intsA({2, 8, 200})},
             {"step", intsA({1, 1, 1})}},
            {&x}, out);
  RUN_ERROR("slice: step of dimension 0 is 0", "slice",
            {{"start", intsA({0, 0, 0})},
             {"limit", intsA({2, 8, 10})},
             {"step", intsA({0, 1, 1})}},
            {&x}, out);
  RUN_ERROR(
      "slice: start, limit and step need one entry per dimension", "slice",
      {{"start", intsA({0})}, {"limit", intsA({2})}, {"step", intsA({1})}},
      {&x}, out);
}

TEST(CpuMovement, Concat) {
  for (int64_t axis : {0, 1, 2, -1}) {
    Shape sa{2, 3, 4}, sb{2, 3, 4}, sc{2, 3, 4};
    int64_t ax = axis < 0 ? axis + 3 : axis;
    sb[ax] = 1;
    sc[ax] = 5;
    Buf a = random(DType::F32, sa, -1, 1, 1),
        b = random(DType::F32, sb, -1, 1, 2),
        c = random(DType::F32, sc, -1, 1, 3);
    Shape so = sa;
    so[ax] = sa[ax] + 1 + 5;
    Buf out = make(DType::F32, so);
    RUN_OK("concat", {{"axis", intA(axis)}}, {&a, &b, &c}, out);
    std::vector<double> want(out.size());
    for (int64_t i = 0; i < out.size(); ++i) {
      auto o = unflatten(so, i);
      int64_t k = o[ax];
      const Buf *src = &a;
      if (k >= sa[ax]) {
        k -= sa[ax];
        src = &b;
        if (k >= 1) {
          k -= 1;
          src = &c;
        }
      }
      o[ax] = k;
      want[i] = src->at(flatten(src->shape, o));
    }
    expectAll(out, want, 0, 0);
  }
  Buf a = make(DType::F32, {2, 3}), b = make(DType::F32, {3, 3});
  Buf out = make(DType::F32, {2, 6});
  RUN_ERROR("concat: operand 1 has shape [3, 3], expected [2, 3]", "concat",
            {{"axis", intA(1)}}, {&a, &b}, out);
  Buf i = make(DType::I32, {2, 3});
  RUN_ERROR("concat: operand 1 has element type i32, expected f32", "concat",
            {{"axis", intA(1)}}, {&a, &i}, out);
  Buf out5 = make(DType::F32, {2, 5});
  RUN_ERROR("concat: the operands' sizes along axis 1 add up to 6, but the "
            "result has 5",
            "concat", {{"axis", intA(1)}}, {&a, &a}, out5);
}

//===----------------------------------------------------------------------===//
// Dropout (docs/dropout.md)
//===----------------------------------------------------------------------===//

/// dropout's attributes: the compiler's and the runtime's.
Attributes dropoutAttrs(int64_t step, int64_t first, int64_t samples,
                        std::vector<int64_t> full = {},
                        std::vector<int64_t> offsets = {}) {
  Attributes a = {{"ratio", floatA(0.25)},
                  {"stream", stringA("/drop/Dropout")},
                  {"seed", intA(5)},
                  {"step", intA(step)},
                  {"first_sample", intA(first)},
                  {"samples", intA(samples)}};
  if (!full.empty()) {
    a["full_shape"] = intsA(full);
    a["offsets"] = intsA(offsets);
  }
  return a;
}

// A kept element is x / (1 - ratio), a dropped one 0, about ratio of them
// dropped; the mask is the stream's (Random.h) for the element's global
// index; a slice (a tensor rank's heads, another microbatch's samples)
// draws exactly the bits of its elements in the whole.
TEST(CpuDropout, MaskIsPerGlobalElement) {
  Buf x = random(DType::F32, {4, 6, 8}), y = make(DType::F32, {4, 6, 8});
  RUN_OK("dropout", dropoutAttrs(3, 0, 4), {&x}, y);
  int64_t dropped = 0;
  uint64_t key = splitmix64(streamKey(5, "/drop/Dropout") ^ 3);
  for (int64_t i = 0; i < x.size(); ++i) {
    bool kept = uniform53(key, uint64_t(i)) >= 0.25;
    EXPECT_EQ(y.at(i), kept ? double(float(x.at(i)) * (1.0f / 0.75f)) : 0.0)
        << i;
    dropped += !kept;
  }
  EXPECT_GT(dropped, x.size() / 8);
  EXPECT_LT(dropped, x.size() * 3 / 8);

  // Samples 2 and 3 as their own microbatch, columns 4..7 as a rank's
  // slice of the last dimension.
  Buf part = make(DType::F32, {2, 6, 4}), partY = make(DType::F32, {2, 6, 4});
  for (int64_t i = 0; i < part.size(); ++i) {
    std::vector<int64_t> at = unflatten(part.shape, i);
    part.set(i, x.at(flatten(x.shape, {at[0] + 2, at[1], at[2] + 4})));
  }
  RUN_OK("dropout", dropoutAttrs(3, 2, 2, {2, 6, 8}, {0, 0, 4}), {&part},
         partY);
  for (int64_t i = 0; i < part.size(); ++i) {
    std::vector<int64_t> at = unflatten(part.shape, i);
    EXPECT_EQ(partY.at(i), y.at(flatten(y.shape, {at[0] + 2, at[1], at[2] + 4})))
        << i;
  }

  // Another step, another mask.
  Buf other = make(DType::F32, {4, 6, 8});
  RUN_OK("dropout", dropoutAttrs(4, 0, 4), {&x}, other);
  EXPECT_NE(std::memcmp(other.bytes.data(), y.bytes.data(), y.bytes.size()), 0);
}

TEST(CpuDropout, BadAttributes) {
  Buf x = random(DType::F32, {4, 6}), y = make(DType::F32, {4, 6});
  Attributes a = dropoutAttrs(0, 0, 3);
  RUN_ERROR("dropout: the full tensor's 4 rows are not an equal number per "
            "sample of the 3 of the microbatch",
            "dropout", a, {&x}, y);
  a = dropoutAttrs(0, 0, 4);
  a["ratio"] = floatA(1.0);
  RUN_ERROR("dropout: ratio must be in (0, 1), got 1", "dropout", a, {&x}, y);
  RUN_ERROR("dropout: x [4, 6] at offsets [0, 4] is not inside full_shape "
            "[4, 8]",
            "dropout", dropoutAttrs(0, 0, 4, {4, 8}, {0, 4}), {&x}, y);
  a = dropoutAttrs(0, 0, 4);
  a.erase("step");
  RUN_ERROR("dropout: missing attribute 'step'", "dropout", a, {&x}, y);
}

} // namespace
