//===- GradientRulesTest.cpp - gradient rules against finite differences --===//
//
// For each op with a rule in passes/GradientRules.cpp, a module whose
// @forward computes `y = op(parameters...)` and `loss = sum(y * r)`, with `r`
// a random constant so that every element of `y` matters, is compiled by
// cleave-autodiff, cleave-memory-plan and cleave-emit-program and run by the
// CPU runtime, as cleave-run would. The gradient the backward function
// accumulates into each "<p>.grad" tensor must equal the central difference
// of the loss, the forward function run again with each element of the
// parameter perturbed in place.
//
// Parameters are f64 (the CPU kernels have f64 variants), so the differences
// are good to about 1e-10 and the tolerance can be tight: a wrong sign, a
// missing factor or a term of a product rule fails everywhere, not just on
// large elements. Inputs avoid the points where an op is not differentiable
// (relu and abs at 0, ties of max/min); ties have a test of their own.
//
//===----------------------------------------------------------------------===//

#include "ir/CleaveOps.h"
#include "passes/Passes.h"
#include "program.pb.h"
#include "runtime/Executor.h"
#include "runtime/ProgramLoader.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

namespace pb = cleave::program;
namespace rt = cleave::runtime;

namespace {

using Shape = std::vector<int64_t>;

int64_t elementsOf(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// `tensor<2x3xf64>`.
std::string tensorType(const Shape &shape, llvm::StringRef element) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + element.str() + ">";
}

/// `dense<[[...], [...]]> : tensor<...>` holding `values` in row-major
/// order. Floats are written with 17 digits, so f64 values round-trip.
std::string denseLiteral(const Shape &shape, llvm::ArrayRef<double> values,
                         llvm::StringRef element) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto print = [&](double v) {
    if (element == "i1")
      os << (v != 0 ? "true" : "false");
    else if (element.startswith("i"))
      os << int64_t(v);
    else
      os << llvm::format("%.17e", v);
  };
  int64_t at = 0;
  std::function<void(size_t)> nest = [&](size_t dim) {
    if (dim == shape.size()) {
      print(values[at++]);
      return;
    }
    os << "[";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (i)
        os << ", ";
      nest(dim + 1);
    }
    os << "]";
  };
  os << "dense<";
  nest(0);
  os << "> : " << tensorType(shape, element);
  return os.str();
}

/// Where random values are drawn from: uniform in [lo, hi], and with a
/// random sign when `bothSigns` (so [0.2, 1] with both signs keeps away
/// from 0).
struct Range {
  double lo = -1, hi = 1;
  bool bothSigns = false;
};
constexpr Range kAwayFromZero{0.2, 1.0, true};
constexpr Range kPositive{0.3, 2.0, false};

/// One gradient check: parameters, the body of @forward, the comparison.
class GradCheck {
public:
  explicit GradCheck(unsigned seed = 1) : rng_(seed) {}

  /// Declares parameter @name holding `values`.
  void paramValues(const std::string &name, const Shape &shape,
                   std::vector<double> values,
                   llvm::StringRef element = "f64") {
    params_.push_back({name, shape, std::move(values), element.str()});
  }
  /// Declares parameter @name with random values.
  void param(const std::string &name, const Shape &shape, Range range = {},
             llvm::StringRef element = "f64") {
    paramValues(name, shape, random(elementsOf(shape), range), element);
  }
  /// A parameter whose gradient is read but not compared with finite
  /// differences (the test checks it itself).
  void skipFiniteDifferences(const std::string &name) { noFd_.insert(name); }
  /// A parameter that must get no gradient tensor.
  void expectNoGradient(const std::string &name) { noGradient_.insert(name); }

  std::vector<double> random(int64_t n, Range range = {}) {
    std::uniform_real_distribution<double> u(range.lo, range.hi);
    std::vector<double> v(n);
    for (double &x : v) {
      x = u(rng_);
      if (range.bothSigns && (rng_() & 1))
        x = -x;
    }
    return v;
  }

  /// Relative and absolute tolerance of |autodiff - differences|, and the
  /// step of the differences (see check()).
  double tolerance = 1e-6;
  double step = 1e-5;

  /// The module: the parameters and `func.func @forward() -> tensor<E>`
  /// running `body` (which defines `%y : tensor<yShape x E>`), then
  /// `loss = sum(y * r)`.
  std::string moduleText(llvm::StringRef body, const Shape &yShape,
                         llvm::StringRef element) {
    std::string s;
    llvm::raw_string_ostream os(s);
    for (const Param &p : params_)
      os << "cleave.parameter @" << p.name << " : "
         << tensorType(p.shape, p.element) << " = "
         << denseLiteral(p.shape, p.values, p.element) << "\n";
    std::string y = tensorType(yShape, element);
    std::string scalar = tensorType({}, element);
    weights_ = random(elementsOf(yShape), {0.5, 1.5, true});
    os << "func.func @forward() -> " << scalar << " {\n"
       << body << "\n"
       << "  %r = cleave.constant " << denseLiteral(yShape, weights_, element)
       << "\n"
       << "  %yr = cleave.mul %y, %r : (" << y << ", " << y << ") -> " << y
       << "\n";
    if (yShape.empty()) {
      os << "  return %yr : " << scalar << "\n}\n";
      return os.str();
    }
    os << "  %loss = cleave.reduce_sum %yr {axes = array<i64: ";
    for (size_t d = 0; d < yShape.size(); ++d)
      os << (d ? ", " : "") << d;
    os << ">, keepdims = false} : " << y << " -> " << scalar << "\n"
       << "  return %loss : " << scalar << "\n}\n";
    return os.str();
  }

  /// Compiles the module, runs one training step for the gradients, and
  /// compares each parameter's gradient with central differences of the
  /// loss: (L(p + h) - L(p - h)) / (2h) per element, with h the difference
  /// of the values actually stored (an f32 parameter rounds p +- step).
  void check(llvm::StringRef body, const Shape &yShape,
             llvm::StringRef element = "f64") {
    if (!compileAndRunStep(body, yShape, element))
      return;
    rt::RunOptions forwardOnly;
    forwardOnly.forwardOnly = true;
    rt::Communicator world;
    rt::Runtime runtime(program_, dir_, world, forwardOnly);
    rt::Status status = runtime.initialize();
    ASSERT_TRUE(status) << status.message();
    auto lossNow = [&](double &loss) {
      rt::StepResult result;
      rt::Status s = runtime.runStep(0, nullptr, result);
      if (!s || !result.hasLoss) {
        ADD_FAILURE() << "forward-only step: " << (s ? "no loss" : s.message());
        return false;
      }
      loss = result.loss;
      return true;
    };
    double baseline;
    ASSERT_TRUE(lossNow(baseline));
    EXPECT_NEAR(baseline, loss_, 1e-9 * std::max(1.0, std::fabs(loss_)))
        << "the forward-only loss is not the training step's";

    for (const Param &p : params_) {
      if (noFd_.count(p.name) || !gradients_.count(p.name))
        continue;
      rt::TensorRef t = runtime.tensor(parameterTensor(p.name));
      const std::vector<double> &analytic = gradients_[p.name];
      int bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < t.numElements(); ++i) {
        double original = rt::loadElement(t.data, t.dtype, i);
        rt::storeElement(t.data, t.dtype, i, original + step);
        double up = rt::loadElement(t.data, t.dtype, i), lossUp, lossDown;
        ASSERT_TRUE(lossNow(lossUp));
        rt::storeElement(t.data, t.dtype, i, original - step);
        double down = rt::loadElement(t.data, t.dtype, i);
        ASSERT_TRUE(lossNow(lossDown));
        rt::storeElement(t.data, t.dtype, i, original);
        double numeric = (lossUp - lossDown) / (up - down);
        double error = std::fabs(analytic[i] - numeric);
        worst = std::max(worst, error / std::max(1.0, std::fabs(numeric)));
        if (error > tolerance * std::max(1.0, std::fabs(numeric)) && bad++ < 6)
          ADD_FAILURE() << "d loss / d " << p.name << "[" << i << "]: autodiff "
                        << analytic[i] << ", finite differences " << numeric;
      }
      EXPECT_EQ(bad, 0) << bad << " of " << t.numElements()
                        << " elements of the gradient of @" << p.name
                        << " are wrong (worst relative error " << worst << ")\n"
                        << text_;
    }
  }

  /// Compiles and runs one training step; false (with a test failure
  /// unless `expectFailure`) when something fails.
  bool compileAndRunStep(llvm::StringRef body, const Shape &yShape,
                         llvm::StringRef element = "f64") {
    text_ = moduleText(body, yShape, element);
    std::string error = compile();
    if (!error.empty()) {
      ADD_FAILURE() << error << "\n" << text_;
      return false;
    }
    rt::Communicator world;
    rt::Runtime runtime(program_, dir_, world);
    rt::Status status = runtime.initialize();
    if (status) {
      rt::StepResult result;
      status = runtime.runStep(0, nullptr, result);
      loss_ = result.loss;
    }
    if (!status) {
      ADD_FAILURE() << "training step: " << status.message() << "\n" << text_;
      return false;
    }
    gradients_.clear();
    for (int id = 0; id < program_.tensors_size(); ++id) {
      const pb::Tensor &t = program_.tensors(id);
      if (t.category() != pb::GRADIENTS)
        continue;
      for (const pb::Parameter &p : program_.parameters()) {
        if (t.name() != p.name() + ".grad")
          continue;
        rt::TensorRef g = runtime.tensor(id);
        std::vector<double> &out = gradients_[p.name()];
        for (int64_t i = 0; i < g.numElements(); ++i)
          out.push_back(rt::loadElement(g.data, g.dtype, i));
      }
    }
    for (const Param &p : params_) {
      bool expected = !noGradient_.count(p.name);
      if (gradients_.count(p.name) != expected)
        ADD_FAILURE() << "@" << p.name
                      << (expected ? " got no gradient tensor"
                                   : " got a gradient tensor")
                      << "\n"
                      << text_;
    }
    return true;
  }

  /// Runs the passes up to the program; the diagnostics on failure.
  std::string compile(llvm::StringRef text) {
    text_ = text.str();
    return compile();
  }

  const std::vector<double> &gradient(const std::string &name) {
    return gradients_[name];
  }
  bool hasGradient(const std::string &name) const {
    return gradients_.count(name) != 0;
  }
  const std::vector<double> &weights() const { return weights_; }

  ~GradCheck() {
    if (!dir_.empty())
      llvm::sys::fs::remove_directories(dir_);
  }

private:
  struct Param {
    std::string name;
    Shape shape;
    std::vector<double> values;
    std::string element;
  };

  std::string compile() {
    mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
    mlir::DialectRegistry registry;
    mlir::cleave::registerCleaveDialects(registry);
    context.appendDialectRegistry(registry);
    std::string diagnostics;
    llvm::raw_string_ostream diag(diagnostics);
    mlir::ScopedDiagnosticHandler collect(&context, [&](mlir::Diagnostic &d) {
      diag << d.getLocation() << ": " << d << "\n";
      return mlir::success();
    });
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text_, &context);
    if (!module)
      return "the test module does not parse:\n" + diag.str();
    if (dir_.empty()) {
      llvm::SmallString<128> dir;
      if (llvm::sys::fs::createUniqueDirectory("cleave-gradient-rules", dir))
        return "cannot create a temporary folder";
      dir_ = dir.str().str();
    }
    mlir::PassManager pm(&context);
    pm.addPass(mlir::cleave::createInputRoles());
    mlir::cleave::AutodiffOptions autodiff;
    autodiff.microbatches = 1;
    pm.addPass(mlir::cleave::createAutodiff(autodiff));
    pm.addPass(mlir::cleave::createMemoryPlan());
    pm.addPass(mlir::cleave::createPipelineSchedule());
    mlir::cleave::EmitProgramOptions emit;
    emit.outputDir = dir_;
    pm.addPass(mlir::cleave::createEmitProgram(emit));
    if (failed(pm.run(*module)))
      return "compiling failed:\n" + diag.str();
    rt::Status status = rt::loadProgram(dir_ + "/rank-0.pb", program_);
    if (!status)
      return "the program does not load: " + status.message();
    return "";
  }

  int parameterTensor(const std::string &name) const {
    for (const pb::Parameter &p : program_.parameters())
      if (p.name() == name)
        return p.tensor();
    return -1;
  }

  std::mt19937_64 rng_;
  std::vector<Param> params_;
  std::set<std::string> noFd_, noGradient_;
  std::vector<double> weights_;
  std::string text_, dir_;
  pb::Program program_;
  double loss_ = 0;
  std::map<std::string, std::vector<double>> gradients_;
};

/// `%name = cleave.get_param @name : type`.
std::string getParam(const std::string &name, const Shape &shape,
                     llvm::StringRef element = "f64") {
  return "  %" + name + " = cleave.get_param @" + name + " : " +
         tensorType(shape, element) + "\n";
}

/// Numpy broadcasting of two shapes.
Shape broadcastShapes(Shape a, Shape b) {
  if (a.size() < b.size())
    std::swap(a, b);
  Shape out = a;
  size_t lead = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i)
    out[lead + i] = std::max(a[lead + i], b[i]);
  return out;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

struct UnaryCase {
  const char *name;
  const char *op; // the op and its attributes, before the operand type
  Range range;
};

class Unary : public testing::TestWithParam<UnaryCase> {};

TEST_P(Unary, MatchesFiniteDifferences) {
  const UnaryCase &c = GetParam();
  GradCheck check;
  Shape shape{3, 4};
  check.param("x", shape, c.range);
  std::string op = c.op;
  // `cleave.gelu %x {approximate = "tanh"}`: attributes follow the operand.
  size_t attrs = op.find(' ');
  std::string mnemonic = op.substr(0, attrs);
  std::string attributes = attrs == std::string::npos ? "" : op.substr(attrs);
  check.check(getParam("x", shape) + "  %y = cleave." + mnemonic + " %x" +
                  attributes + " : " + tensorType(shape, "f64"),
              shape);
}

INSTANTIATE_TEST_SUITE_P(
    GradientRules, Unary,
    testing::Values(
        UnaryCase{"neg", "neg", {}}, UnaryCase{"abs", "abs", kAwayFromZero},
        UnaryCase{"relu", "relu", kAwayFromZero}, UnaryCase{"exp", "exp", {}},
        UnaryCase{"log", "log", kPositive},
        UnaryCase{"sqrt", "sqrt", kPositive},
        UnaryCase{"rsqrt", "rsqrt", kPositive},
        UnaryCase{"reciprocal", "reciprocal", {0.3, 1.5, true}},
        UnaryCase{"tanh", "tanh", {-2, 2}},
        UnaryCase{"sigmoid", "sigmoid", {-3, 3}},
        UnaryCase{"erf", "erf", {-2, 2}}, UnaryCase{"sin", "sin", {-3, 3}},
        UnaryCase{"cos", "cos", {-3, 3}}, UnaryCase{"silu", "silu", {-3, 3}},
        UnaryCase{"gelu_none", "gelu", {-3, 3}},
        UnaryCase{
            "gelu_none_explicit", "gelu {approximate = \"none\"}", {-3, 3}},
        UnaryCase{"gelu_tanh", "gelu {approximate = \"tanh\"}", {-3, 3}}),
    [](const testing::TestParamInfo<UnaryCase> &info) {
      return std::string(info.param.name);
    });

struct BinaryCase {
  const char *name;
  const char *op;
  Shape lhs, rhs;
  Range lhsRange, rhsRange;
};

class Binary : public testing::TestWithParam<BinaryCase> {};

TEST_P(Binary, MatchesFiniteDifferences) {
  const BinaryCase &c = GetParam();
  GradCheck check;
  check.param("a", c.lhs, c.lhsRange);
  check.param("b", c.rhs, c.rhsRange);
  Shape out = broadcastShapes(c.lhs, c.rhs);
  check.check(getParam("a", c.lhs) + getParam("b", c.rhs) + "  %y = cleave." +
                  c.op + " %a, %b : (" + tensorType(c.lhs, "f64") + ", " +
                  tensorType(c.rhs, "f64") + ") -> " + tensorType(out, "f64"),
              out);
}

const Range kAny{};
const Range kDivisor{0.5, 1.5, true};
const Range kBase{0.5, 2.0, false};
const Range kExponent{-1.5, 1.5, false};

INSTANTIATE_TEST_SUITE_P(
    GradientRules, Binary,
    testing::Values(
        BinaryCase{"add", "add", {2, 3}, {2, 3}, kAny, kAny},
        // [8] + [2, 3, 8]: the bias of a linear layer.
        BinaryCase{"add_bias", "add", {8}, {2, 3, 8}, kAny, kAny},
        // Both operands stretch: [3, 1] + [2, 1, 4] -> [2, 3, 4].
        BinaryCase{"add_both_stretch", "add", {3, 1}, {2, 1, 4}, kAny, kAny},
        BinaryCase{"sub", "sub", {2, 3}, {2, 3}, kAny, kAny},
        BinaryCase{"sub_broadcast", "sub", {2, 1, 4}, {3, 4}, kAny, kAny},
        BinaryCase{"mul", "mul", {2, 3}, {2, 3}, kAny, kAny},
        BinaryCase{"mul_broadcast", "mul", {2, 3, 4}, {3, 1}, kAny, kAny},
        BinaryCase{"mul_scalar", "mul", {2, 3}, {}, kAny, kAny},
        BinaryCase{"div", "div", {2, 3}, {2, 3}, kAny, kDivisor},
        BinaryCase{"div_broadcast", "div", {4}, {3, 4}, kAny, kDivisor},
        BinaryCase{"pow", "pow", {2, 3}, {2, 3}, kBase, kExponent},
        BinaryCase{"pow_scalar_exponent", "pow", {2, 3}, {}, kBase, kExponent},
        BinaryCase{"pow_broadcast", "pow", {3}, {2, 3}, kBase, kExponent},
        BinaryCase{"max", "max", {2, 3}, {2, 3}, kAny, kAny},
        BinaryCase{"max_broadcast", "max", {2, 3, 4}, {4}, kAny, kAny},
        BinaryCase{"min", "min", {2, 3}, {2, 3}, kAny, kAny},
        BinaryCase{"min_broadcast", "min", {3, 1}, {2, 3, 4}, kAny, kAny}),
    [](const testing::TestParamInfo<BinaryCase> &info) {
      return std::string(info.param.name);
    });

/// At a tie, max and min split the gradient in half (torch.maximum). Not
/// differentiable there, so the values are checked directly.
TEST(GradientRules, MaxMinSplitTies) {
  for (const char *op : {"max", "min"}) {
    SCOPED_TRACE(op);
    GradCheck check;
    std::vector<double> a = {1, 2, 3, -4}, b = {1, 0, 5, -4};
    check.paramValues("a", {4}, a);
    check.paramValues("b", {4}, b);
    check.skipFiniteDifferences("a");
    check.skipFiniteDifferences("b");
    check.check(getParam("a", {4}) + getParam("b", {4}) + "  %y = cleave." +
                    op +
                    " %a, %b : (tensor<4xf64>, tensor<4xf64>) -> "
                    "tensor<4xf64>",
                {4});
    const std::vector<double> &r = check.weights();
    bool isMax = std::string(op) == "max";
    for (int i = 0; i < 4; ++i) {
      double share = a[i] == b[i] ? 0.5 : ((a[i] > b[i]) == isMax ? 1 : 0);
      EXPECT_DOUBLE_EQ(check.gradient("a")[i], share * r[i])
          << "a[" << i << "]";
      EXPECT_DOUBLE_EQ(check.gradient("b")[i], (1 - share) * r[i])
          << "b[" << i << "]";
    }
  }
}

TEST(GradientRules, Select) {
  GradCheck check;
  check.param("t", {2, 3});
  check.param("f", {3});
  // The condition broadcasts too: [2, 1] against [2, 3].
  check.check(getParam("t", {2, 3}) + getParam("f", {3}) + R"(
  %c = cleave.constant dense<[[true], [false]]> : tensor<2x1xi1>
  %m = cleave.constant dense<[[true, false, true], [false, true, true]]> : tensor<2x3xi1>
  %s = cleave.select %c, %t, %f : (tensor<2x1xi1>, tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
  %y = cleave.select %m, %s, %t : (tensor<2x3xi1>, tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>)",
              {2, 3});
}

/// A condition computed from the parameter (leaky relu): the comparison
/// gives no gradient, the chosen branch does.
TEST(GradientRules, SelectOnParameterComparison) {
  GradCheck check;
  check.param("x", {3, 4}, kAwayFromZero);
  check.check(getParam("x", {3, 4}) + R"(
  %zero = cleave.constant dense<0.0> : tensor<f64>
  %slope = cleave.constant dense<0.1> : tensor<f64>
  %pos = cleave.greater %x, %zero : (tensor<3x4xf64>, tensor<f64>) -> tensor<3x4xi1>
  %leak = cleave.mul %x, %slope : (tensor<3x4xf64>, tensor<f64>) -> tensor<3x4xf64>
  %y = cleave.select %pos, %x, %leak : (tensor<3x4xi1>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>)",
              {3, 4});
}

/// f32 -> f64 -> f32: both directions of cast's rule, with an f64 op
/// between them.
TEST(GradientRules, CastF32F64F32) {
  GradCheck check;
  check.param("x", {2, 3}, {-2, 2}, "f32");
  // Differences of an f32 loss: the step and tolerance of f32.
  check.step = 1e-2;
  check.tolerance = 2e-3;
  check.check(getParam("x", {2, 3}, "f32") + R"(
  %w = cleave.cast %x : tensor<2x3xf32> -> tensor<2x3xf64>
  %s = cleave.sin %w : tensor<2x3xf64>
  %y = cleave.cast %s : tensor<2x3xf64> -> tensor<2x3xf32>)",
              {2, 3}, "f32");
}

/// And f64 -> f32 -> f64 around an f32 op, with an f64 loss.
TEST(GradientRules, CastF64F32F64) {
  GradCheck check;
  check.param("x", {2, 3}, {-2, 2});
  check.step = 1e-2;
  check.tolerance = 2e-3;
  check.check(getParam("x", {2, 3}) + R"(
  %w = cleave.cast %x : tensor<2x3xf64> -> tensor<2x3xf32>
  %s = cleave.tanh %w : tensor<2x3xf32>
  %y = cleave.cast %s : tensor<2x3xf32> -> tensor<2x3xf64>)",
              {2, 3});
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

struct MatmulCase {
  const char *name;
  Shape lhs, rhs, result;
  bool transposeLhs, transposeRhs;
};

class Matmul : public testing::TestWithParam<MatmulCase> {};

TEST_P(Matmul, MatchesFiniteDifferences) {
  const MatmulCase &c = GetParam();
  GradCheck check;
  check.param("a", c.lhs);
  check.param("b", c.rhs);
  std::string attrs;
  if (c.transposeLhs || c.transposeRhs)
    attrs = std::string(" {") + (c.transposeLhs ? "transpose_lhs" : "") +
            (c.transposeLhs && c.transposeRhs ? ", " : "") +
            (c.transposeRhs ? "transpose_rhs" : "") + "}";
  check.check(getParam("a", c.lhs) + getParam("b", c.rhs) +
                  "  %y = cleave.matmul %a, %b" + attrs + " : (" +
                  tensorType(c.lhs, "f64") + ", " + tensorType(c.rhs, "f64") +
                  ") -> " + tensorType(c.result, "f64"),
              c.result);
}

INSTANTIATE_TEST_SUITE_P(
    GradientRules, Matmul,
    testing::Values(
        MatmulCase{"plain", {3, 4}, {4, 2}, {3, 2}, false, false},
        // Batch dimensions [2, 1] and [3] broadcast to [2, 3].
        MatmulCase{"batched_broadcast",
                   {2, 1, 3, 4},
                   {3, 4, 2},
                   {2, 3, 3, 2},
                   false,
                   false},
        MatmulCase{
            "batched_same", {2, 3, 4}, {2, 4, 2}, {2, 3, 2}, false, false},
        // Activations [B, T, K] times a weight [K, N]: dW is one product.
        MatmulCase{
            "activations_weight", {2, 3, 4}, {4, 5}, {2, 3, 5}, false, false},
        // ... and a weight stored [N, K], as nn.Linear's.
        MatmulCase{"activations_weight_transposed",
                   {2, 3, 4},
                   {5, 4},
                   {2, 3, 5},
                   false,
                   true},
        MatmulCase{"activations_transposed_weight",
                   {2, 4, 3},
                   {4, 5},
                   {2, 3, 5},
                   true,
                   false},
        MatmulCase{"transpose_lhs", {4, 3}, {4, 2}, {3, 2}, true, false},
        MatmulCase{"transpose_rhs", {3, 4}, {2, 4}, {3, 2}, false, true},
        MatmulCase{"transpose_both", {4, 3}, {2, 4}, {3, 2}, true, true},
        MatmulCase{"batched_transpose_both",
                   {2, 1, 4, 3},
                   {3, 2, 4},
                   {2, 3, 3, 2},
                   true,
                   true}),
    [](const testing::TestParamInfo<MatmulCase> &info) {
      return std::string(info.param.name);
    });

//===----------------------------------------------------------------------===//
// Reductions, softmax, normalizations
//===----------------------------------------------------------------------===//

struct ReduceCase {
  const char *name;
  const char *op;
  Shape axes;
  bool keepdims;
};

class Reduce : public testing::TestWithParam<ReduceCase> {};

TEST_P(Reduce, MatchesFiniteDifferences) {
  const ReduceCase &c = GetParam();
  GradCheck check;
  Shape x{2, 3, 4};
  // Distinct values (almost surely): max and min have a single winner.
  check.param("x", x);
  Shape y;
  for (size_t d = 0; d < x.size(); ++d) {
    bool reduced = llvm::is_contained(c.axes, int64_t(d));
    if (!reduced)
      y.push_back(x[d]);
    else if (c.keepdims)
      y.push_back(1);
  }
  std::string axes;
  for (int64_t a : c.axes)
    axes += (axes.empty() ? "" : ", ") + std::to_string(a);
  check.check(getParam("x", x) + "  %y = cleave." + c.op +
                  " %x {axes = array<i64: " + axes +
                  ">, keepdims = " + (c.keepdims ? "true" : "false") +
                  "} : " + tensorType(x, "f64") + " -> " + tensorType(y, "f64"),
              y);
}

INSTANTIATE_TEST_SUITE_P(
    GradientRules, Reduce,
    testing::Values(ReduceCase{"sum_keepdims", "reduce_sum", {1}, true},
                    ReduceCase{"sum", "reduce_sum", {0, 2}, false},
                    ReduceCase{"sum_all", "reduce_sum", {0, 1, 2}, false},
                    ReduceCase{"mean_keepdims", "reduce_mean", {2}, true},
                    ReduceCase{"mean", "reduce_mean", {0, 2}, false},
                    ReduceCase{"max_keepdims", "reduce_max", {1}, true},
                    ReduceCase{"max", "reduce_max", {0, 2}, false},
                    ReduceCase{"min_keepdims", "reduce_min", {2}, true},
                    ReduceCase{"min", "reduce_min", {1}, false}),
    [](const testing::TestParamInfo<ReduceCase> &info) {
      return std::string(info.param.name);
    });

/// Ties of reduce_max share the gradient evenly (torch.amax).
TEST(GradientRules, ReduceMaxSplitsTies) {
  GradCheck check;
  std::vector<double> x = {3, 1, 3, 2, 0, 5};
  check.paramValues("x", {2, 3}, x);
  check.skipFiniteDifferences("x");
  check.check(getParam("x", {2, 3}) + R"(
  %y = cleave.reduce_max %x {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf64> -> tensor<2xf64>)",
              {2});
  const std::vector<double> &r = check.weights();
  std::vector<double> expected = {r[0] / 2, 0, r[0] / 2, 0, 0, r[1]};
  for (int i = 0; i < 6; ++i)
    EXPECT_DOUBLE_EQ(check.gradient("x")[i], expected[i]) << "x[" << i << "]";
}

TEST(GradientRules, Softmax) {
  for (int axis : {1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    GradCheck check;
    check.param("x", {2, 3, 4}, {-2, 2});
    check.check(getParam("x", {2, 3, 4}) + "  %y = cleave.softmax %x {axis = " +
                    std::to_string(axis) + " : i64} : tensor<2x3x4xf64>",
                {2, 3, 4});
  }
}

TEST(GradientRules, LogSoftmax) {
  for (int axis : {0, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    GradCheck check;
    check.param("x", {2, 3, 4}, {-2, 2});
    check.check(getParam("x", {2, 3, 4}) +
                    "  %y = cleave.log_softmax %x {axis = " +
                    std::to_string(axis) + " : i64} : tensor<2x3x4xf64>",
                {2, 3, 4});
  }
}

TEST(GradientRules, Cumsum) {
  for (int axis : {0, 1})
    for (const char *flags :
         {"", ", exclusive = true", ", reverse = true",
          ", exclusive = true, reverse = true"}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + flags);
      GradCheck check;
      check.param("x", {3, 4}, {-2, 2});
      check.check(getParam("x", {3, 4}) + "  %y = cleave.cumsum %x {axis = " +
                      std::to_string(axis) + " : i64" + flags +
                      "} : tensor<3x4xf64>",
                  {3, 4});
    }
}

/// Pad imports as concat, broadcast_to and slice; Hugging Face pads the
/// labels, but a padded activation (reflect and constant on one axis, a
/// crop on another) gets its gradient through those rules.
TEST(GradientRules, PadAsImported) {
  GradCheck check;
  check.param("x", {2, 4});
  check.check(getParam("x", {2, 4}) + R"(
  %zero = cleave.constant dense<0.5> : tensor<1x1xf64>
  %fill = cleave.broadcast_to %zero : tensor<1x1xf64> -> tensor<1x4xf64>
  %rows = cleave.concat %fill, %x {axis = 0 : i64} : (tensor<1x4xf64>, tensor<2x4xf64>) -> tensor<3x4xf64>
  %left = cleave.slice %rows {start = array<i64: 0, 2>, limit = array<i64: 3, 0>, step = array<i64: 1, -1>} : tensor<3x4xf64> -> tensor<3x2xf64>
  %cols = cleave.concat %left, %rows {axis = 1 : i64} : (tensor<3x2xf64>, tensor<3x4xf64>) -> tensor<3x6xf64>
  %y = cleave.slice %cols {start = array<i64: 0, 0>, limit = array<i64: 3, 5>, step = array<i64: 1, 1>} : tensor<3x6xf64> -> tensor<3x5xf64>)",
              {3, 5});
}

TEST(GradientRules, LayerNormWithScaleAndBias) {
  GradCheck check;
  check.param("x", {2, 3, 4}, {-2, 2});
  check.param("g", {4}, Range{0.5, 1.5, true});
  check.param("b", {4});
  check.check(getParam("x", {2, 3, 4}) + getParam("g", {4}) +
                  getParam("b", {4}) + R"(
  %y = cleave.layer_norm %x scale %g bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>)",
              {2, 3, 4});
}

TEST(GradientRules, LayerNormOverTwoAxes) {
  GradCheck check;
  check.param("x", {2, 3, 4}, {-2, 2});
  check.param("g", {3, 4}, Range{0.5, 1.5, true});
  check.param("b", {3, 4});
  check.check(getParam("x", {2, 3, 4}) + getParam("g", {3, 4}) +
                  getParam("b", {3, 4}) + R"(
  %y = cleave.layer_norm %x scale %g bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>)",
              {2, 3, 4});
}

TEST(GradientRules, LayerNormWithoutScaleOrBias) {
  GradCheck check;
  check.param("x", {3, 5}, {-2, 2});
  check.check(getParam("x", {3, 5}) + R"(
  %y = cleave.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<3x5xf64>) -> tensor<3x5xf64>)",
              {3, 5});
}

/// A scale without a bias (a bias needs a scale: the verifier says so).
TEST(GradientRules, LayerNormScaleOnly) {
  GradCheck check;
  check.param("x", {3, 5}, {-2, 2});
  check.param("g", {5}, Range{0.5, 1.5, true});
  check.check(getParam("x", {3, 5}) + getParam("g", {5}) + R"(
  %y = cleave.layer_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<3x5xf64>, tensor<5xf64>) -> tensor<3x5xf64>)",
              {3, 5});
}

TEST(GradientRules, RmsNorm) {
  GradCheck check;
  check.param("x", {2, 3, 4}, {-2, 2});
  check.param("g", {4}, Range{0.5, 1.5, true});
  check.check(getParam("x", {2, 3, 4}) + getParam("g", {4}) + R"(
  %y = cleave.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>)",
              {2, 3, 4});
}

TEST(GradientRules, RmsNormOverTwoAxes) {
  GradCheck check;
  check.param("x", {2, 3, 4}, {-2, 2});
  check.param("g", {3, 4}, Range{0.5, 1.5, true});
  check.check(getParam("x", {2, 3, 4}) + getParam("g", {3, 4}) + R"(
  %y = cleave.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>)",
              {2, 3, 4});
}

//===----------------------------------------------------------------------===//
// Rotary embedding and attention
//===----------------------------------------------------------------------===//

/// x, cos and sin all parameters; the tables are arbitrary, not the
/// halves-repeated tables of Llama, so every term of the rule shows.
TEST(GradientRules, Rotary) {
  for (Shape x : {Shape{3, 4}, Shape{2, 3, 4}, Shape{1, 2, 3, 4}}) {
    SCOPED_TRACE("x " + tensorType(x, "f64"));
    GradCheck check;
    check.param("x", x);
    check.param("c", {3, 4});
    check.param("s", {3, 4});
    std::string type = tensorType(x, "f64");
    check.check(getParam("x", x) + getParam("c", {3, 4}) +
                    getParam("s", {3, 4}) +
                    "  %y = cleave.rotary %x, %c, %s : (" + type +
                    ", tensor<3x4xf64>, tensor<3x4xf64>) -> " + type,
                x);
  }
}

/// Tables as Llama builds them (each half repeats the frequencies), with
/// only x a parameter: the common case.
TEST(GradientRules, RotaryLlamaTables) {
  GradCheck check;
  Shape x{1, 2, 3, 4};
  check.param("x", x);
  std::vector<double> cos, sin;
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 4; ++i) {
      double angle = t * std::pow(10000.0, -double(i % 2) / 2);
      cos.push_back(std::cos(angle));
      sin.push_back(std::sin(angle));
    }
  check.check(getParam("x", x) + "  %c = cleave.constant " +
                  denseLiteral({3, 4}, cos, "f64") +
                  "\n  %s = cleave.constant " +
                  denseLiteral({3, 4}, sin, "f64") +
                  "\n  %y = cleave.rotary %x, %c, %s : (tensor<1x2x3x4xf64>, "
                  "tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<1x2x3x4xf64>",
              x);
}

struct AttentionCase {
  const char *name;
  Shape q, kv;
  bool causal;
  const char *mask; // a constant's literal and type, or ""
};

class Attention : public testing::TestWithParam<AttentionCase> {};

TEST_P(Attention, MatchesFiniteDifferences) {
  const AttentionCase &c = GetParam();
  GradCheck check;
  check.param("q", c.q);
  check.param("k", c.kv);
  check.param("v", c.kv);
  std::string body =
      getParam("q", c.q) + getParam("k", c.kv) + getParam("v", c.kv);
  std::string operands = "%q, %k, %v";
  std::string types = tensorType(c.q, "f64") + ", " + tensorType(c.kv, "f64") +
                      ", " + tensorType(c.kv, "f64");
  if (*c.mask) {
    std::string mask = c.mask;
    body += "  %m = cleave.constant " + mask + "\n";
    operands += " mask %m";
    types += ", " + mask.substr(mask.rfind(": ") + 2);
  }
  body += "  %y = cleave.attention " + operands + " {" +
          (c.causal ? "causal, " : "") + "scale = 0.5 : f32} : (" + types +
          ") -> " + tensorType(c.q, "f64");
  check.check(body, c.q);
}

INSTANTIATE_TEST_SUITE_P(
    GradientRules, Attention,
    testing::Values(
        AttentionCase{"causal", {1, 2, 3, 4}, {1, 2, 3, 4}, true, ""},
        // Four keys for three queries.
        AttentionCase{"non_causal", {2, 1, 3, 4}, {2, 1, 4, 4}, false, ""},
        // Four query heads share two key/value heads.
        AttentionCase{"grouped_query", {1, 4, 3, 2}, {1, 2, 3, 2}, true, ""},
        // Every row keeps at least one key.
        AttentionCase{"bool_mask",
                      {1, 2, 3, 4},
                      {1, 2, 3, 4},
                      false,
                      "dense<[[[[true, false, true], [false, true, false], "
                      "[true, true, false]]]]> : tensor<1x1x3x3xi1>"},
        AttentionCase{"additive_mask",
                      {1, 2, 3, 4},
                      {1, 2, 3, 4},
                      false,
                      "dense<[[0.0, -1.5, 0.5], [-3.0, 0.0, 1.0], "
                      "[0.25, 0.0, -0.5]]> : tensor<3x3xf64>"},
        AttentionCase{"causal_grouped_query_mask",
                      {1, 2, 3, 2},
                      {1, 1, 3, 2},
                      true,
                      "dense<[true, false, true]> : tensor<3xi1>"}),
    [](const testing::TestParamInfo<AttentionCase> &info) {
      return std::string(info.param.name);
    });

//===----------------------------------------------------------------------===//
// Lookups and losses
//===----------------------------------------------------------------------===//

TEST(GradientRules, EmbeddingRepeatedIds) {
  GradCheck check;
  check.param("w", {5, 3});
  // Rows 0 and 2 are read several times, rows 1 and 3 never.
  check.check(getParam("w", {5, 3}) + R"(
  %ids = cleave.constant dense<[[0, 2, 2], [4, 0, 2]]> : tensor<2x3xi64>
  %y = cleave.embedding %w, %ids : (tensor<5x3xf64>, tensor<2x3xi64>) -> tensor<2x3x3xf64>)",
              {2, 3, 3});
}

TEST(GradientRules, EmbeddingI32Ids) {
  GradCheck check;
  check.param("w", {4, 2});
  check.check(getParam("w", {4, 2}) + R"(
  %ids = cleave.constant dense<[3, 1, 3]> : tensor<3xi32>
  %y = cleave.embedding %w, %ids : (tensor<4x2xf64>, tensor<3xi32>) -> tensor<3x2xf64>)",
              {3, 2});
}

/// nn.Embedding's padding_idx, with a tied head as Gemma's: the padding
/// row gets the head's gradient and nothing from the lookup. The reference
/// reads the table through two parameters, @e for the lookup (no padding)
/// and @w for the head, both checked against finite differences; the
/// padded model's gradient is then @w's plus @e's with the padding row left
/// out. The same seed gives both the same values and loss weights.
TEST(GradientRules, EmbeddingPaddingRowGetsOnlyTheHeadsGradient) {
  auto body = [](const char *table, const char *attr) {
    return std::string(R"(
  %ids = cleave.constant dense<[2, 0, 2, 4, 2, 1]> : tensor<6xi64>
  %x = cleave.embedding %)") +
           table + ", %ids " + attr + R"( : (tensor<5x3xf64>, tensor<6xi64>) -> tensor<6x3xf64>
  %logits = cleave.matmul %x, %w {transpose_rhs} : (tensor<6x3xf64>, tensor<5x3xf64>) -> tensor<6x5xf64>
  %t = cleave.constant dense<[1, 0, 4, 3, 2, 2]> : tensor<6xi64>
  %y = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>} : (tensor<6x5xf64>, tensor<6xi64>) -> tensor<f64>)";
  };
  GradCheck split;
  std::vector<double> values = split.random(15);
  split.paramValues("w", {5, 3}, values);
  split.paramValues("e", {5, 3}, values);
  split.check(getParam("w", {5, 3}) + getParam("e", {5, 3}) + body("e", ""),
              {});
  GradCheck padded;
  ASSERT_EQ(padded.random(15), values);
  padded.paramValues("w", {5, 3}, values);
  // Not a derivative of the forward: compared with the split model.
  padded.skipFiniteDifferences("w");
  ASSERT_TRUE(padded.compileAndRunStep(
      getParam("w", {5, 3}) + body("w", "{padding_idx = 2 : i64}"), {}));
  ASSERT_EQ(padded.weights(), split.weights());
  const std::vector<double> &head = split.gradient("w");
  const std::vector<double> &lookup = split.gradient("e");
  const std::vector<double> &got = padded.gradient("w");
  ASSERT_EQ(got.size(), 15u);
  bool lookupReachesRow2 = false;
  for (int i = 0; i < 15; ++i) {
    bool paddingRow = i / 3 == 2;
    lookupReachesRow2 |= paddingRow && lookup[i] != 0;
    double expected = head[i] + (paddingRow ? 0.0 : lookup[i]);
    EXPECT_NEAR(got[i], expected, 1e-12) << "d loss / d w[" << i << "]";
  }
  EXPECT_TRUE(lookupReachesRow2) << "the lookup must reach the padding row";
}

TEST(GradientRules, GatherAxis0RepeatedAndNegative) {
  GradCheck check;
  check.param("x", {4, 3});
  // -1 is row 3; row 1 is taken twice.
  check.check(getParam("x", {4, 3}) + R"(
  %i = cleave.constant dense<[1, -1, 1]> : tensor<3xi64>
  %y = cleave.gather %x, %i {axis = 0 : i64} : (tensor<4x3xf64>, tensor<3xi64>) -> tensor<3x3xf64>)",
              {3, 3});
}

TEST(GradientRules, GatherInnerAxis) {
  GradCheck check;
  check.param("x", {2, 4, 3});
  check.check(getParam("x", {2, 4, 3}) + R"(
  %i = cleave.constant dense<[[0, 3], [3, 1]]> : tensor<2x2xi64>
  %y = cleave.gather %x, %i {axis = 1 : i64} : (tensor<2x4x3xf64>, tensor<2x2xi64>) -> tensor<2x2x2x3xf64>)",
              {2, 2, 2, 3});
}

TEST(GradientRules, GatherElementsRepeatedAndNegative) {
  GradCheck check;
  check.param("x", {3, 4});
  check.check(getParam("x", {3, 4}) + R"(
  %i = cleave.constant dense<[[0, 2, -1, 0], [0, 0, 1, 2]]> : tensor<2x4xi64>
  %y = cleave.gather_elements %x, %i {axis = 0 : i64} : (tensor<3x4xf64>, tensor<2x4xi64>) -> tensor<2x4xf64>)",
              {2, 4});
}

TEST(GradientRules, ScatterNdNoneAndAdd) {
  for (const char *reduction : {"none", "add"}) {
    SCOPED_TRACE(reduction);
    GradCheck check;
    check.param("x", {4, 3});
    check.param("u", {2, 3});
    check.check(getParam("x", {4, 3}) + getParam("u", {2, 3}) + R"(
  %i = cleave.constant dense<[[2], [0]]> : tensor<2x1xi64>
  %y = cleave.scatter_nd %x, %i, %u {reduction = ")" +
                    std::string(reduction) + R"("} : (tensor<4x3xf64>, tensor<2x1xi64>, tensor<2x3xf64>) -> tensor<4x3xf64>)",
                {4, 3});
  }
}

TEST(GradientRules, SoftmaxCrossEntropyMeanIgnoreIndex) {
  GradCheck check;
  check.param("x", {4, 5}, {-2, 2});
  check.check(getParam("x", {4, 5}) + R"(
  %t = cleave.constant dense<[1, -100, 4, 1]> : tensor<4xi64>
  %y = cleave.softmax_cross_entropy %x, %t {ignore_index = -100 : i64, reduction = #cleave.reduction<mean>} : (tensor<4x5xf64>, tensor<4xi64>) -> tensor<f64>)",
              {});
}

TEST(GradientRules, SoftmaxCrossEntropySumWithExtraDims) {
  GradCheck check;
  check.param("x", {2, 4, 3}, {-2, 2});
  check.check(getParam("x", {2, 4, 3}) + R"(
  %t = cleave.constant dense<[[0, 3, 3], [2, 1, 0]]> : tensor<2x3xi64>
  %y = cleave.softmax_cross_entropy %x, %t {reduction = #cleave.reduction<sum>} : (tensor<2x4x3xf64>, tensor<2x3xi64>) -> tensor<f64>)",
              {});
}

TEST(GradientRules, SoftmaxCrossEntropyNone) {
  GradCheck check;
  check.param("x", {4, 5}, {-2, 2});
  check.check(getParam("x", {4, 5}) + R"(
  %t = cleave.constant dense<[1, 2, 4, 2]> : tensor<4xi32>
  %y = cleave.softmax_cross_entropy %x, %t {ignore_index = 2 : i64, reduction = #cleave.reduction<none>} : (tensor<4x5xf64>, tensor<4xi32>) -> tensor<4xf64>)",
              {4});
}

TEST(GradientRules, NllLossMeanIgnoreIndex) {
  GradCheck check;
  check.param("x", {4, 5}, {-3, 0});
  check.check(getParam("x", {4, 5}) + R"(
  %t = cleave.constant dense<[0, 3, 2, 3]> : tensor<4xi64>
  %y = cleave.nll_loss %x, %t {ignore_index = 3 : i64, reduction = #cleave.reduction<mean>} : (tensor<4x5xf64>, tensor<4xi64>) -> tensor<f64>)",
              {});
}

TEST(GradientRules, NllLossSumAndNone) {
  for (const char *reduction : {"sum", "none"}) {
    SCOPED_TRACE(reduction);
    GradCheck check;
    check.param("x", {2, 4, 3}, {-3, 0});
    bool none = std::string(reduction) == "none";
    Shape y = none ? Shape{2, 3} : Shape{};
    check.check(getParam("x", {2, 4, 3}) +
                    "  %t = cleave.constant dense<[[0, 3, 3], [2, 1, 0]]> : "
                    "tensor<2x3xi64>\n"
                    "  %y = cleave.nll_loss %x, %t {reduction = "
                    "#cleave.reduction<" +
                    reduction +
                    ">} : (tensor<2x4x3xf64>, tensor<2x3xi64>) -> " +
                    tensorType(y, "f64"),
                y);
  }
}

/// log_softmax into nll_loss: the composition equals cross-entropy.
TEST(GradientRules, LogSoftmaxIntoNllLoss) {
  GradCheck check;
  check.param("x", {3, 4}, {-2, 2});
  check.check(getParam("x", {3, 4}) + R"(
  %l = cleave.log_softmax %x {axis = 1 : i64} : tensor<3x4xf64>
  %t = cleave.constant dense<[3, 0, 1]> : tensor<3xi64>
  %y = cleave.nll_loss %l, %t {reduction = #cleave.reduction<mean>} : (tensor<3x4xf64>, tensor<3xi64>) -> tensor<f64>)",
              {});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(GradientRules, Reshape) {
  GradCheck check;
  check.param("x", {2, 6});
  check.check(getParam("x", {2, 6}) + R"(
  %y = cleave.reshape %x : tensor<2x6xf64> -> tensor<3x2x2xf64>)",
              {3, 2, 2});
}

TEST(GradientRules, Transpose) {
  GradCheck check;
  check.param("x", {2, 3, 4});
  check.check(getParam("x", {2, 3, 4}) + R"(
  %y = cleave.transpose %x {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf64> -> tensor<3x4x2xf64>)",
              {3, 4, 2});
}

TEST(GradientRules, BroadcastTo) {
  for (Shape from : {Shape{1, 4}, Shape{4}, Shape{3, 1}, Shape{}}) {
    SCOPED_TRACE("from " + tensorType(from, "f64"));
    GradCheck check;
    check.param("x", from);
    check.check(getParam("x", from) + "  %y = cleave.broadcast_to %x : " +
                    tensorType(from, "f64") + " -> tensor<2x3x4xf64>",
                {2, 3, 4});
  }
}

TEST(GradientRules, SliceStepOne) {
  GradCheck check;
  check.param("x", {4, 6});
  check.check(getParam("x", {4, 6}) + R"(
  %y = cleave.slice %x {start = array<i64: 1, 0>, limit = array<i64: 3, 5>, step = array<i64: 1, 1>} : tensor<4x6xf64> -> tensor<2x5xf64>)",
              {2, 5});
}

TEST(GradientRules, SliceStepTwo) {
  GradCheck check;
  check.param("x", {5, 6});
  check.check(getParam("x", {5, 6}) + R"(
  %y = cleave.slice %x {start = array<i64: 0, 1>, limit = array<i64: 5, 6>, step = array<i64: 2, 2>} : tensor<5x6xf64> -> tensor<3x3xf64>)",
              {3, 3});
}

/// A negative step (ONNX Slice with steps < 0, normalized by the frontend).
TEST(GradientRules, SliceNegativeStep) {
  GradCheck check;
  check.param("x", {2, 5});
  check.check(getParam("x", {2, 5}) + R"(
  %y = cleave.slice %x {start = array<i64: 0, 4>, limit = array<i64: 2, -1>, step = array<i64: 1, -2>} : tensor<2x5xf64> -> tensor<2x3xf64>)",
              {2, 3});
}

TEST(GradientRules, Concat) {
  GradCheck check;
  check.param("a", {2, 3});
  check.param("b", {2, 2});
  // A constant between them gets no gradient but shifts b's.
  check.check(getParam("a", {2, 3}) + getParam("b", {2, 2}) + R"(
  %c = cleave.constant dense<[[1.0], [2.0]]> : tensor<2x1xf64>
  %y = cleave.concat %a, %c, %b {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x1xf64>, tensor<2x2xf64>) -> tensor<2x6xf64>)",
              {2, 6});
}

TEST(GradientRules, ConcatAxis0SameValueTwice) {
  GradCheck check;
  check.param("a", {1, 3});
  check.check(getParam("a", {1, 3}) + R"(
  %y = cleave.concat %a, %a {axis = 0 : i64} : (tensor<1x3xf64>, tensor<1x3xf64>) -> tensor<2x3xf64>)",
              {2, 3});
}

//===----------------------------------------------------------------------===//
// What autodiff does around the rules
//===----------------------------------------------------------------------===//

/// A parameter read twice (GPT-2's tied embedding and head) accumulates
/// the gradients of both reads.
TEST(GradientRules, TiedParameterAccumulatesBothUses) {
  GradCheck check;
  check.param("w", {5, 3});
  check.check(getParam("w", {5, 3}) + R"(
  %ids = cleave.constant dense<[0, 3, 3, 1]> : tensor<4xi64>
  %e = cleave.embedding %w, %ids : (tensor<5x3xf64>, tensor<4xi64>) -> tensor<4x3xf64>
  %head = cleave.get_param @w : tensor<5x3xf64>
  %logits = cleave.matmul %e, %head {transpose_rhs} : (tensor<4x3xf64>, tensor<5x3xf64>) -> tensor<4x5xf64>
  %t = cleave.constant dense<[1, 0, 4, 3]> : tensor<4xi64>
  %y = cleave.softmax_cross_entropy %logits, %t {reduction = #cleave.reduction<mean>} : (tensor<4x5xf64>, tensor<4xi64>) -> tensor<f64>)",
              {});
}

/// One value used by two ops, and by one op twice: the gradients add up.
TEST(GradientRules, ValueUsedTwiceSumsGradients) {
  GradCheck check;
  check.param("x", {2, 3});
  check.check(getParam("x", {2, 3}) + R"(
  %sq = cleave.mul %x, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %s = cleave.sin %x : tensor<2x3xf64>
  %y = cleave.add %sq, %s : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>)",
              {2, 3});
}

/// A small two-layer network: the rules composed.
TEST(GradientRules, MlpWithLayerNormAndCrossEntropy) {
  GradCheck check;
  check.param("w1", {4, 6}, Range{-0.7, 0.7});
  check.param("b1", {6});
  check.param("g", {6}, Range{0.5, 1.5, true});
  check.param("w2", {5, 6}, Range{-0.7, 0.7});
  check.check(getParam("w1", {4, 6}) + getParam("b1", {6}) +
                  getParam("g", {6}) + getParam("w2", {5, 6}) + R"(
  %x = cleave.constant dense<[[[0.5, -1.0, 2.0, 0.0], [1.5, 0.25, -0.5, 1.0], [-2.0, 0.5, 0.5, -1.0]]]> : tensor<1x3x4xf64>
  %h = cleave.matmul %x, %w1 : (tensor<1x3x4xf64>, tensor<4x6xf64>) -> tensor<1x3x6xf64>
  %hb = cleave.add %h, %b1 : (tensor<1x3x6xf64>, tensor<6xf64>) -> tensor<1x3x6xf64>
  %a = cleave.gelu %hb {approximate = "tanh"} : tensor<1x3x6xf64>
  %n = cleave.rms_norm %a, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x3x6xf64>, tensor<6xf64>) -> tensor<1x3x6xf64>
  %logits = cleave.matmul %n, %w2 {transpose_rhs} : (tensor<1x3x6xf64>, tensor<5x6xf64>) -> tensor<1x3x5xf64>
  %flat = cleave.reshape %logits : tensor<1x3x5xf64> -> tensor<3x5xf64>
  %t = cleave.constant dense<[4, 0, 2]> : tensor<3xi64>
  %y = cleave.softmax_cross_entropy %flat, %t {reduction = #cleave.reduction<mean>} : (tensor<3x5xf64>, tensor<3xi64>) -> tensor<f64>)",
              {});
}

/// An op without a rule on the way from a parameter to the loss is an
/// error that names it. The *_grad ops and sum_squares are the float ops
/// without a rule (they only appear in backward and optimizer functions).
TEST(GradientRules, OpWithoutRuleIsAnErrorNamingIt) {
  GradCheck check;
  std::string error = check.compile(R"(
cleave.parameter @p : tensor<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
func.func @forward() -> tensor<f32> {
  %p = cleave.get_param @p : tensor<4xf32>
  %l = cleave.sum_squares %p : (tensor<4xf32>) -> tensor<f32> loc("/l2/penalty")
  return %l : tensor<f32>
})");
  EXPECT_NE(error.find("/l2/penalty"), std::string::npos) << error;
  EXPECT_NE(error.find("'cleave.sum_squares' op has no gradient rule"),
            std::string::npos)
      << error;

  GradCheck grad;
  error = grad.compile(R"(
cleave.parameter @p : tensor<4xf64> = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf64>
func.func @forward() -> tensor<f64> {
  %p = cleave.get_param @p : tensor<4xf64>
  %d = cleave.silu_grad %p, %p : tensor<4xf64>
  %l = cleave.reduce_sum %d {axes = array<i64: 0>, keepdims = false} : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
})");
  EXPECT_NE(error.find("'cleave.silu_grad' op has no gradient rule"),
            std::string::npos)
      << error;
}

/// A parameter that reaches the loss only through an integer cast has no
/// gradient (the truncation's derivative is zero almost everywhere):
/// autodiff gives it none, and the step still runs.
TEST(GradientRules, IntegerCastCutsTheGradient) {
  GradCheck check;
  check.param("p", {4}, Range{0.5, 3.5, false});
  check.param("q", {4});
  check.expectNoGradient("p");
  // q's gradient is still checked: f * r.
  check.check(getParam("p", {4}) + getParam("q", {4}) + R"(
  %i = cleave.cast %p : tensor<4xf64> -> tensor<4xi64>
  %f = cleave.cast %i : tensor<4xi64> -> tensor<4xf64>
  %y = cleave.mul %f, %q : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>)",
              {4});
  EXPECT_FALSE(check.hasGradient("p"));
}

} // namespace
