//===- OptimizerKernelsTest.cpp - CPU kernels of the optimizer step -------===//
//
// accumulate_grad, sum_squares, adamw and sgd against two references: a
// small double-precision implementation of the op descriptions here, and
// numbers torch 1.13 printed (torch.optim.AdamW / SGD after
// clip_grad_norm_, with a LambdaLR schedule), embedded with the script that
// produced them.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <omp.h>

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

/// Runs `op` with several results.
Status runOp(const std::string &op, const Attributes &attrs,
             const std::vector<const Buf *> &inputs,
             const std::vector<Buf *> &outputs) {
  std::vector<TensorRef> ins, outs;
  for (const Buf *b : inputs)
    ins.push_back(b == &absent() ? TensorRef() : b->ref());
  for (Buf *b : outputs)
    outs.push_back(b->ref());
  return runCpuKernel(op, attrs, ins, outs);
}

#define RUN_OP_OK(...)                                                         \
  do {                                                                         \
    Status s_ = runOp(__VA_ARGS__);                                            \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

#define RUN_OP_ERROR(text, ...)                                                \
  do {                                                                         \
    Status s_ = runOp(__VA_ARGS__);                                            \
    ASSERT_FALSE(s_.isOk());                                                   \
    EXPECT_NE(s_.message().find(text), std::string::npos) << s_.message();     \
  } while (0)

Buf stepTensor(int64_t step) { return make(DType::I64, {}, {double(step)}); }

//===----------------------------------------------------------------------===//
// The double-precision reference
//===----------------------------------------------------------------------===//

struct Hyper {
  double lr = 1e-3, weightDecay = 0, maxNorm = 0, minLr = 0;
  int64_t warmup = 0, decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; // adamw
  double momentum = 0;                            // sgd
};

Attributes attrsOf(const Hyper &h, bool adamw) {
  Attributes a = {{"lr", floatA(h.lr)},
                  {"weight_decay", floatA(h.weightDecay)},
                  {"max_norm", floatA(h.maxNorm)},
                  {"warmup_steps", intA(h.warmup)},
                  {"decay_steps", intA(h.decay)},
                  {"min_lr", floatA(h.minLr)}};
  if (adamw) {
    a["beta1"] = floatA(h.beta1);
    a["beta2"] = floatA(h.beta2);
    a["eps"] = floatA(h.eps);
  } else {
    a["momentum"] = floatA(h.momentum);
  }
  return a;
}

double refLr(const Hyper &h, int64_t step) {
  int64_t i = step - 1;
  if (i < h.warmup)
    return h.lr * double(i + 1) / double(h.warmup);
  if (h.decay > h.warmup) {
    double p = std::min(1.0, double(i - h.warmup) / double(h.decay - h.warmup));
    return h.minLr + (h.lr - h.minLr) * (1 + std::cos(M_PI * p)) / 2;
  }
  return h.lr;
}

double refClip(const Hyper &h, const std::vector<double> &g) {
  if (h.maxNorm <= 0)
    return 1;
  double s = 0;
  for (double x : g)
    s += x * x;
  return std::min(1.0, h.maxNorm / (std::sqrt(s) + 1e-6));
}

void refAdamW(const Hyper &h, int64_t step, std::vector<double> g,
              std::vector<double> &p, std::vector<double> &m,
              std::vector<double> &v) {
  double lr = refLr(h, step), c = refClip(h, g);
  double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] * c;
    p[i] *= 1 - lr * h.weightDecay;
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * gi;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * gi * gi;
    p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + h.eps);
  }
}

void refSgd(const Hyper &h, int64_t step, std::vector<double> g,
            std::vector<double> &p, std::vector<double> &buf) {
  double lr = refLr(h, step), c = refClip(h, g);
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] * c + h.weightDecay * p[i];
    if (h.momentum != 0) {
      buf[i] = step == 1 ? gi : h.momentum * buf[i] + gi;
      gi = buf[i];
    }
    p[i] -= lr * gi;
  }
}

/// sum_squares of `grad`, as the compiler computes it before the update.
Buf sumSquaresOf(const Buf &grad) {
  Buf s = make(DType::F32, {});
  EXPECT_TRUE(runOp("sum_squares", {}, {&grad}, {&s}).isOk());
  return s;
}

//===----------------------------------------------------------------------===//
// Against torch
//===----------------------------------------------------------------------===//

// The numbers below were printed by this script with Debian's python3-torch
// 1.13 (/usr/bin/python3):
//
//   import math, torch
//   def fmt(t): return ", ".join("%.9g" % v for v in t.flatten().tolist())
//   p0 = [0.5, -0.3, 0.8, -1.2, 0.1, 0.7]
//   g0 = [0.3, -0.6, 0.2, 0.5, -0.1, 0.4]
//   scales = [2.0, 0.5, 1.5, 0.3, 3.0, 0.8]
//   lr, min_lr, warmup, decay = 1e-2, 1e-3, 2, 5
//   def factor(i):
//       if i < warmup: return (i + 1) / warmup
//       p = min(1.0, (i - warmup) / (decay - warmup))
//       return (min_lr + (lr - min_lr) * (1 + math.cos(math.pi * p)) / 2) / lr
//   p = torch.tensor(p0).reshape(2, 3).requires_grad_()
//   opt = torch.optim.AdamW([p], lr=lr, betas=(0.9, 0.95), eps=1e-8,
//                           weight_decay=0.1, foreach=False)
//   sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
//   for s in scales:
//       p.grad = torch.tensor(g0).reshape(2, 3) * s
//       torch.nn.utils.clip_grad_norm_([p], 1.0)
//       opt.step(); sched.step()
//       print("adamw param", fmt(p.detach()))
//   st = opt.state[p]
//   print("adamw exp_avg", fmt(st["exp_avg"]))
//   print("adamw exp_avg_sq", fmt(st["exp_avg_sq"]))
//   p = torch.tensor(p0).reshape(2, 3).requires_grad_()
//   opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01,
//                         foreach=False)
//   for s in [2.0, 0.5, 1.5]:
//       p.grad = torch.tensor(g0).reshape(2, 3) * s
//       torch.nn.utils.clip_grad_norm_([p], 1.0)
//       opt.step()
//       print("sgd param", fmt(p.detach()))
//   print("sgd momentum_buffer", fmt(opt.state[p]["momentum_buffer"]))
//   x = torch.tensor(p0); y = torch.tensor(g0)
//   print("sum_squares", "%.9g" % float((x.double() ** 2).sum()
//                                       + (y.double() ** 2).sum()))
//   print("accumulate_grad", fmt(x + y))

const std::vector<double> kP0 = {0.5, -0.3, 0.8, -1.2, 0.1, 0.7};
const std::vector<double> kG0 = {0.3, -0.6, 0.2, 0.5, -0.1, 0.4};

/// `g0 * scale` in float, as torch multiplies it.
Buf scaledGrad(double scale) {
  Buf g = make(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    g.as<float>()[i] = float(kG0[i]) * float(scale);
  return g;
}

/// Distance in units in the last place between two finite floats.
int64_t ulps(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

/// Every element of f32 `out` within `maxUlps` of torch's printed value
/// (9 digits: exactly one float).
void expectTorch(const Buf &out, const std::vector<double> &want,
                 int64_t maxUlps) {
  ASSERT_EQ(out.size(), int64_t(want.size()));
  for (int64_t i = 0; i < out.size(); ++i) {
    float got = out.as<float>()[i];
    EXPECT_LE(ulps(got, float(want[i])), maxUlps)
        << "element " << i << ": got " << got << ", torch has " << want[i];
  }
}

// The kernels do torch's fp32 operations in torch's order and agree with
// these numbers bit for bit; one ulp is left for a libm whose pow or cos
// (the schedule, the bias corrections) rounds differently.
constexpr int64_t kTorchUlps = 1;

TEST(CpuOptimizer, AdamWEqualsTorch) {
  const double scales[] = {2.0, 0.5, 1.5, 0.3, 3.0, 0.8};
  const std::vector<std::vector<double>> torchParams = {
      {0.494749993, -0.294850022, 0.79460001, -1.20440006, 0.104950003,
       0.694649994},
      {0.484928995, -0.285228938, 0.784479141, -1.21252191, 0.114171311,
       0.684629083},
      {0.474856168, -0.275355786, 0.774106801, -1.22089732, 0.123645037,
       0.67435658},
      {0.467585534, -0.268239766, 0.766604245, -1.22685385, 0.130451858,
       0.666931331},
      {0.464435071, -0.265154094, 0.763356566, -1.22945356, 0.13340798,
       0.663716018},
      {0.463451982, -0.264190942, 0.762343585, -1.23026717, 0.134331256,
       0.662712991}};
  Hyper h;
  h.lr = 1e-2;
  h.minLr = 1e-3;
  h.warmup = 2;
  h.decay = 5;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.weightDecay = 0.1;
  h.maxNorm = 1.0;
  Buf p = make(DType::F32, {2, 3}, kP0), m = make(DType::F32, {2, 3}),
      v = make(DType::F32, {2, 3});
  for (int64_t s = 1; s <= 6; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Buf g = scaledGrad(scales[s - 1]), step = stepTensor(s);
    Buf n2 = sumSquaresOf(g);
    RUN_OP_OK("adamw", attrsOf(h, true), {&g, &step, &n2}, {&p, &m, &v});
    expectTorch(p, torchParams[s - 1], kTorchUlps);
  }
  expectTorch(m,
            {0.110931203, -0.221862406, 0.0739541277, 0.184885323,
             -0.0369770639, 0.147908255},
            kTorchUlps);
  expectTorch(v,
            {0.0169257782, 0.067703113, 0.00752256857, 0.0470160507,
             0.00188064214, 0.0300902743},
            kTorchUlps);
}

TEST(CpuOptimizer, SgdMomentumEqualsTorch) {
  const double scales[] = {2.0, 0.5, 1.5};
  const std::vector<std::vector<double>> torchParams = {
      {0.468051463, -0.236802951, 0.778234303, -1.25121427, 0.110382847,
       0.6573686},
      {0.423829734, -0.149688795, 0.747866929, -1.32105589, 0.124617025,
       0.598343015},
      {0.352157831, -0.00823930558, 0.698822737, -1.4350065, 0.147786006,
       0.502690256}};
  Hyper h;
  h.lr = 0.1;
  h.momentum = 0.9;
  h.weightDecay = 0.01;
  h.maxNorm = 1.0;
  Buf p = make(DType::F32, {2, 3}, kP0), buf = make(DType::F32, {2, 3});
  // Garbage in the buffer: step 1 must not read it.
  for (int64_t i = 0; i < 6; ++i)
    buf.as<float>()[i] = 1e30f;
  for (int64_t s = 1; s <= 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Buf g = scaledGrad(scales[s - 1]), step = stepTensor(s);
    Buf n2 = sumSquaresOf(g);
    RUN_OP_OK("sgd", attrsOf(h, false), {&g, &step, &n2}, {&p, &buf});
    expectTorch(p, torchParams[s - 1], kTorchUlps);
  }
  expectTorch(buf,
            {0.716719151, -1.41449487, 0.49044168, 1.13950574, -0.231689841,
             0.956527531},
            kTorchUlps);
}

TEST(CpuOptimizer, SumSquaresAndAccumulateEqualTorch) {
  Buf x = make(DType::F32, {6}, kP0), y = make(DType::F32, {2, 3}, kG0);
  Buf s = make(DType::F32, {});
  RUN_OP_OK("sum_squares", {}, {&x, &y}, {&s});
  expectTorch(s, {3.83000017}, 0);

  Buf acc = make(DType::F32, {6}, kP0), g = make(DType::F32, {6}, kG0);
  RUN_OP_OK("accumulate_grad", {}, {&g}, {&acc});
  expectTorch(acc, {0.800000012, -0.900000036, 1, -0.700000048, 0, 1.10000002},
              0);
}

//===----------------------------------------------------------------------===//
// Against the double reference
//===----------------------------------------------------------------------===//

/// `steps` AdamW steps on a tensor of `n` elements (threaded when large)
/// with fresh random gradients of the given element type.
void checkAdamW(const Hyper &h, int64_t n, int64_t steps, bool clipInput,
                DType gradType = DType::F32) {
  Buf p = random(DType::F32, {n}, -1, 1, 7), m = make(DType::F32, {n}),
      v = make(DType::F32, {n});
  std::vector<double> rp = values(p), rm(n, 0.0), rv(n, 0.0);
  for (int64_t s = 1; s <= steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Buf g = random(gradType, {n}, -0.05, 0.05, unsigned(100 + s));
    Buf step = stepTensor(s);
    Buf n2 = sumSquaresOf(g);
    Hyper ref = h;
    if (!clipInput)
      ref.maxNorm = 0;
    RUN_OP_OK("adamw", attrsOf(h, true),
              {&g, &step, clipInput ? &n2 : &absent()}, {&p, &m, &v});
    refAdamW(ref, s, values(g), rp, rm, rv);
  }
  expectAll(p, rp, 2e-5, 1e-6);
  expectAll(m, rm, 2e-5, 1e-7);
  expectAll(v, rv, 2e-5, 1e-9);
}

TEST(CpuOptimizer, AdamW) {
  Hyper h;
  h.lr = 3e-3;
  h.weightDecay = 0.1;
  h.maxNorm = 1.0;
  h.beta2 = 0.95;
  checkAdamW(h, 37, 3, true);
  checkAdamW(h, 100003, 4, true); // threaded; clipped (norm ~ 9)
  checkAdamW(h, 1000, 3, false);  // no sum_squares: not clipped
  h.maxNorm = 0;
  checkAdamW(h, 1000, 3, true); // max_norm 0: not clipped
  h.warmup = 3;
  h.decay = 6;
  h.minLr = 1e-4;
  checkAdamW(h, 5000, 8, true);
}

TEST(CpuOptimizer, AdamWSixteenBitGradients) {
  Hyper h;
  h.lr = 1e-2;
  h.maxNorm = 0.5;
  for (DType t : {DType::BF16, DType::F16})
    checkAdamW(h, 257, 3, true, t);
}

void checkSgd(const Hyper &h, int64_t n, int64_t steps) {
  Buf p = random(DType::F32, {n}, -1, 1, 7), buf = make(DType::F32, {n});
  std::vector<double> rp = values(p), rb(n, 0.0);
  for (int64_t s = 1; s <= steps; ++s) {
    Buf g = random(DType::F32, {n}, -0.05, 0.05, unsigned(100 + s));
    Buf step = stepTensor(s), n2 = sumSquaresOf(g);
    std::vector<Buf *> outs = {&p};
    if (h.momentum != 0)
      outs.push_back(&buf);
    RUN_OP_OK("sgd", attrsOf(h, false), {&g, &step, &n2}, outs);
    refSgd(h, s, values(g), rp, rb);
  }
  expectAll(p, rp, 1e-5, 1e-6);
  if (h.momentum != 0)
    expectAll(buf, rb, 1e-5, 1e-6);
}

TEST(CpuOptimizer, Sgd) {
  Hyper h;
  h.lr = 0.05;
  checkSgd(h, 100, 3); // plain
  h.momentum = 0.9;
  h.weightDecay = 0.01;
  h.maxNorm = 1.0;
  checkSgd(h, 100003, 4);
  h.warmup = 2;
  h.decay = 4;
  h.minLr = 0.01;
  checkSgd(h, 300, 6);
}

/// The learning rate each step uses, read off a plain SGD step of a zero
/// parameter with gradient 1: p = -lr_t.
TEST(CpuOptimizer, Schedule) {
  Hyper h;
  h.lr = 0.1;
  h.minLr = 0.01;
  h.warmup = 4;
  h.decay = 10;
  for (int64_t s = 1; s <= 14; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Buf p = make(DType::F32, {1}), g = make(DType::F32, {1}, {1.0});
    Buf step = stepTensor(s);
    RUN_OP_OK("sgd", attrsOf(h, false), {&g, &step, &absent()}, {&p});
    double want = s <= 4    ? 0.1 * double(s) / 4
                  : s <= 10 ? 0.01 + 0.09 * (1 + std::cos(M_PI * double(s - 5) /
                                                          6)) /
                                     2
                            : 0.01;
    expectAll(p, {-want}, 1e-7, 0);
  }
  // No decay: constant after the warmup.
  h.decay = 0;
  Buf p = make(DType::F32, {1}), g = make(DType::F32, {1}, {1.0});
  Buf step = stepTensor(100);
  RUN_OP_OK("sgd", attrsOf(h, false), {&g, &step, &absent()}, {&p});
  expectAll(p, {-0.1}, 1e-7, 0);
}

TEST(CpuOptimizer, SumSquares) {
  Buf a = random(DType::F32, {300, 1001}, -1, 1, 3),
      b = random(DType::BF16, {17}, -2, 2, 4),
      c = random(DType::F16, {5000}, -2, 2, 5);
  double want = 0;
  for (const Buf *x : {&a, &b, &c})
    for (double v : values(*x))
      want += v * v;
  Buf s = make(DType::F32, {});
  RUN_OP_OK("sum_squares", {}, {&a, &b, &c}, {&s});
  expectAll(s, {want}, 1e-7, 0);

  // The same bits whatever the number of threads.
  float first = s.as<float>()[0];
  int threads = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    Buf again = make(DType::F32, {});
    RUN_OP_OK("sum_squares", {}, {&a, &b, &c}, {&again});
    EXPECT_EQ(again.as<float>()[0], first) << t << " threads";
  }
  omp_set_num_threads(threads);

  Buf empty = make(DType::F32, {0});
  RUN_OP_OK("sum_squares", {}, {&empty}, {&s});
  EXPECT_EQ(s.as<float>()[0], 0.0f);
}

TEST(CpuOptimizer, AccumulateGrad) {
  Buf acc = random(DType::F32, {70000}, -1, 1, 1);
  Buf g = random(DType::F32, {70000}, -1, 1, 2);
  std::vector<double> want = values(acc);
  for (int64_t i = 0; i < g.size(); ++i)
    want[i] += g.at(i);
  RUN_OP_OK("accumulate_grad", {}, {&g}, {&acc});
  expectAll(acc, want, 1e-7, 1e-7);

  // 16-bit gradients into an f32 buffer, and 16-bit into 16-bit.
  for (DType t : {DType::BF16, DType::F16}) {
    Buf acc32 = make(DType::F32, {9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    Buf g16 = random(t, {9}, -1, 1, 3);
    std::vector<double> want32 = values(acc32);
    for (int64_t i = 0; i < 9; ++i)
      want32[i] += g16.at(i);
    RUN_OP_OK("accumulate_grad", {}, {&g16}, {&acc32});
    expectAll(acc32, want32, 1e-7, 0);
    Buf acc16 = random(t, {9}, -1, 1, 4);
    std::vector<double> want16 = values(acc16);
    for (int64_t i = 0; i < 9; ++i)
      want16[i] += g16.at(i);
    RUN_OP_OK("accumulate_grad", {}, {&g16}, {&acc16});
    expectAll(acc16, want16);
  }
}

//===----------------------------------------------------------------------===//
// Bad operands
//===----------------------------------------------------------------------===//

TEST(CpuOptimizer, Errors) {
  Hyper h;
  Attributes adamw = attrsOf(h, true), sgd = attrsOf(h, false);
  Buf p = make(DType::F32, {4}), m = make(DType::F32, {4}),
      v = make(DType::F32, {4}), g = make(DType::F32, {4});
  Buf step = stepTensor(1), n2 = make(DType::F32, {});

  Buf stepI32 = make(DType::I32, {}, {1});
  RUN_OP_ERROR("adamw: step must be an i64 scalar, got i32[]", "adamw", adamw,
               {&g, &stepI32, &n2}, {&p, &m, &v});
  Buf stepVector = make(DType::I64, {1}, {1});
  RUN_OP_ERROR("sgd: step must be an i64 scalar, got i64[1]", "sgd", sgd,
               {&g, &stepVector, &n2}, {&p});
  Buf stepZero = stepTensor(0);
  RUN_OP_ERROR("step is 0, expected the 1-based number", "adamw", adamw,
               {&g, &stepZero, &n2}, {&p, &m, &v});

  Buf p16 = make(DType::F16, {4}), m16 = make(DType::F16, {4});
  RUN_OP_ERROR("adamw: the parameter has element type f16, expected f32",
               "adamw", adamw, {&g, &step, &n2}, {&p16, &m, &v});
  RUN_OP_ERROR("sgd: the parameter has element type f16, expected f32", "sgd",
               sgd, {&g, &step, &n2}, {&p16});
  RUN_OP_ERROR("adamw: exp_avg has element type f16, expected f32", "adamw",
               adamw, {&g, &step, &n2}, {&p, &m16, &v});
  Buf v5 = make(DType::F32, {5});
  RUN_OP_ERROR("adamw: exp_avg_sq has shape [5], expected [4]", "adamw", adamw,
               {&g, &step, &n2}, {&p, &m, &v5});
  Buf g5 = make(DType::F32, {5});
  RUN_OP_ERROR("adamw: grad is f32[5], but the parameter is f32[4]", "adamw",
               adamw, {&g5, &step, &n2}, {&p, &m, &v});
  Buf g64 = make(DType::F64, {4});
  RUN_OP_ERROR("no kernel for element type f64 (grad)", "sgd", sgd,
               {&g64, &step, &n2}, {&p});
  Buf n2Vector = make(DType::F32, {1});
  RUN_OP_ERROR("adamw: sum_squares must be an f32 scalar, got f32[1]", "adamw",
               adamw, {&g, &step, &n2Vector}, {&p, &m, &v});
  RUN_OP_ERROR("adamw: got 2 results, expected 3", "adamw", adamw,
               {&g, &step, &n2}, {&p, &m});
  Attributes noLr = adamw;
  noLr.erase("lr");
  RUN_OP_ERROR("adamw: missing attribute 'lr'", "adamw", noLr,
               {&g, &step, &n2}, {&p, &m, &v});
  Attributes momentum = sgd;
  momentum["momentum"] = floatA(0.9);
  RUN_OP_ERROR("needs a momentum buffer as result 1", "sgd", momentum,
               {&g, &step, &n2}, {&p});
  RUN_OP_ERROR("a momentum buffer without momentum", "sgd", sgd,
               {&g, &step, &n2}, {&p, &m});
  RUN_OP_ERROR("sgd: got 3 results", "sgd", momentum, {&g, &step, &n2},
               {&p, &m, &v});
  RUN_OP_ERROR("sgd: operand 1 has no data", "sgd", sgd,
               {&g, &absent(), &n2}, {&p});

  Buf s64 = make(DType::F64, {});
  RUN_OP_ERROR("sum_squares: the result must be an f32 scalar, got f64[]",
               "sum_squares", {}, {&g}, {&s64});
  Buf ints = make(DType::I32, {3});
  RUN_OP_ERROR("sum_squares: no kernel for element type i32 (operand 1)",
               "sum_squares", {}, {&g, &ints}, {&n2});
  RUN_OP_ERROR("sum_squares: got 0 operands, expected at least 1",
               "sum_squares", {}, {}, {&n2});

  RUN_OP_ERROR("accumulate_grad: grad is f32[5], but the gradient buffer is "
               "f32[4]",
               "accumulate_grad", {}, {&g5}, {&p});
  Buf acc16 = make(DType::BF16, {4});
  RUN_OP_ERROR("cannot add a f32 gradient into a bf16 gradient buffer",
               "accumulate_grad", {}, {&g}, {&acc16});
}

} // namespace
