//===- RotaryKernelTest.cpp - CPU kernel of rotary against a reference ----===//
//
// rotary(x, cos, sin) against the five ops the Llama export spells it with,
// computed in double: x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

using namespace cleave::runtime;
using namespace cleave::runtime::test;

namespace {

std::vector<double> rotaryRef(const Buf &x, const Buf &cos, const Buf &sin) {
  int64_t d = x.shape.back(), seq = x.shape[x.shape.size() - 2];
  int64_t half = d / 2, rows = x.size() / d;
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < d; ++i) {
      double rotated = i < half ? -x.at(r * d + i + half) : x.at(r * d + i - half);
      int64_t t = (r % seq) * d + i;
      want[r * d + i] = x.at(r * d + i) * cos.at(t) + rotated * sin.at(t);
    }
  return want;
}

void checkRotary(Shape xs, DType t = DType::F32) {
  SCOPED_TRACE(ops::shapeString(xs) + " " + dtypeName(t));
  Shape table(xs.end() - 2, xs.end());
  Buf x = random(t, xs, -1, 1, 1), cos = random(t, table, -1, 1, 2),
      sin = random(t, table, -1, 1, 3);
  Buf out = make(t, xs);
  RUN_OK("rotary", {}, {&x, &cos, &sin}, out);
  expectAll(out, rotaryRef(x, cos, sin));
}

TEST(CpuRotary, Shapes) {
  checkRotary({2, 4, 8, 16});   // [B, H, T, D]
  checkRotary({1, 2, 32, 64});  // Llama toy's heads
  checkRotary({3, 2});          // [T, D] alone
  checkRotary({2, 8, 300, 128}); // threaded over rows
}

TEST(CpuRotary, OtherFloatTypes) {
  for (DType t : {DType::F64, DType::F16, DType::BF16})
    checkRotary({2, 3, 8}, t);
}

TEST(CpuRotary, Errors) {
  Buf x = make(DType::F32, {2, 8, 15}), c = make(DType::F32, {8, 15});
  Buf out = make(DType::F32, {2, 8, 15});
  RUN_ERROR("rotary: x must be [..., seq, head_dim] with an even head_dim, "
            "got [2, 8, 15]",
            "rotary", {}, {&x, &c, &c}, out);
  Buf y = make(DType::F32, {2, 8, 16}), small = make(DType::F32, {4, 16});
  Buf out2 = make(DType::F32, {2, 8, 16});
  RUN_ERROR("rotary: cos has shape [4, 16], expected [8, 16]", "rotary", {},
            {&y, &small, &small}, out2);
}

} // namespace
