//===- rotary.cpp - CPU kernel of rotary (rotate-half) --------------------===//
//
// y = x * cos + rotate_half(x) * sin per row of D = head_dim elements, with
// rotate_half(x) = concat(-x[D/2:], x[:D/2]); row r of x uses row r % T of
// the [T, D] tables. One pass over x, threaded over rows: the five ops the
// export spells it with read and write x's size five times.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelTable.h"

using namespace cleave::runtime;
using namespace cleave::runtime::cpu;
using namespace cleave::runtime::ops;

namespace {

template <typename T>
void rotate(const T *x, const T *cos, const T *sin, T *y, int64_t rows,
            int64_t seq, int64_t d) {
  using C = Compute<T>;
  int64_t half = d / 2;
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(d, 1));
  parallelRange(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = x + r * d;
      const T *c = cos + (r % seq) * d;
      const T *s = sin + (r % seq) * d;
      T *yr = y + r * d;
      for (int64_t i = 0; i < half; ++i)
        yr[i] = store<T>(C(load(xr[i])) * C(load(c[i])) -
                         C(load(xr[i + half])) * C(load(s[i])));
      for (int64_t i = half; i < d; ++i)
        yr[i] = store<T>(C(load(xr[i])) * C(load(c[i])) +
                         C(load(xr[i - half])) * C(load(s[i])));
    }
  });
}

} // namespace

Status cpu::rotaryKernel(const KernelArgs &a) {
  const TensorRef &x = a.in(0);
  if (x.rank() < 2 || x.shape.back() % 2 != 0)
    return a.error("x must be [..., seq, head_dim] with an even head_dim, "
                   "got " +
                   shapeString(x.shape));
  Shape table(x.shape.end() - 2, x.shape.end());
  CLEAVE_CHECK(a.expectShape(a.in(1), table, "cos"));
  CLEAVE_CHECK(a.expectShape(a.in(2), table, "sin"));
  CLEAVE_CHECK(a.expectDType(a.in(1), x.dtype, "cos"));
  CLEAVE_CHECK(a.expectDType(a.in(2), x.dtype, "sin"));
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int64_t d = x.shape.back(), seq = table[0];
  int64_t rows = d ? x.numElements() / d : 0;
  return visitFloat(a, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotate<T>(x.as<T>(), a.in(1).as<T>(), a.in(2).as<T>(), a.out().as<T>(),
              rows, seq, d);
    return Status::ok();
  });
}
