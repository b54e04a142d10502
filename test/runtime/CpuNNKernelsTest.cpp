//===- CpuNNKernelsTest.cpp - CPU kernels: matmul, reductions, norms... ---===//
//
// matmul, reductions, softmax, layer_norm/rms_norm, attention, embedding,
// gather and the losses, each against a naive double-precision reference.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <algorithm>
#include <limits>

#include <omp.h>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

std::vector<double> matmulRef(const Buf &l, const Buf &r, const Shape &out) {
  int64_t m = l.shape[l.shape.size() - 2], k = l.shape.back(),
          n = r.shape.back();
  Shape lb(l.shape.begin(), l.shape.end() - 2),
      rb(r.shape.begin(), r.shape.end() - 2), ob(out.begin(), out.end() - 2);
  int64_t batches = 1;
  for (int64_t d : ob)
    batches *= d;
  std::vector<double> want(batches * m * n);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t bl = broadcastIndex(lb, ob, b), br = broadcastIndex(rb, ob, b);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += l.at((bl * m + i) * k + p) * r.at((br * k + p) * n + j);
        want[(b * m + i) * n + j] = s;
      }
  }
  return want;
}

void checkMatmul(Shape ls, Shape rs, Shape os, DType t = DType::F32) {
  SCOPED_TRACE(ops::shapeString(ls) + " x " + ops::shapeString(rs) + " " +
               dtypeName(t));
  Buf l = random(t, ls, -1, 1, 1), r = random(t, rs, -1, 1, 2);
  Buf out = make(t, os);
  RUN_OK("matmul", {}, {&l, &r}, out);
  // Sums of k products of values in [-1, 1]: an absolute tolerance.
  double k = double(ls.back());
  expectAll(out, matmulRef(l, r, os), relTol(t), relTol(t) * std::sqrt(k));
}

TEST(CpuMatmul, Shapes) {
  checkMatmul({5, 7}, {7, 3}, {5, 3});
  checkMatmul({2, 8, 64}, {64, 192}, {2, 8, 192});         // linear layer
  checkMatmul({2, 4, 8, 16}, {2, 4, 16, 8}, {2, 4, 8, 8}); // q k^T
  checkMatmul({7, 16}, {3, 16, 5}, {3, 7, 5});             // lhs broadcast
  checkMatmul({2, 1, 4, 6}, {1, 3, 6, 5}, {2, 3, 4, 5});   // both broadcast
  checkMatmul({3, 1, 4, 6}, {6, 2}, {3, 1, 4, 2});
  checkMatmul({1, 4, 6}, {2, 6, 2}, {2, 4, 2});
  checkMatmul({3, 0}, {0, 4}, {3, 4}); // k = 0: zeros
  checkMatmul({0, 5}, {5, 4}, {0, 4});
  checkMatmul({2, 200, 300}, {2, 300, 100}, {2, 200, 100}); // threaded
  checkMatmul({64, 3, 3}, {64, 3, 3}, {64, 3, 3});          // many small
}

TEST(CpuMatmul, ThreadGrids) {
  // The split over threads, for thread counts this machine may not have.
  int saved = omp_get_max_threads();
  for (int threads : {3, 6, 16}) {
    omp_set_num_threads(threads);
    checkMatmul({300, 200}, {200, 500}, {300, 500});
    checkMatmul({1000, 64}, {64, 40}, {1000, 40});   // narrow
    checkMatmul({20, 300}, {300, 1000}, {20, 1000}); // short
    checkMatmul({3, 100, 64}, {3, 64, 100}, {3, 100, 100});
  }
  omp_set_num_threads(saved);
}

TEST(CpuMatmul, TransposedOperands) {
  // transpose_lhs / transpose_rhs read an operand as its transpose over the
  // last two dimensions.
  for (auto [tl, tr] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {1, 1}})
    for (auto [batched, rhsBatched] : std::vector<std::pair<bool, bool>>{
             {false, false}, {true, false}, {true, true}}) {
      SCOPED_TRACE("transpose " + std::to_string(tl) + std::to_string(tr) +
                   (batched ? " batched" : "") + (rhsBatched ? " rhs" : ""));
      int64_t m = 37, k = 50, n = 300;
      Shape ls = tl ? Shape{k, m} : Shape{m, k};
      Shape rs = tr ? Shape{n, k} : Shape{k, n};
      Shape os{m, n};
      if (batched) {
        ls.insert(ls.begin(), 2);
        os.insert(os.begin(), 2);
      }
      if (rhsBatched)
        rs.insert(rs.begin(), 2);
      Buf l = random(DType::F32, ls, -1, 1, 3),
          r = random(DType::F32, rs, -1, 1, 4);
      Buf out = make(DType::F32, os);
      RUN_OK("matmul",
             {{"transpose_lhs", intA(tl)}, {"transpose_rhs", intA(tr)}},
             {&l, &r}, out);
      // The reference on explicitly transposed copies.
      auto transposed = [](const Buf &b) {
        Shape s = b.shape;
        std::swap(s[s.size() - 1], s[s.size() - 2]);
        Buf t = make(b.dtype, s);
        int64_t rows = b.shape[b.shape.size() - 2], cols = b.shape.back();
        for (int64_t i = 0; i < b.size(); ++i) {
          int64_t batch = i / (rows * cols), rc = i % (rows * cols);
          int64_t row = rc / cols, col = rc % cols;
          t.set(batch * rows * cols + col * rows + row, b.at(i));
        }
        return t;
      };
      Buf lp = tl ? transposed(l) : l, rp = tr ? transposed(r) : r;
      expectAll(out, matmulRef(lp, rp, os), 1e-5, 1e-5 * std::sqrt(double(k)));
    }
}

TEST(CpuMatmul, OtherFloatTypes) {
  for (DType t : {DType::F64, DType::F16, DType::BF16}) {
    checkMatmul({2, 5, 7}, {7, 3}, {2, 5, 3}, t);
    checkMatmul({2, 5, 7}, {2, 7, 3}, {2, 5, 3}, t);
  }
}

TEST(CpuMatmul, Errors) {
  Buf a = make(DType::F32, {2, 3}), b = make(DType::F32, {4, 5});
  Buf out = make(DType::F32, {2, 5});
  RUN_ERROR("matmul: lhs of shape [2, 3] and rhs of shape [4, 5] do not agree "
            "on the contracted dimension (3 vs 4)",
            "matmul", {}, {&a, &b}, out);
  Buf v = make(DType::F32, {3});
  RUN_ERROR("matmul: operands must have rank 2 or more", "matmul", {}, {&v, &b},
            out);
  Buf c = make(DType::F32, {3, 5}), wrong = make(DType::F32, {2, 4});
  RUN_ERROR("matmul: the result has shape [2, 4], expected [2, 5]", "matmul",
            {}, {&a, &c}, wrong);
  Buf l = make(DType::F32, {2, 2, 3}), r = make(DType::F32, {3, 3, 5});
  Buf o = make(DType::F32, {3, 2, 5});
  RUN_ERROR("matmul: batch dimensions [2] and [3] do not broadcast", "matmul",
            {}, {&l, &r}, o);
  Buf i = make(DType::I64, {2, 3}), j = make(DType::I64, {3, 5}),
      io = make(DType::I64, {2, 5});
  RUN_ERROR("matmul: no kernel for element type i64", "matmul", {}, {&i, &j},
            io);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

std::vector<double> reduceRef(const std::string &op, const Buf &x,
                              const std::vector<int64_t> &axes, Shape &outShape,
                              bool keepdims) {
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + x.shape.size() : a] = true;
  Shape kept;
  outShape.clear();
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d])
      kept.push_back(x.shape[d]);
    if (!reduced[d] || keepdims)
      outShape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  int64_t n = 1;
  for (int64_t d : kept)
    n *= d;
  std::vector<double> acc(n, op == "reduce_max"   ? -kInf
                             : op == "reduce_min" ? kInf
                                                  : 0);
  std::vector<int64_t> counts(n, 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    auto idx = unflatten(x.shape, i);
    std::vector<int64_t> k;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d])
        k.push_back(idx[d]);
    int64_t o = flatten(kept, k);
    double v = x.at(i);
    if (op == "reduce_max")
      acc[o] = std::max(acc[o], v);
    else if (op == "reduce_min")
      acc[o] = std::min(acc[o], v);
    else
      acc[o] += v;
    ++counts[o];
  }
  if (op == "reduce_mean")
    for (int64_t o = 0; o < n; ++o)
      acc[o] /= double(counts[o]);
  return acc;
}

void checkReduce(const std::string &op, const Buf &x,
                 const std::vector<int64_t> &axes, bool keepdims) {
  SCOPED_TRACE(op + " of " + ops::shapeString(x.shape) + " over " +
               ops::shapeString(axes) + (keepdims ? " keepdims" : "") + " " +
               dtypeName(x.dtype));
  Shape outShape;
  std::vector<double> want = reduceRef(op, x, axes, outShape, keepdims);
  bool integral = x.dtype == DType::I64 || x.dtype == DType::I32;
  if (integral && op == "reduce_mean")
    for (double &w : want)
      w = std::trunc(w);
  Buf out = make(x.dtype, outShape);
  RUN_OK(op, {{"axes", intsA(axes)}, {"keepdims", intA(keepdims)}}, {&x}, out);
  expectAll(out, want, relTol(x.dtype), relTol(x.dtype));
}

TEST(CpuReductions, AxesPatterns) {
  Buf x = random(DType::F32, {4, 5, 6, 7}, -2, 2, 3);
  std::vector<std::vector<int64_t>> axesSets = {
      {3},    {2, 3}, {0},          {0, 1},    {1},  {1, 2}, {0, 2},
      {1, 3}, {0, 3}, {0, 1, 2, 3}, {0, 2, 3}, {-1}, {}};
  for (const char *op :
       {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"})
    for (const auto &axes : axesSets)
      for (bool keepdims : {true, false})
        checkReduce(op, x, axes, keepdims);
}

TEST(CpuReductions, LargeAndTyped) {
  // Long rows and long columns, threaded.
  Buf rows = random(DType::F32, {64, 4096}, -1, 1, 4);
  Buf cols = random(DType::F32, {4096, 64}, -1, 1, 5);
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    checkReduce(op, rows, {1}, true);
    checkReduce(op, cols, {0}, false);
  }
  for (DType t :
       {DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32}) {
    Buf x = random(t, {3, 4, 5}, -20, 20, 6);
    for (const char *op :
         {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"}) {
      if ((t == DType::F16 || t == DType::BF16) &&
          std::string(op) != "reduce_max")
        continue; // sums round in 16 bits; max is exact
      checkReduce(op, x, {1}, true);
      checkReduce(op, x, {0, 2}, false);
    }
  }
  // A bool max is "any".
  Buf b = make(DType::Bool, {2, 3}, {0, 0, 0, 0, 1, 0});
  Buf bo = make(DType::Bool, {2});
  RUN_OK("reduce_max", {{"axes", intsA({1})}, {"keepdims", intA(0)}}, {&b}, bo);
  EXPECT_EQ(values(bo), (std::vector<double>{0, 1}));
}

TEST(CpuReductions, NaNAndErrors) {
  Buf x = make(DType::F32, {2, 3}, {1, kNaN, 3, 4, 5, 6});
  Buf out = make(DType::F32, {2});
  RUN_OK("reduce_max", {{"axes", intsA({1})}, {"keepdims", intA(0)}}, {&x},
         out);
  EXPECT_TRUE(std::isnan(out.at(0)));
  EXPECT_EQ(out.at(1), 6);
  Buf wrong = make(DType::F32, {2});
  RUN_ERROR("reduce_sum: the result has shape [2], expected [2, 1]",
            "reduce_sum", {{"axes", intsA({1})}, {"keepdims", intA(1)}}, {&x},
            wrong);
  RUN_ERROR("reduce_sum: axis 2 is out of range for rank 2", "reduce_sum",
            {{"axes", intsA({2})}}, {&x}, wrong);
  RUN_ERROR("reduce_sum: axis 1 is reduced twice", "reduce_sum",
            {{"axes", intsA({1, 1})}, {"keepdims", intA(0)}}, {&x}, wrong);
  RUN_ERROR("reduce_sum: missing attribute 'axes'", "reduce_sum", {}, {&x},
            wrong);
  RUN_ERROR("reduce_sum: attribute 'axes' is a string, expected an integer "
            "array",
            "reduce_sum", {{"axes", stringA("1")}}, {&x}, wrong);
}

//===----------------------------------------------------------------------===//
// cumsum
//===----------------------------------------------------------------------===//

/// The running sums of x along `axis`, by the definition.
std::vector<double> cumsumRef(const Buf &x, int64_t axis, bool exclusive,
                              bool reverse) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    auto idx = unflatten(x.shape, i);
    double sum = 0;
    for (int64_t j = 0; j < x.shape[axis]; ++j) {
      bool in = reverse ? j > idx[axis] || (!exclusive && j == idx[axis])
                        : j < idx[axis] || (!exclusive && j == idx[axis]);
      if (!in)
        continue;
      auto other = idx;
      other[axis] = j;
      sum += x.at(flatten(x.shape, other));
    }
    y[i] = sum;
  }
  return y;
}

TEST(CpuCumsum, AxesFlagsAndTypes) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32}) {
    Buf x = random(t, {3, 4, 5}, -9, 9, 7);
    for (int64_t axis : {0, 1, 2})
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(t)) + " axis " +
                       std::to_string(axis) + (exclusive ? " exclusive" : "") +
                       (reverse ? " reverse" : ""));
          Buf out = make(t, x.shape);
          RUN_OK("cumsum",
                 {{"axis", intA(axis)},
                  {"exclusive", intA(exclusive)},
                  {"reverse", intA(reverse)}},
                 {&x}, out);
          expectAll(out, cumsumRef(x, axis, exclusive, reverse), relTol(t),
                    relTol(t));
        }
  }
  // OPT's positions: the running count of the attention mask, threaded
  // over many rows.
  Buf mask = random(DType::I64, {256, 64}, 0, 2, 8);
  Buf positions = make(DType::I64, mask.shape);
  RUN_OK("cumsum", {{"axis", intA(1)}}, {&mask}, positions);
  expectAll(positions, cumsumRef(mask, 1, false, false), 0, 0);
}

TEST(CpuCumsum, Errors) {
  Buf x = make(DType::F32, {2, 3}), out = make(DType::F32, {2, 3});
  Buf wrong = make(DType::F32, {3, 2});
  RUN_ERROR("cumsum: axis 2 is out of range for rank 2", "cumsum",
            {{"axis", intA(2)}}, {&x}, out);
  RUN_ERROR("cumsum: the result has shape [3, 2], expected [2, 3]", "cumsum",
            {{"axis", intA(0)}}, {&x}, wrong);
  RUN_ERROR("cumsum: missing attribute 'axis'", "cumsum", {}, {&x}, out);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

std::vector<double> softmaxRef(const Buf &x, int64_t axis, bool log) {
  int64_t outer = 1, c = x.shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * c + k) * inner + i; };
      double m = -kInf, s = 0;
      for (int64_t k = 0; k < c; ++k)
        m = std::max(m, x.at(at(k)));
      for (int64_t k = 0; k < c; ++k)
        s += std::exp(x.at(at(k)) - m);
      for (int64_t k = 0; k < c; ++k)
        y[at(k)] =
            log ? x.at(at(k)) - m - std::log(s) : std::exp(x.at(at(k)) - m) / s;
    }
  return y;
}

TEST(CpuSoftmax, AxesAndTypes) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (auto [shape, axis] :
         std::vector<std::pair<Shape, int64_t>>{{{2, 4, 8, 8}, 3},
                                                {{3, 50257}, 1},
                                                {{4, 7, 5}, 1},
                                                {{6, 300}, 0},
                                                {{2, 3, 600}, -2},
                                                {{1}, 0}}) {
      if (t != DType::F32 && shape.size() > 1 && shape[1] == 50257)
        continue;
      Buf x = random(t, shape, -8, 8, 7);
      int64_t ax = axis < 0 ? axis + int64_t(shape.size()) : axis;
      for (bool log : {false, true}) {
        SCOPED_TRACE(ops::shapeString(shape) + " axis " + std::to_string(axis) +
                     (log ? " log " : " ") + dtypeName(t));
        Buf out = make(t, shape);
        RUN_OK(log ? "log_softmax" : "softmax", {{"axis", intA(axis)}}, {&x},
               out);
        expectAll(out, softmaxRef(x, ax, log), relTol(t) * 2,
                  relTol(t) * (log ? 10 : 0.1));
      }
    }
}

TEST(CpuSoftmax, MaskedRows) {
  // -inf entries get probability 0; a row of -inf is NaN, as in PyTorch.
  Buf x = make(DType::F32, {2, 3}, {0, -kInf, 0, -kInf, -kInf, -kInf});
  Buf out = make(DType::F32, {2, 3});
  RUN_OK("softmax", {{"axis", intA(1)}}, {&x}, out);
  EXPECT_EQ(out.at(0), 0.5);
  EXPECT_EQ(out.at(1), 0);
  EXPECT_TRUE(std::isnan(out.at(3)));
  Buf i = make(DType::I32, {2, 3}), io = make(DType::I32, {2, 3});
  RUN_ERROR("softmax: no kernel for element type i32", "softmax",
            {{"axis", intA(1)}}, {&i}, io);
  RUN_ERROR("softmax: axis 2 is out of range for rank 2", "softmax",
            {{"axis", intA(2)}}, {&x}, out);
}

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

std::vector<double> layerNormRef(const Buf &x, const Buf *scale,
                                 const Buf *bias, int64_t axis, double eps,
                                 bool rms) {
  int64_t d = 1;
  for (size_t k = axis; k < x.shape.size(); ++k)
    d *= x.shape[k];
  int64_t rows = x.size() / d;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i)
      mean += x.at(r * d + i);
    mean /= d;
    if (rms)
      mean = 0;
    for (int64_t i = 0; i < d; ++i)
      var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i) {
      double v = (x.at(r * d + i) - mean) / std::sqrt(var + eps);
      if (scale)
        v *= scale->at(i);
      if (bias)
        v += bias->at(i);
      y[r * d + i] = v;
    }
  }
  return y;
}

TEST(CpuNorms, LayerNorm) {
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (auto [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
             {{2, 8, 64}, 2}, {{2, 3, 4}, 1}, {{300, 768}, -1}, {{5, 1}, 1}}) {
      Buf x = random(t, shape, -3, 5, 8);
      int64_t ax = axis < 0 ? axis + int64_t(shape.size()) : axis;
      Shape ws(shape.begin() + ax, shape.end());
      Buf g = random(t, ws, 0.5, 1.5, 9), b = random(t, ws, -1, 1, 10);
      for (int variant = 0; variant < 4; ++variant) {
        const Buf *scale = variant & 1 ? &g : nullptr;
        const Buf *bias = variant & 2 ? &b : nullptr;
        SCOPED_TRACE(ops::shapeString(shape) + " variant " +
                     std::to_string(variant) + " " + dtypeName(t));
        Buf out = make(t, shape);
        RUN_OK("layer_norm", {{"axis", intA(axis)}, {"epsilon", floatA(1e-5)}},
               {&x, scale ? scale : &absent(), bias ? bias : &absent()}, out);
        expectAll(out, layerNormRef(x, scale, bias, ax, 1e-5, false), relTol(t),
                  relTol(t));
      }
    }
}

TEST(CpuNorms, LayerNormErrors) {
  Buf x = make(DType::F32, {4, 64}), g = make(DType::F32, {32});
  Buf out = make(DType::F32, {4, 64});
  RUN_ERROR("layer_norm: scale has shape [32], expected [64]", "layer_norm",
            {{"axis", intA(1)}, {"epsilon", floatA(1e-5)}}, {&x, &g}, out);
  Buf gd = make(DType::F64, {64});
  RUN_ERROR("layer_norm: bias has element type f64, expected f32", "layer_norm",
            {{"axis", intA(1)}, {"epsilon", floatA(1e-5)}},
            {&x, &absent(), &gd}, out);
  Buf i = make(DType::I32, {4, 64}), io = make(DType::I32, {4, 64});
  RUN_ERROR("layer_norm: no kernel for element type i32", "layer_norm",
            {{"axis", intA(1)}, {"epsilon", floatA(1e-5)}}, {&i}, io);
  RUN_ERROR("layer_norm: attribute 'axis' is a string, expected an integer",
            "layer_norm", {{"axis", stringA("1")}}, {&x}, out);
}

TEST(CpuNorms, RmsNorm) {
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    Buf x = random(t, {3, 7, 96}, -3, 3, 11), g = random(t, {96}, 0.5, 1.5, 12);
    Buf out = make(t, {3, 7, 96});
    RUN_OK("rms_norm", {{"axis", intA(2)}, {"epsilon", floatA(1e-6)}}, {&x, &g},
           out);
    expectAll(out, layerNormRef(x, &g, nullptr, 2, 1e-6, true), relTol(t),
              relTol(t));
  }
  Buf x = make(DType::F32, {3, 8}), g = make(DType::F32, {3, 8});
  Buf out = make(DType::F32, {3, 8});
  RUN_ERROR("rms_norm: scale has shape [3, 8], expected [8]", "rms_norm",
            {{"axis", intA(1)}, {"epsilon", floatA(1e-6)}}, {&x, &g}, out);
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

std::vector<double> attentionRef(const Buf &q, const Buf &k, const Buf &v,
                                 const Buf *mask, double scale, bool causal) {
  int64_t B = q.shape[0], H = q.shape[1], Tq = q.shape[2], D = q.shape[3];
  int64_t Hkv = k.shape[1], Tk = k.shape[2], Dv = v.shape[3];
  Shape full{B, H, Tq, Tk};
  std::vector<double> out(B * H * Tq * Dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t hk = h / (H / Hkv);
      for (int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk);
        double m = -kInf;
        for (int64_t j = 0; j < Tk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q.at(((b * H + h) * Tq + i) * D + d) *
                   k.at(((b * Hkv + hk) * Tk + j) * D + d);
          dot *= scale;
          if (mask) {
            double mv = mask->at(broadcastIndex(
                mask->shape, full, ((b * H + h) * Tq + i) * Tk + j));
            if (mask->dtype == DType::Bool)
              dot = mv ? dot : -kInf;
            else
              dot += mv;
          }
          if (causal && j > i)
            dot = -kInf;
          s[j] = dot;
          m = std::max(m, dot);
        }
        double sum = 0;
        for (int64_t j = 0; j < Tk; ++j)
          sum += s[j] = std::exp(s[j] - m);
        for (int64_t d = 0; d < Dv; ++d) {
          double o = 0;
          for (int64_t j = 0; j < Tk; ++j)
            o += s[j] * v.at(((b * Hkv + hk) * Tk + j) * Dv + d);
          out[((b * H + h) * Tq + i) * Dv + d] = o / sum;
        }
      }
    }
  return out;
}

struct AttentionCase {
  const char *name;
  int64_t b, h, hkv, tq, tk, d, dv;
  bool causal;
  // 0 none, 1 bool [1, 1, Tq, Tk], 2 float [B, 1, 1, Tk], 3 bool [Tk],
  // 4 bool lower triangle [Tq, Tk], 5 float -inf above the diagonal.
  int mask;
};

void checkAttention(const AttentionCase &c, DType t = DType::F32) {
  SCOPED_TRACE(std::string(c.name) + " " + dtypeName(t));
  Buf q = random(t, {c.b, c.h, c.tq, c.d}, -1, 1, 20);
  Buf k = random(t, {c.b, c.hkv, c.tk, c.d}, -1, 1, 21);
  Buf v = random(t, {c.b, c.hkv, c.tk, c.dv}, -1, 1, 22);
  Buf mask;
  if (c.mask == 1) {
    mask = random(DType::Bool, {1, 1, c.tq, c.tk}, 0, 2, 23);
    for (int64_t i = 0; i < c.tq; ++i)
      mask.set(i * c.tk, 1); // keep one key per row
  } else if (c.mask == 2) {
    mask = random(DType::F32, {c.b, 1, 1, c.tk}, -3, 0, 24);
  } else if (c.mask == 3) {
    mask = random(DType::Bool, {c.tk}, 0, 2, 25);
    mask.set(0, 1);
  } else if (c.mask == 4 || c.mask == 5) {
    // A causal mask as a tensor: bool lower triangle, or -inf above it.
    bool additive = c.mask == 5;
    mask = make(additive ? DType::F32 : DType::Bool, {c.tq, c.tk});
    for (int64_t i = 0; i < c.tq; ++i)
      for (int64_t j = 0; j < c.tk; ++j)
        mask.set(i * c.tk + j, additive ? (j <= i ? 0.0 : -kInf) : j <= i);
  }
  double scale = 1 / std::sqrt(double(c.d));
  Attributes attrs{{"scale", floatA(scale)}};
  if (c.causal)
    attrs["causal"] = intA(1);
  Buf out = make(t, {c.b, c.h, c.tq, c.dv});
  if (c.mask)
    RUN_OK("attention", attrs, {&q, &k, &v, &mask}, out);
  else
    RUN_OK("attention", attrs, {&q, &k, &v}, out);
  expectAll(out,
            attentionRef(q, k, v, c.mask ? &mask : nullptr, scale, c.causal),
            relTol(t) * 2, relTol(t) * 2);
}

TEST(CpuAttention, Cases) {
  std::vector<AttentionCase> cases = {
      {"mha", 2, 4, 4, 8, 8, 16, 16, false, 0},
      {"causal", 2, 4, 4, 37, 37, 16, 16, true, 0},
      {"gqa", 2, 8, 2, 9, 9, 16, 16, false, 0},
      {"gqa causal", 1, 6, 3, 70, 70, 32, 32, true, 0},
      {"mqa", 1, 4, 1, 5, 5, 8, 8, true, 0},
      {"bool mask", 2, 4, 2, 7, 7, 16, 16, false, 1},
      {"float mask", 2, 4, 4, 6, 6, 16, 16, false, 2},
      {"causal and mask", 2, 4, 2, 35, 35, 16, 16, true, 1},
      {"key mask", 1, 2, 2, 5, 5, 8, 8, false, 3},
      {"cross", 2, 2, 2, 5, 11, 16, 24, false, 0},
      {"cross causal", 1, 2, 1, 11, 5, 16, 16, true, 0},
      {"one key", 1, 1, 1, 3, 1, 4, 4, false, 0},
      {"causal bool tensor", 2, 4, 2, 45, 45, 16, 16, false, 4},
      {"causal additive tensor", 1, 4, 4, 45, 45, 16, 16, false, 5},
  };
  for (const auto &c : cases)
    checkAttention(c);
  for (DType t : {DType::F64, DType::F16, DType::BF16}) {
    checkAttention(cases[3], t);
    checkAttention(cases[7], t);
  }
}

TEST(CpuAttention, FullyMaskedRowIsNaN) {
  Buf q = random(DType::F32, {1, 1, 2, 4}),
      k = random(DType::F32, {1, 1, 3, 4});
  Buf v = random(DType::F32, {1, 1, 3, 4});
  Buf mask = make(DType::Bool, {2, 3}, {1, 1, 0, 0, 0, 0});
  Buf out = make(DType::F32, {1, 1, 2, 4});
  RUN_OK("attention", {{"scale", floatA(0.5)}}, {&q, &k, &v, &mask}, out);
  EXPECT_FALSE(std::isnan(out.at(0)));
  EXPECT_TRUE(std::isnan(out.at(4)));
}

TEST(CpuAttention, Errors) {
  Buf q = make(DType::F32, {1, 3, 4, 8}), k = make(DType::F32, {1, 2, 4, 8});
  Buf out = make(DType::F32, {1, 3, 4, 8});
  RUN_ERROR("attention: q has 3 heads, which is not a multiple of the 2 "
            "key/value heads",
            "attention", {{"scale", floatA(1)}}, {&q, &k, &k}, out);
  Buf q2 = make(DType::F32, {1, 2, 4, 8}), k2 = make(DType::F32, {1, 2, 4, 16});
  Buf out2 = make(DType::F32, {1, 2, 4, 8});
  RUN_ERROR("attention: k has shape [1, 2, 4, 16], expected [1, 2, 4, 8]",
            "attention", {{"scale", floatA(1)}}, {&q2, &k2, &k2}, out2);
  Buf mask = make(DType::Bool, {3, 4});
  RUN_ERROR("attention: mask has shape [3, 4], which does not broadcast to "
            "[1, 2, 4, 4]",
            "attention", {{"scale", floatA(1)}}, {&q2, &q2, &q2, &mask}, out2);
  Buf imask = make(DType::I32, {4, 4});
  RUN_ERROR("attention: no kernel for element type i32 (mask)", "attention",
            {{"scale", floatA(1)}}, {&q2, &q2, &q2, &imask}, out2);
  Buf flat = make(DType::F32, {2, 4, 8});
  RUN_ERROR("attention: q, k and v must have rank 4", "attention", {},
            {&flat, &flat, &flat}, flat);
}

//===----------------------------------------------------------------------===//
// gather_elements, gather_elements_grad, gather_nd, scatter_nd
//===----------------------------------------------------------------------===//

/// The data offset of element `i` of `indices` (shape `ishape`) with its
/// `axis` coordinate replaced by `index` (negative counts from the end).
int64_t elementAt(const Shape &data, const Shape &ishape, int64_t axis,
                  int64_t i, int64_t index) {
  auto idx = unflatten(ishape, i);
  idx[axis] = index < 0 ? index + data[axis] : index;
  return flatten(data, idx);
}

TEST(CpuIndexing, GatherElementsAndItsGradient) {
  Buf data = random(DType::F32, {3, 4, 5}, -2, 2, 9);
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    // Indices smaller than the data off the axis, some negative, some
    // repeated.
    Shape ishape = {2, 3, 4};
    ishape[axis] = 6;
    Buf indices = random(DType::I64, ishape, -double(data.shape[axis]),
                         double(data.shape[axis]), 10 + axis);
    Buf out = make(DType::F32, ishape);
    RUN_OK("gather_elements", {{"axis", intA(axis)}}, {&data, &indices}, out);
    std::vector<double> want(indices.size()), grad(data.size(), 0.0);
    Buf dy = random(DType::F32, ishape, -1, 1, 20 + axis);
    for (int64_t i = 0; i < indices.size(); ++i) {
      int64_t at = elementAt(data.shape, ishape, axis, i, indices.at(i));
      want[i] = data.at(at);
      grad[at] += dy.at(i);
    }
    expectAll(out, want, 0, 0);
    Buf dx = make(DType::F32, data.shape);
    RUN_OK("gather_elements_grad", {{"axis", intA(axis)}}, {&dy, &indices},
           dx);
    expectAll(dx, grad);
  }
  Buf bad = make(DType::I64, {1, 4, 5}, std::vector<double>(20, 3));
  Buf out = make(DType::F32, {1, 4, 5});
  RUN_ERROR("gather_elements: index 3 at position 0 is out of range for a "
            "dimension of size 3",
            "gather_elements", {{"axis", intA(0)}}, {&data, &bad}, out);
  Buf big = make(DType::I64, {1, 5, 5});
  Buf bigOut = make(DType::F32, {1, 5, 5});
  RUN_ERROR("gather_elements: indices [1, 5, 5] are larger than the data "
            "[3, 4, 5] in dimension 1",
            "gather_elements", {{"axis", intA(0)}}, {&data, &big}, bigOut);
}

TEST(CpuIndexing, GatherNdAndScatterNd) {
  Buf data = random(DType::F32, {4, 3, 2}, -2, 2, 11);
  // Two tuples of two entries: slices of shape [2].
  Buf indices = make(DType::I64, {2, 2}, {3, -1, 0, 1});
  Buf slices = make(DType::F32, {2, 2});
  RUN_OK("gather_nd", {}, {&data, &indices}, slices);
  auto offset = [&](int64_t t) {
    int64_t a = indices.at(2 * t), b = indices.at(2 * t + 1);
    return ((a < 0 ? a + 4 : a) * 3 + (b < 0 ? b + 3 : b)) * 2;
  };
  std::vector<double> want;
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t c = 0; c < 2; ++c)
      want.push_back(data.at(offset(t) + c));
  expectAll(slices, want, 0, 0);

  Buf updates = random(DType::F32, {2, 2}, -1, 1, 12);
  for (const char *reduction : {"none", "add", "mul", "max", "min"}) {
    SCOPED_TRACE(reduction);
    Buf out = make(DType::F32, data.shape);
    RUN_OK("scatter_nd", {{"reduction", stringA(reduction)}},
           {&data, &indices, &updates}, out);
    std::vector<double> expected(data.size());
    for (int64_t i = 0; i < data.size(); ++i)
      expected[i] = data.at(i);
    std::string r = reduction;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t c = 0; c < 2; ++c) {
        double &x = expected[offset(t) + c];
        double u = updates.at(2 * t + c);
        x = r == "none"  ? u
            : r == "add" ? x + u
            : r == "mul" ? x * u
            : r == "max" ? std::max(x, u)
                         : std::min(x, u);
      }
    expectAll(out, expected);
  }
  // Repeated tuples with add accumulate in order.
  Buf twice = make(DType::I64, {3, 1}, {1, 1, 1});
  Buf rows = random(DType::F32, {3, 3, 2}, -1, 1, 13);
  Buf out = make(DType::F32, data.shape);
  RUN_OK("scatter_nd", {{"reduction", stringA("add")}}, {&data, &twice, &rows},
         out);
  for (int64_t c = 0; c < 6; ++c)
    EXPECT_NEAR(out.at(6 + c),
                data.at(6 + c) + rows.at(c) + rows.at(6 + c) + rows.at(12 + c),
                1e-6);
  Buf wrong = make(DType::F32, {2, 3});
  RUN_ERROR("scatter_nd: updates has shape [2, 3], expected [2, 2]",
            "scatter_nd", {}, {&data, &indices, &wrong}, out);
  RUN_ERROR("scatter_nd: reduction must be none, add, mul, max or min, got "
            "'sub'",
            "scatter_nd", {{"reduction", stringA("sub")}},
            {&data, &indices, &updates}, out);
}

//===----------------------------------------------------------------------===//
// embedding, gather
//===----------------------------------------------------------------------===//

TEST(CpuLookup, Embedding) {
  Buf table = random(DType::F32, {50, 16});
  for (DType it : {DType::I64, DType::I32}) {
    Buf ids = make(it, {2, 3}, {0, 49, 7, -1, 3, 3});
    Buf out = make(DType::F32, {2, 3, 16});
    RUN_OK("embedding", {}, {&table, &ids}, out);
    std::vector<double> want;
    for (int64_t id : {0, 49, 7, 49, 3, 3})
      for (int64_t d = 0; d < 16; ++d)
        want.push_back(table.at(id * 16 + d));
    expectAll(out, want, 0, 0);
  }
  Buf ids = make(DType::I64, {2}, {3, 50}), out = make(DType::F32, {2, 16});
  RUN_ERROR("embedding: index 50 at position 1 is out of range for a "
            "dimension of size 50",
            "embedding", {}, {&table, &ids}, out);
  Buf fids = make(DType::F32, {2});
  RUN_ERROR("embedding: no kernel for element type f32 (ids)", "embedding", {},
            {&table, &fids}, out);
  Buf bad = make(DType::F32, {2, 8});
  Buf ok = make(DType::I64, {2}, {1, 2});
  RUN_ERROR("embedding: the result has shape [2, 8], expected [2, 16]",
            "embedding", {}, {&table, &ok}, bad);
}

TEST(CpuLookup, Gather) {
  for (DType t : {DType::F32, DType::I64, DType::Bool, DType::F16})
    for (int64_t axis : {0, 1, 2, -1}) {
      Buf data = random(t, {4, 5, 6}, 0, 3, 30);
      Buf idx = make(DType::I64, {2, 2}, {0, -1, 2, 1});
      int64_t ax = axis < 0 ? axis + 3 : axis;
      Shape os;
      for (int64_t d = 0; d < ax; ++d)
        os.push_back(data.shape[d]);
      os.push_back(2);
      os.push_back(2);
      for (int64_t d = ax + 1; d < 3; ++d)
        os.push_back(data.shape[d]);
      Buf out = make(t, os);
      RUN_OK("gather", {{"axis", intA(axis)}}, {&data, &idx}, out);
      std::vector<double> want(out.size());
      for (int64_t i = 0; i < out.size(); ++i) {
        auto o = unflatten(os, i);
        std::vector<int64_t> in;
        for (int64_t d = 0; d < ax; ++d)
          in.push_back(o[d]);
        int64_t j = idx.intAt(o[ax] * 2 + o[ax + 1]);
        in.push_back(j < 0 ? j + data.shape[ax] : j);
        for (int64_t d = ax + 1; d < 3; ++d)
          in.push_back(o[d + 1]);
        want[i] = data.at(flatten(data.shape, in));
      }
      expectAll(out, want, 0, 0);
    }
  // A scalar index drops the axis.
  Buf data = random(DType::F32, {3, 4}), idx = make(DType::I32, {}, {-2});
  Buf out = make(DType::F32, {3});
  RUN_OK("gather", {{"axis", intA(1)}}, {&data, &idx}, out);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(out.at(i), data.at(i * 4 + 2));
  Buf far = make(DType::I32, {}, {-5});
  RUN_ERROR("gather: index -5 at position 0 is out of range", "gather",
            {{"axis", intA(1)}}, {&data, &far}, out);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Per-position losses; `counted` gets the positions not ignored.
std::vector<double> lossRef(const Buf &x, const Buf &t, bool crossEntropy,
                            bool hasIgnore, int64_t ignore, int64_t &counted) {
  int64_t n = x.shape[0], c = x.shape[1], d = x.size() / (n * c);
  std::vector<double> losses(n * d);
  counted = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < d; ++p) {
      int64_t target = t.intAt(i * d + p);
      if (hasIgnore && target == ignore) {
        losses[i * d + p] = 0;
        continue;
      }
      ++counted;
      auto at = [&](int64_t k) { return x.at((i * c + k) * d + p); };
      double picked = at(target);
      if (!crossEntropy) {
        losses[i * d + p] = -picked;
        continue;
      }
      double m = -kInf, s = 0;
      for (int64_t k = 0; k < c; ++k)
        m = std::max(m, at(k));
      for (int64_t k = 0; k < c; ++k)
        s += std::exp(at(k) - m);
      losses[i * d + p] = m + std::log(s) - picked;
    }
  return losses;
}

void checkLoss(const std::string &op, Shape xs, const std::string &reduction,
               bool hasIgnore, DType t = DType::F32, DType it = DType::I64) {
  SCOPED_TRACE(op + " " + ops::shapeString(xs) + " " + reduction +
               (hasIgnore ? " ignore" : "") + " " + dtypeName(t));
  Buf x = random(t, xs, -4, 4, 40);
  Shape ts{xs[0]};
  ts.insert(ts.end(), xs.begin() + 2, xs.end());
  Buf target = random(it, ts, 0, double(xs[1]), 41);
  const int64_t ignore = -100;
  if (hasIgnore)
    for (int64_t i = 0; i < target.size(); i += 3)
      target.set(i, ignore);
  Attributes attrs{{"reduction", stringA(reduction)}};
  if (hasIgnore)
    attrs["ignore_index"] = intA(ignore);
  int64_t counted;
  std::vector<double> losses = lossRef(x, target, op == "softmax_cross_entropy",
                                       hasIgnore, ignore, counted);
  std::vector<double> want = losses;
  Shape os = ts;
  if (reduction != "none") {
    double s = 0;
    for (double l : losses)
      s += l;
    want = {reduction == "mean" ? s / counted : s};
    os = {};
  }
  Buf out = make(t, os);
  RUN_OK(op, attrs, {&x, &target}, out);
  expectAll(out, want, relTol(t) * 2, relTol(t));
}

TEST(CpuLosses, SoftmaxCrossEntropyAndNll) {
  for (const char *op : {"softmax_cross_entropy", "nll_loss"})
    for (const char *reduction : {"none", "sum", "mean"})
      for (bool ignore : {false, true}) {
        checkLoss(op, {16, 10}, reduction, ignore);
        checkLoss(op, {4, 7, 3, 5}, reduction, ignore);
        checkLoss(op, {3, 5, 300}, reduction, ignore);
      }
  checkLoss("softmax_cross_entropy", {64, 50257}, "mean", true);
  for (DType t : {DType::F64, DType::BF16, DType::F16})
    checkLoss("softmax_cross_entropy", {8, 10, 2}, "mean", true, t);
  checkLoss("softmax_cross_entropy", {8, 10}, "mean", true, DType::F32,
            DType::I32);
}

TEST(CpuLosses, AllIgnoredMeanIsNaN) {
  Buf x = random(DType::F32, {2, 3});
  Buf t = make(DType::I64, {2}, {-1, -1}), out = make(DType::F32, {});
  RUN_OK("softmax_cross_entropy",
         {{"reduction", stringA("mean")}, {"ignore_index", intA(-1)}}, {&x, &t},
         out);
  EXPECT_TRUE(std::isnan(out.at(0)));
}

TEST(CpuLosses, Errors) {
  Buf x = random(DType::F32, {4, 3}), out = make(DType::F32, {});
  Buf t = make(DType::I64, {4}, {0, 1, 3, 2});
  RUN_ERROR("softmax_cross_entropy: target 3 at position 2 is not a class in "
            "[0, 3)",
            "softmax_cross_entropy", {{"reduction", stringA("mean")}}, {&x, &t},
            out);
  Buf t2 = make(DType::I64, {4}, {0, 1, -5, 2});
  RUN_ERROR("target -5 at position 2 is not a class in [0, 3) nor "
            "ignore_index -100",
            "nll_loss",
            {{"reduction", stringA("sum")}, {"ignore_index", intA(-100)}},
            {&x, &t2}, out);
  Buf t3 = make(DType::I64, {3});
  RUN_ERROR("nll_loss: target has shape [3], expected [4]", "nll_loss",
            {{"reduction", stringA("sum")}}, {&x, &t3}, out);
  Buf good = make(DType::I64, {4});
  RUN_ERROR("softmax_cross_entropy: reduction must be \"none\", \"sum\" or "
            "\"mean\", got \"avg\"",
            "softmax_cross_entropy", {{"reduction", stringA("avg")}},
            {&x, &good}, out);
  Buf vec = make(DType::F32, {4});
  RUN_ERROR("softmax_cross_entropy: the result has shape [4], expected []",
            "softmax_cross_entropy", {{"reduction", stringA("mean")}},
            {&x, &good}, vec);
  RUN_ERROR("softmax_cross_entropy: the result has shape [], expected [4]",
            "softmax_cross_entropy", {{"reduction", stringA("none")}},
            {&x, &good}, out);
  Buf ft = make(DType::F32, {4});
  RUN_ERROR("softmax_cross_entropy: no kernel for element type f32 (target)",
            "softmax_cross_entropy", {{"reduction", stringA("mean")}},
            {&x, &ft}, out);
}

} // namespace
