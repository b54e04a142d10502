//===- DropoutStream.cpp - a dropout kernel's plan from its attributes ----===//

#include "runtime/ops/DropoutStream.h"

#include <sstream>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

Status ops::dropoutPlan(const KernelArgs &a, DropoutPlan &plan) {
  const TensorRef &x = a.in(0);
  CLEAVE_CHECK(a.expectDType(a.out(), x.dtype, "the result"));
  CLEAVE_CHECK(a.expectShape(a.out(), x.shape, "the result"));
  int rank = int(x.shape.size());
  if (rank < 1 || rank > kDropoutMaxRank)
    return a.error("x has " + std::to_string(rank) +
                   " dimensions; expected 1 to " +
                   std::to_string(kDropoutMaxRank) +
                   " with samples along the first");
  double ratio;
  int64_t seed, step, first, samples;
  std::string stream;
  CLEAVE_CHECK(a.floatAttr("ratio", ratio));
  CLEAVE_CHECK(a.stringAttr("stream", stream, ""));
  CLEAVE_CHECK(a.intAttr("seed", seed));
  CLEAVE_CHECK(a.intAttr("step", step));
  CLEAVE_CHECK(a.intAttr("first_sample", first));
  CLEAVE_CHECK(a.intAttr("samples", samples));
  if (!(ratio > 0 && ratio < 1)) {
    std::ostringstream got;
    got << ratio;
    return a.error("ratio must be in (0, 1), got " + got.str());
  }
  if (stream.empty())
    return a.error("the stream name is empty");
  if (step < 0 || first < 0 || samples < 1)
    return a.error("step " + std::to_string(step) + ", first_sample " +
                   std::to_string(first) + " and samples " +
                   std::to_string(samples) +
                   " must be at least 0, 0 and 1 (the runtime sets them)");
  std::vector<int64_t> full = x.shape, offsets(rank, 0);
  if (a.hasAttr("full_shape")) {
    CLEAVE_CHECK(a.intsAttr("full_shape", full));
    CLEAVE_CHECK(a.intsAttr("offsets", offsets));
    if ((int)full.size() != rank || (int)offsets.size() != rank)
      return a.error("full_shape " + shapeString(full) + " and offsets " +
                     shapeString(offsets) + " must have x's " +
                     std::to_string(rank) + " dimensions");
    for (int d = 0; d < rank; ++d)
      if (offsets[d] < 0 || offsets[d] + x.shape[d] > full[d])
        return a.error("x " + shapeString(x.shape) + " at offsets " +
                       shapeString(offsets) + " is not inside full_shape " +
                       shapeString(full));
  }
  int64_t elements = 1;
  for (int64_t d : full)
    elements *= d;
  if (full[0] % samples != 0)
    return a.error("the full tensor's " + std::to_string(full[0]) +
                   " rows are not an equal number per sample of the " +
                   std::to_string(samples) + " of the microbatch");
  plan.key = splitmix64(streamKey(uint64_t(seed), stream) ^ uint64_t(step));
  plan.base = uint64_t(first) * uint64_t(elements / samples);
  plan.ratio = ratio;
  plan.scale = 1.0 / (1.0 - ratio);
  plan.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    plan.localShape[d] = x.shape[d];
    plan.offsets[d] = offsets[d];
    plan.fullStrides[d] = stride;
    stride *= full[d];
  }
  return Status::ok();
}
