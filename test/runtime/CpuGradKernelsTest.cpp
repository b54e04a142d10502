//===- CpuGradKernelsTest.cpp - CPU kernels of the gradient ops -----------===//
//
// Every *_grad kernel against central differences of its forward kernel:
// with loss = sum(forward(x) * r) for a random r, the gradient kernel given
// dy = r must give d loss / dx. The differences are taken on the f64
// forward kernel (so they are accurate to about 1e-8); the gradient
// kernels are checked in f32 (tolerance 2e-3), f64 (1e-6) and, for a few,
// f16/bf16. Also matmul's transposed operands against explicit transposes.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <algorithm>
#include <limits>

#include <omp.h>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::string shapeString(const Shape &s) { return ops::shapeString(s); }

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

/// `b` converted to element type `t` (values read as double).
Buf convert(const Buf &b, DType t) {
  Buf c = make(t, b.shape);
  for (int64_t i = 0; i < b.size(); ++i)
    c.set(i, b.at(i));
  return c;
}

/// The tolerance (relative and absolute) of a gradient kernel of type `t`
/// against the differences.
double gradTol(DType t) {
  switch (t) {
  case DType::F64:
    return 1e-6;
  case DType::F16:
    return 2e-2;
  case DType::BF16:
    return 8e-2;
  default:
    return 2e-3;
  }
}

/// Runs a kernel with several results.
Status runMulti(const std::string &op, const Attributes &attrs,
                const std::vector<const Buf *> &inputs,
                const std::vector<Buf *> &outputs) {
  std::vector<TensorRef> ins, outs;
  for (const Buf *b : inputs)
    ins.push_back(b == &absent() ? TensorRef() : b->ref());
  for (Buf *b : outputs)
    outs.push_back(b->ref());
  return runCpuKernel(op, attrs, ins, outs);
}

/// Compares `grad` with the central differences of
/// loss = sum(op(inputs) * r) in input `which`. The forward op runs in f64
/// (float inputs widened; ids, targets and masks as they are).
void expectGradient(const Buf &grad, const std::string &op,
                    const Attributes &attrs,
                    const std::vector<const Buf *> &inputs, size_t which,
                    const Buf &r, const char *what) {
  SCOPED_TRACE(op + " d/d operand " + std::to_string(which) + " (" + what +
               ")");
  std::vector<Buf> wide(inputs.size());
  std::vector<const Buf *> ins(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == &absent()) {
      ins[i] = &absent();
      continue;
    }
    bool mask = op == "attention" && i == 3;
    wide[i] = isFloat(inputs[i]->dtype) && !mask
                  ? convert(*inputs[i], DType::F64)
                  : *inputs[i];
    ins[i] = &wide[i];
  }
  Buf &x = wide[which];
  Buf out = make(DType::F64, r.shape);
  const double eps = 1e-4;
  auto loss = [&](double &value) {
    RUN_OK(op, attrs, ins, out);
    value = 0;
    for (int64_t i = 0; i < out.size(); ++i)
      value += out.at(i) * r.at(i);
  };
  ASSERT_EQ(grad.shape, x.shape);
  std::vector<double> numeric(x.size());
  double largest = 1;
  for (int64_t e = 0; e < x.size(); ++e) {
    double saved = x.at(e), plus, minus;
    x.set(e, saved + eps);
    loss(plus);
    x.set(e, saved - eps);
    loss(minus);
    x.set(e, saved);
    numeric[e] = (plus - minus) / (2 * eps);
    largest = std::max(largest, std::fabs(numeric[e]));
  }
  double tol = gradTol(grad.dtype);
  expectAll(grad, numeric, tol, tol * largest);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

void checkActivation(const std::string &forward, const Attributes &attrs,
                     DType t) {
  SCOPED_TRACE(forward + " " + dtypeName(t));
  Buf x = random(t, {4, 37}, -4, 4, 1), r = random(t, {4, 37}, -1, 1, 2);
  Buf dx = make(t, x.shape);
  RUN_OK(forward + "_grad", attrs, {&x, &r}, dx);
  expectGradient(dx, forward, attrs, {&x}, 0, r, "x");
}

TEST(CpuGradKernels, Activations) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    checkActivation("gelu", {}, t);
    checkActivation("gelu", {{"approximate", stringA("none")}}, t);
    checkActivation("gelu", {{"approximate", stringA("tanh")}}, t);
    checkActivation("silu", {}, t);
  }
  // Large inputs: no NaN from exp overflowing.
  Buf x = make(DType::F32, {4}, {-200, -90, 90, 200});
  Buf dy = make(DType::F32, {4}, {1, 1, 1, 1}), dx = make(DType::F32, {4});
  RUN_OK("silu_grad", {}, {&x, &dy}, dx);
  expectAll(dx, {0, 0, 1, 1}, 1e-6, 1e-6);
  RUN_OK("gelu_grad", {{"approximate", stringA("tanh")}}, {&x, &dy}, dx);
  expectAll(dx, {0, 0, 1, 1}, 1e-6, 1e-6);
  RUN_ERROR("gelu_grad: approximate must be \"none\" or \"tanh\", got \"erf\"",
            "gelu_grad", {{"approximate", stringA("erf")}}, {&x, &dy}, dx);
  Buf shorter = make(DType::F32, {3});
  RUN_ERROR("silu_grad: dy", "silu_grad", {}, {&x, &shorter}, dx);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

void checkSoftmax(const std::string &forward, Shape shape, int64_t axis,
                  DType t) {
  SCOPED_TRACE(forward + " " + shapeString(shape) + " axis " +
               std::to_string(axis) + " " + dtypeName(t));
  Attributes attrs{{"axis", intA(axis)}};
  Buf x = random(t, shape, -3, 3, 3), r = random(t, shape, -1, 1, 4);
  Buf y = make(t, shape), dx = make(t, shape);
  RUN_OK(forward, attrs, {&x}, y);
  RUN_OK(forward + "_grad", attrs, {&y, &r}, dx);
  expectGradient(dx, forward, attrs, {&x}, 0, r, "x");
}

TEST(CpuGradKernels, Softmax) {
  for (const char *op : {"softmax", "log_softmax"})
    for (DType t : {DType::F32, DType::F64}) {
      checkSoftmax(op, {3, 5, 6}, 2, t);
      checkSoftmax(op, {3, 5, 6}, 1, t); // not the last axis
      checkSoftmax(op, {3, 5, 6}, 0, t);
      checkSoftmax(op, {2, 40}, -1, t);
    }
  checkSoftmax("softmax", {3, 9}, 1, DType::BF16);
  checkSoftmax("log_softmax", {3, 4, 5}, 1, DType::F16);
}

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

void checkLayerNorm(Shape shape, int64_t axis, bool withScale, DType t) {
  SCOPED_TRACE(shapeString(shape) + " axis " + std::to_string(axis) +
               (withScale ? " scale " : " no scale ") + dtypeName(t));
  Attributes attrs{{"axis", intA(axis)}, {"epsilon", floatA(1e-5)}};
  int64_t a = axis < 0 ? axis + int64_t(shape.size()) : axis;
  Shape normalized(shape.begin() + a, shape.end());
  Buf x = random(t, shape, -2, 2, 5), r = random(t, shape, -1, 1, 6);
  Buf scale = random(t, normalized, 0.5, 1.5, 7);
  Buf bias = random(t, normalized, -1, 1, 8);
  Buf dx = make(t, shape), dscale = make(t, normalized),
      dbias = make(t, normalized);
  if (withScale) {
    ASSERT_TRUE(runMulti("layer_norm_grad", attrs, {&r, &x, &scale},
                         {&dx, &dscale, &dbias})
                    .isOk());
    expectGradient(dx, "layer_norm", attrs, {&x, &scale, &bias}, 0, r, "dx");
  } else {
    // Without scale: two operands, or an absent third.
    ASSERT_TRUE(
        runMulti("layer_norm_grad", attrs, {&r, &x}, {&dx, &dscale, &dbias})
            .isOk());
    Buf dx2 = make(t, shape);
    ASSERT_TRUE(runMulti("layer_norm_grad", attrs, {&r, &x, &absent()},
                         {&dx2, &dscale, &dbias})
                    .isOk());
    EXPECT_EQ(values(dx), values(dx2));
    expectGradient(dx, "layer_norm", attrs, {&x}, 0, r, "dx");
    for (int64_t i = 0; i < scale.size(); ++i)
      scale.set(i, 1);
  }
  expectGradient(dscale, "layer_norm", attrs, {&x, &scale, &bias}, 1, r,
                 "dscale");
  expectGradient(dbias, "layer_norm", attrs, {&x, &absent(), &bias}, 2, r,
                 "dbias");
}

TEST(CpuGradKernels, LayerNorm) {
  for (DType t : {DType::F32, DType::F64}) {
    checkLayerNorm({6, 20}, -1, true, t);
    checkLayerNorm({6, 20}, -1, false, t);
    checkLayerNorm({3, 4, 5}, 1, true, t); // normalized over [4, 5]
    checkLayerNorm({3, 4, 5}, 1, false, t);
  }
  checkLayerNorm({4, 16}, 1, true, DType::F16);
  // Many rows: the per-thread partial sums of dscale and dbias.
  checkLayerNorm({700, 3}, 1, true, DType::F32);
}

void checkRmsNorm(Shape shape, int64_t axis, DType t) {
  SCOPED_TRACE(shapeString(shape) + " axis " + std::to_string(axis) + " " +
               dtypeName(t));
  Attributes attrs{{"axis", intA(axis)}, {"epsilon", floatA(1e-5)}};
  Shape normalized(shape.begin() + axis, shape.end());
  Buf x = random(t, shape, -2, 2, 9), r = random(t, shape, -1, 1, 10);
  Buf scale = random(t, normalized, 0.5, 1.5, 11);
  Buf dx = make(t, shape), dscale = make(t, normalized);
  ASSERT_TRUE(runMulti("rms_norm_grad", attrs, {&r, &x, &scale}, {&dx, &dscale})
                  .isOk());
  expectGradient(dx, "rms_norm", attrs, {&x, &scale}, 0, r, "dx");
  expectGradient(dscale, "rms_norm", attrs, {&x, &scale}, 1, r, "dscale");
}

TEST(CpuGradKernels, RmsNorm) {
  for (DType t : {DType::F32, DType::F64}) {
    checkRmsNorm({5, 24}, 1, t);
    checkRmsNorm({2, 3, 8}, 1, t);
  }
  checkRmsNorm({900, 4}, 1, DType::F32);
}

TEST(CpuGradKernels, NormErrors) {
  Buf x = make(DType::F32, {2, 4}), s = make(DType::F32, {4});
  Buf dx = make(DType::F32, {2, 4}), ds = make(DType::F32, {4}),
      db = make(DType::F32, {3});
  Attributes attrs{{"axis", intA(1)}, {"epsilon", floatA(1e-5)}};
  Status st = runMulti("layer_norm_grad", attrs, {&x, &x, &s}, {&dx, &ds, &db});
  EXPECT_NE(st.message().find("dbias"), std::string::npos) << st.message();
  st = runMulti("layer_norm_grad", attrs, {&x, &x, &s}, {&dx, &ds});
  EXPECT_EQ(st.message(), "layer_norm_grad: got 2 results, expected 3");
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

struct AttentionCase {
  const char *name;
  int64_t b, h, hkv, tq, tk, d, dv;
  bool causal;
  int mask; // 0 none, 1 bool [1, 1, Tq, Tk], 2 additive float [B, 1, 1, Tk]
};

void checkAttentionGrad(const AttentionCase &c, DType t) {
  SCOPED_TRACE(std::string(c.name) + " " + dtypeName(t));
  Buf q = random(t, {c.b, c.h, c.tq, c.d}, -1, 1, 20);
  Buf k = random(t, {c.b, c.hkv, c.tk, c.d}, -1, 1, 21);
  Buf v = random(t, {c.b, c.hkv, c.tk, c.dv}, -1, 1, 22);
  Buf r = random(t, {c.b, c.h, c.tq, c.dv}, -1, 1, 23);
  Buf mask;
  if (c.mask == 1) {
    mask = random(DType::Bool, {1, 1, c.tq, c.tk}, 0, 2, 24);
    for (int64_t i = 0; i < c.tq; ++i)
      mask.set(i * c.tk, 1); // keep one key per row
  } else if (c.mask == 2) {
    mask = random(DType::F32, {c.b, 1, 1, c.tk}, -3, 0, 25);
    mask.set(c.tk - 1, -kInf); // a key removed by -inf
  }
  Attributes attrs{{"scale", floatA(0.35)}};
  if (c.causal)
    attrs["causal"] = intA(1);
  Buf dq = make(t, q.shape), dk = make(t, k.shape), dv = make(t, v.shape);
  std::vector<const Buf *> gradIns{&r, &q, &k, &v};
  std::vector<const Buf *> ins{&q, &k, &v};
  if (c.mask) {
    gradIns.push_back(&mask);
    ins.push_back(&mask);
  }
  Status s = runMulti("attention_grad", attrs, gradIns, {&dq, &dk, &dv});
  ASSERT_TRUE(s.isOk()) << s.message();
  expectGradient(dq, "attention", attrs, ins, 0, r, "dq");
  expectGradient(dk, "attention", attrs, ins, 1, r, "dk");
  expectGradient(dv, "attention", attrs, ins, 2, r, "dv");
}

TEST(CpuGradKernels, Attention) {
  std::vector<AttentionCase> cases = {
      {"mha", 2, 2, 2, 5, 5, 8, 8, false, 0},
      {"causal", 1, 2, 2, 7, 7, 8, 8, true, 0},
      {"gqa causal", 1, 4, 2, 6, 6, 4, 4, true, 0},
      {"gqa", 2, 4, 2, 3, 5, 4, 4, false, 0},
      {"bool mask", 1, 2, 1, 6, 6, 4, 4, false, 1},
      {"causal and bool mask", 1, 2, 2, 6, 6, 4, 4, true, 1},
      {"additive mask", 2, 2, 2, 4, 6, 4, 4, false, 2},
      {"cross", 1, 2, 2, 5, 9, 8, 6, false, 0},
      {"cross causal", 1, 1, 1, 6, 4, 4, 4, true, 0},
      {"blocks", 1, 2, 1, 70, 70, 3, 3, true, 0}, // more than one row block
  };
  for (const auto &c : cases)
    for (DType t : {DType::F32, DType::F64})
      checkAttentionGrad(c, t);
  checkAttentionGrad(cases[2], DType::BF16);
  checkAttentionGrad(cases[6], DType::F16);
}

TEST(CpuGradKernels, AttentionFullyMaskedRowIsNaN) {
  // The forward gives NaN for a row with every key masked; so does dq.
  Buf q = random(DType::F32, {1, 1, 2, 4}),
      k = random(DType::F32, {1, 1, 3, 4});
  Buf v = random(DType::F32, {1, 1, 3, 4}),
      dy = random(DType::F32, {1, 1, 2, 4});
  Buf mask = make(DType::Bool, {2, 3}, {1, 1, 0, 0, 0, 0});
  Buf dq = make(DType::F32, q.shape), dk = make(DType::F32, k.shape),
      dv = make(DType::F32, v.shape);
  ASSERT_TRUE(runMulti("attention_grad", {{"scale", floatA(0.5)}},
                       {&dy, &q, &k, &v, &mask}, {&dq, &dk, &dv})
                  .isOk());
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(std::isnan(dq.at(i)));
    EXPECT_TRUE(std::isnan(dq.at(4 + i)));
  }
}

TEST(CpuGradKernels, AttentionErrors) {
  Buf q = make(DType::F32, {1, 3, 2, 4}), k = make(DType::F32, {1, 2, 2, 4});
  Buf dq = make(DType::F32, q.shape), dk = make(DType::F32, k.shape),
      dv = make(DType::F32, k.shape);
  Status s = runMulti("attention_grad", {}, {&q, &q, &k, &k}, {&dq, &dk, &dv});
  EXPECT_EQ(s.message(), "attention_grad: q has 3 heads, which is not a "
                         "multiple of the 2 key/value heads");
  Buf q2 = make(DType::F32, {1, 2, 2, 4}), dq2 = make(DType::F32, q2.shape);
  Buf badDv = make(DType::F32, {1, 2, 3, 4});
  s = runMulti("attention_grad", {}, {&q2, &q2, &k, &k}, {&dq2, &dk, &badDv});
  EXPECT_NE(s.message().find("dv"), std::string::npos) << s.message();
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

TEST(CpuGradKernels, Embedding) {
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (DType it : {DType::I64, DType::I32}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + dtypeName(it));
      Buf table = random(t, {7, 5}, -1, 1, 30);
      // Repeated ids, one unused row, a negative id (counts from the end).
      Buf ids = make(it, {2, 6}, {3, 1, 3, 0, 6, 3, 1, 2, -1, 4, 4, 3});
      Buf r = random(t, {2, 6, 5}, -1, 1, 31);
      Buf grad = make(t, {7, 5});
      RUN_OK("embedding_grad", {}, {&r, &ids}, grad);
      expectGradient(grad, "embedding", {}, {&table, &ids}, 0, r, "table");
    }
}

/// nn.Embedding's padding_idx: the padding row's gradient is zero however
/// often (and wherever, negative ids included) it is picked; every other
/// row is what embedding_grad gives without the attribute.
TEST(CpuGradKernels, EmbeddingPaddingRowGetsNoGradient) {
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (int64_t padding : {0, 3, 6}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " padding_idx " +
                   std::to_string(padding));
      // Row 3 three times, row 6 also as -1, row 5 never.
      Buf ids = make(DType::I64, {2, 6}, {3, 1, 3, 0, 6, 3, 1, 2, -1, 4, 4, 0});
      Buf r = random(t, {2, 6, 5}, -1, 1, 34);
      Buf plain = make(t, {7, 5}), padded = make(t, {7, 5});
      RUN_OK("embedding_grad", {}, {&r, &ids}, plain);
      RUN_OK("embedding_grad", {{"padding_idx", intA(padding)}}, {&r, &ids},
             padded);
      for (int64_t row = 0; row < 7; ++row)
        for (int64_t c = 0; c < 5; ++c) {
          double expected = row == padding ? 0.0 : plain.at(row * 5 + c);
          EXPECT_EQ(padded.at(row * 5 + c), expected)
              << "row " << row << " column " << c;
        }
      // The padding row is picked, so the attribute changed something.
      bool nonzero = false;
      for (int64_t c = 0; c < 5; ++c)
        nonzero |= plain.at(padding * 5 + c) != 0.0;
      EXPECT_TRUE(nonzero);
    }
}

TEST(CpuGradKernels, EmbeddingBadPaddingIdx) {
  Buf ids = make(DType::I64, {3}, {1, 2, 0});
  Buf r = random(DType::F32, {3, 4}), grad = make(DType::F32, {7, 4});
  RUN_ERROR("embedding_grad: padding_idx 7 is not a row of the 7-row table",
            "embedding_grad", {{"padding_idx", intA(7)}}, {&r, &ids}, grad);
  RUN_ERROR("embedding_grad: padding_idx -1 is not a row of the 7-row table",
            "embedding_grad", {{"padding_idx", intA(-1)}}, {&r, &ids}, grad);
}

TEST(CpuGradKernels, EmbeddingIsDeterministic) {
  // Many ids on few rows: the sums do not depend on the thread count.
  Buf ids = random(DType::I64, {5000}, 0, 3, 32);
  Buf r = random(DType::F32, {5000, 33}, -1, 1, 33);
  Buf one = make(DType::F32, {3, 33}), many = make(DType::F32, {3, 33});
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  RUN_OK("embedding_grad", {}, {&r, &ids}, one);
  omp_set_num_threads(4);
  RUN_OK("embedding_grad", {}, {&r, &ids}, many);
  omp_set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(one.bytes.data(), many.bytes.data(), 3 * 33 * 4));
}

TEST(CpuGradKernels, EmbeddingBadId) {
  Buf ids = make(DType::I64, {3}, {1, 9, 0});
  Buf r = random(DType::F32, {3, 4}), grad = make(DType::F32, {7, 4});
  RUN_ERROR("embedding_grad: index 9 at position 1 is out of range for a "
            "dimension of size 7",
            "embedding_grad", {}, {&r, &ids}, grad);
  Buf negative = make(DType::I32, {2}, {0, -8});
  Buf r2 = random(DType::F32, {2, 4});
  RUN_ERROR("index -8", "embedding_grad", {}, {&r2, &negative}, grad);
  Buf wrongDy = random(DType::F32, {3, 5});
  RUN_ERROR("embedding_grad: dy", "embedding_grad", {}, {&wrongDy, &ids}, grad);
}

void checkGatherGrad(Shape data, int64_t axis, Buf idx, DType t) {
  SCOPED_TRACE(shapeString(data) + " axis " + std::to_string(axis) + " " +
               dtypeName(t));
  Attributes attrs{{"axis", intA(axis)}};
  int64_t a = axis < 0 ? axis + int64_t(data.size()) : axis;
  Shape outShape(data.begin(), data.begin() + a);
  outShape.insert(outShape.end(), idx.shape.begin(), idx.shape.end());
  outShape.insert(outShape.end(), data.begin() + a + 1, data.end());
  Buf x = random(t, data, -1, 1, 40), r = random(t, outShape, -1, 1, 41);
  Buf grad = make(t, data);
  RUN_OK("gather_grad", attrs, {&r, &idx}, grad);
  expectGradient(grad, "gather", attrs, {&x, &idx}, 0, r, "data");
}

TEST(CpuGradKernels, Gather) {
  for (DType t : {DType::F32, DType::F64}) {
    checkGatherGrad({4, 5, 3}, 0, make(DType::I64, {3}, {2, -1, 2}), t);
    checkGatherGrad({4, 5, 3}, 1, make(DType::I32, {2, 2}, {4, 0, -5, 4}), t);
    checkGatherGrad({4, 5, 3}, -1, make(DType::I64, {4}, {0, 0, -1, 1}), t);
    checkGatherGrad({6}, 0, make(DType::I64, {}, {-2}), t); // scalar index
  }
  Buf idx = make(DType::I64, {1}, {5});
  Buf r = random(DType::F32, {4, 1}), grad = make(DType::F32, {4, 5});
  RUN_ERROR("gather_grad: index 5 at position 0 is out of range", "gather_grad",
            {{"axis", intA(1)}}, {&r, &idx}, grad);
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy, nll_loss
//===----------------------------------------------------------------------===//

void checkLossGrad(const std::string &op, Shape shape,
                   const std::string &reduction, bool ignore, DType t) {
  SCOPED_TRACE(op + " " + shapeString(shape) + " " + reduction +
               (ignore ? " ignore " : " ") + dtypeName(t));
  const int64_t ignoreIndex = -100;
  Shape targetShape{shape[0]};
  targetShape.insert(targetShape.end(), shape.begin() + 2, shape.end());
  Buf x = random(t, shape, -3, 3, 50);
  Buf target = random(DType::I64, targetShape, 0, double(shape[1]), 51);
  Attributes attrs{{"reduction", stringA(reduction)}};
  if (ignore) {
    attrs["ignore_index"] = intA(ignoreIndex);
    target.set(0, ignoreIndex);
    target.set(target.size() - 1, ignoreIndex);
  }
  Buf r = random(t, reduction == "none" ? targetShape : Shape{}, 0.5, 2, 52);
  Buf grad = make(t, shape);
  if (op == "softmax_cross_entropy")
    RUN_OK(op + "_grad", attrs, {&r, &x, &target}, grad);
  else
    RUN_OK(op + "_grad", attrs, {&r, &target}, grad);
  expectGradient(grad, op, attrs, {&x, &target}, 0, r, "input");
}

TEST(CpuGradKernels, Losses) {
  for (const char *op : {"softmax_cross_entropy", "nll_loss"})
    for (DType t : {DType::F32, DType::F64}) {
      checkLossGrad(op, {6, 7}, "mean", true, t);
      checkLossGrad(op, {6, 7}, "mean", false, t);
      checkLossGrad(op, {6, 7}, "sum", false, t);
      checkLossGrad(op, {6, 7}, "none", true, t);
      checkLossGrad(op, {2, 5, 3}, "mean", true, t); // d... = [3]
      checkLossGrad(op, {2, 4, 3, 2}, "none", false, t);
      checkLossGrad(op, {2, 4, 3, 2}, "sum", true, t);
    }
  checkLossGrad("softmax_cross_entropy", {4, 9}, "mean", true, DType::BF16);
}

TEST(CpuGradKernels, LossErrors) {
  Buf x = make(DType::F32, {3, 4}), t = make(DType::I64, {3}, {0, 5, 1});
  Buf dloss = make(DType::F32, {}), grad = make(DType::F32, {3, 4});
  RUN_ERROR("softmax_cross_entropy_grad: target 5 at position 1 is not a "
            "class in [0, 4)",
            "softmax_cross_entropy_grad", {{"reduction", stringA("mean")}},
            {&dloss, &x, &t}, grad);
  Buf t2 = make(DType::I64, {3}, {0, 1, 1});
  RUN_ERROR("nll_loss_grad: dloss", "nll_loss_grad",
            {{"reduction", stringA("none")}}, {&dloss, &t2}, grad);
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy_fused
//===----------------------------------------------------------------------===//

/// The fused kernel's loss and gradient equal, bit for bit, those of
/// softmax_cross_entropy and softmax_cross_entropy_grad: the same formulas
/// in the same order (cleave-fuse-loss-grad must not change training).
void checkLossFused(Shape shape, const std::string &reduction, bool ignore,
                    DType t) {
  SCOPED_TRACE(shapeString(shape) + " " + reduction +
               (ignore ? " ignore " : " ") + dtypeName(t));
  Shape targetShape{shape[0]};
  targetShape.insert(targetShape.end(), shape.begin() + 2, shape.end());
  Shape lossShape = reduction == "none" ? targetShape : Shape{};
  Buf x = random(t, shape, -3, 3, 70);
  Buf target = random(DType::I64, targetShape, 0, double(shape[1]), 71);
  Attributes attrs{{"reduction", stringA(reduction)}};
  if (ignore) {
    attrs["ignore_index"] = intA(-100);
    target.set(0, -100);
    target.set(target.size() - 1, -100);
  }
  Buf dloss = random(t, lossShape, 0.25, 2, 72);
  Buf loss = make(t, lossShape), grad = make(t, shape);
  RUN_OK("softmax_cross_entropy", attrs, {&x, &target}, loss);
  RUN_OK("softmax_cross_entropy_grad", attrs, {&dloss, &x, &target}, grad);
  Buf fusedLoss = random(t, lossShape, 5, 6, 73); // overwritten
  Buf fusedGrad = random(t, shape, 5, 6, 74);
  Status s = runMulti("softmax_cross_entropy_fused", attrs,
                      {&x, &target, &dloss}, {&fusedLoss, &fusedGrad});
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(fusedLoss.bytes, loss.bytes) << "loss " << fusedLoss.at(0)
                                         << " vs " << loss.at(0);
  for (int64_t i = 0; i < grad.size(); ++i)
    ASSERT_EQ(fusedGrad.at(i), grad.at(i)) << "dinput element " << i;
  EXPECT_EQ(fusedGrad.bytes, grad.bytes);
  // In place, as the memory plan runs it: the gradient over the logits.
  Buf inPlace = x;
  s = runMulti("softmax_cross_entropy_fused", attrs, {&inPlace, &target, &dloss},
               {&fusedLoss, &inPlace});
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(fusedLoss.bytes, loss.bytes) << "in place";
  EXPECT_EQ(inPlace.bytes, grad.bytes) << "in place";
}

TEST(CpuGradKernels, LossFused) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    checkLossFused({6, 7}, "mean", true, t);
    checkLossFused({6, 7}, "mean", false, t);
    checkLossFused({6, 7}, "sum", false, t);
    checkLossFused({6, 7}, "none", true, t);
    checkLossFused({2, 5, 3}, "mean", true, t); // d... = [3]
    checkLossFused({2, 4, 3, 2}, "none", false, t);
    checkLossFused({2, 4, 3, 2}, "sum", true, t);
  }
  // Rows long enough for the vector paths, and many of them for threads.
  checkLossFused({33, 1031}, "mean", true, DType::F32);
  checkLossFused({256, 257}, "mean", false, DType::F32);
}

TEST(CpuGradKernels, LossFusedErrors) {
  Attributes mean{{"reduction", stringA("mean")}};
  Buf x = make(DType::F32, {3, 4}), t = make(DType::I64, {3}, {0, 1, 1});
  Buf dloss = make(DType::F32, {}), loss = make(DType::F32, {});
  Buf grad = make(DType::F32, {3, 4});
  auto expectError = [&](const std::string &text, const Attributes &attrs,
                         const std::vector<const Buf *> &inputs,
                         const std::vector<Buf *> &outputs) {
    Status s = runMulti("softmax_cross_entropy_fused", attrs, inputs, outputs);
    ASSERT_FALSE(s.isOk()) << text;
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  Buf bad = make(DType::I64, {3}, {0, 5, 1});
  expectError("softmax_cross_entropy_fused: target 5 at position 1 is not a "
              "class in [0, 4)",
              mean, {&x, &bad, &dloss}, {&loss, &grad});
  Buf dloss3 = make(DType::F32, {3});
  expectError("softmax_cross_entropy_fused: dloss", mean, {&x, &t, &dloss3},
              {&loss, &grad});
  Buf grad16 = make(DType::BF16, {3, 4});
  expectError("softmax_cross_entropy_fused: dinput", mean, {&x, &t, &dloss},
              {&loss, &grad16});
  Buf grad2 = make(DType::F32, {3, 5});
  expectError("softmax_cross_entropy_fused: dinput", mean, {&x, &t, &dloss},
              {&loss, &grad2});
  expectError("softmax_cross_entropy_fused: the result has shape [], "
              "expected [3]",
              {{"reduction", stringA("none")}}, {&x, &t, &dloss3},
              {&loss, &grad});
  expectError("softmax_cross_entropy_fused: got 1 result, expected 2", mean,
              {&x, &t, &dloss}, {&loss});
}

//===----------------------------------------------------------------------===//
// slice_grad
//===----------------------------------------------------------------------===//

void checkSliceGrad(Shape shape, std::vector<int64_t> start,
                    std::vector<int64_t> limit, std::vector<int64_t> step) {
  SCOPED_TRACE(shapeString(shape));
  Attributes attrs{
      {"start", intsA(start)}, {"limit", intsA(limit)}, {"step", intsA(step)}};
  Shape sliced(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t extent = step[d] > 0 ? limit[d] - start[d] : start[d] - limit[d];
    int64_t k = std::abs(step[d]);
    sliced[d] = extent <= 0 ? 0 : (extent + k - 1) / k;
  }
  Buf x = random(DType::F32, shape, -1, 1, 60);
  Buf r = random(DType::F32, sliced, -1, 1, 61);
  Buf grad = random(DType::F32, shape, 5, 6, 62); // overwritten everywhere
  RUN_OK("slice_grad", attrs, {&r}, grad);
  expectGradient(grad, "slice", attrs, {&x}, 0, r, "x");
}

TEST(CpuGradKernels, SliceGrad) {
  checkSliceGrad({5, 6}, {1, 0}, {4, 6}, {1, 2});
  checkSliceGrad({5, 6}, {4, 5}, {-1, 0}, {-2, -1}); // negative steps
  checkSliceGrad({2, 8, 12}, {0, 0, 4}, {2, 8, 8}, {1, 1, 1});
  checkSliceGrad({3, 7, 5}, {2, 1, 4}, {-1, 7, 0}, {-1, 3, -3});
  checkSliceGrad({4, 4}, {0, 0}, {0, 4}, {1, 1}); // empty slice: all zeros
  Buf dy = make(DType::F32, {2, 2}), out = make(DType::F32, {5, 6});
  RUN_ERROR("slice_grad: dy", "slice_grad",
            {{"start", intsA({0, 0})},
             {"limit", intsA({3, 2})},
             {"step", intsA({1, 1})}},
            {&dy}, out);
}

//===----------------------------------------------------------------------===//
// matmul with transposed operands
//===----------------------------------------------------------------------===//

/// `b` with its last two dimensions swapped.
Buf transposed(const Buf &b) {
  Shape s = b.shape;
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  Buf t = make(b.dtype, s);
  int64_t rows = b.shape[b.shape.size() - 2], cols = b.shape.back();
  for (int64_t i = 0; i < b.size(); ++i) {
    int64_t batch = i / (rows * cols), rc = i % (rows * cols);
    t.set(batch * rows * cols + (rc % cols) * rows + rc / cols, b.at(i));
  }
  return t;
}

TEST(CpuGradKernels, MatmulTransposesWithBroadcastBatches) {
  struct Case {
    Shape lhs, rhs, out; // lhs and rhs as stored
    int tl, tr;
  };
  int64_t m = 5, k = 7, n = 3;
  std::vector<Case> cases = {
      {{k, m}, {k, n}, {m, n}, 1, 0},
      {{2, 1, k, m}, {3, n, k}, {2, 3, m, n}, 1, 1},
      {{2, 1, m, k}, {1, 4, n, k}, {2, 4, m, n}, 0, 1},
      {{k, m}, {4, k, n}, {4, m, n}, 1, 0}, // lhs broadcast, transposed
      {{3, k, m}, {n, k}, {3, m, n}, 1, 1},
      {{3, m, k}, {n, k}, {3, m, n}, 0, 1}, // one stacked GEMM
  };
  for (const Case &c : cases)
    for (DType t : {DType::F32, DType::F64, DType::F16}) {
      SCOPED_TRACE(shapeString(c.lhs) + " x " + shapeString(c.rhs) + " " +
                   std::to_string(c.tl) + std::to_string(c.tr) + " " +
                   dtypeName(t));
      Buf l = random(t, c.lhs, -1, 1, 70), r = random(t, c.rhs, -1, 1, 71);
      Buf out = make(t, c.out), want = make(t, c.out);
      RUN_OK("matmul",
             {{"transpose_lhs", intA(c.tl)}, {"transpose_rhs", intA(c.tr)}},
             {&l, &r}, out);
      Buf lp = c.tl ? transposed(l) : l, rp = c.tr ? transposed(r) : r;
      RUN_OK("matmul", {}, {&lp, &rp}, want);
      expectAll(out, values(want), relTol(t) * 4, relTol(t) * 4);
    }
  // The result shape checks read the transposed operands.
  Buf l = make(DType::F32, {2, k, m}), r = make(DType::F32, {n, k});
  Buf wrong = make(DType::F32, {2, k, n});
  RUN_ERROR("matmul: the result", "matmul",
            {{"transpose_lhs", intA(1)}, {"transpose_rhs", intA(1)}}, {&l, &r},
            wrong);
  Buf right = make(DType::F32, {2, m, n});
  RUN_ERROR("do not agree on the contracted dimension (5 vs 7)", "matmul",
            {{"transpose_rhs", intA(1)}}, {&l, &r}, right);
}

} // namespace
