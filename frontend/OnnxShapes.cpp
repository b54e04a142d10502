//===- OnnxShapes.cpp - ONNX shape rules ---------------------------------===//

#include "frontend/OnnxShapes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>

using namespace cleave;
using llvm::Expected;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string cleave::shapeToString(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return os.str();
}

Expected<int64_t> cleave::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return fail(llvm::formatv("axis {0} is out of range for rank {1}", axis,
                              rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<std::vector<int64_t>>
cleave::normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalizeAxis(a, rank);
    if (!n)
      return n.takeError();
    out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    return fail("axes contain a duplicate");
  return out;
}

Expected<Shape> cleave::reshapeTarget(llvm::ArrayRef<int64_t> input,
                                      llvm::ArrayRef<int64_t> requested,
                                      bool allowZero) {
  int64_t count = 1;
  for (int64_t d : input)
    if (llvm::MulOverflow(count, d, count))
      return fail("shape " + shapeToString(input) +
                  " has more elements than a 64-bit count");
  Shape out;
  int64_t inferAt = -1, known = 1;
  for (auto [i, requestedDim] : llvm::enumerate(requested)) {
    int64_t d = requestedDim;
    if (d == -1) {
      if (inferAt >= 0)
        return fail("shape " + shapeToString(requested) +
                    " has more than one -1");
      inferAt = i;
      out.push_back(1);
      continue;
    }
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return fail(llvm::formatv("shape entry {0} is 0 (copy), but the "
                                  "input has rank {1}",
                                  i, input.size()));
      d = input[i];
    }
    if (d < 0)
      return fail("shape " + shapeToString(requested) +
                  " has a negative entry");
    out.push_back(d);
    if (llvm::MulOverflow(known, d, known))
      return fail("shape " + shapeToString(requested) +
                  " has more elements than a 64-bit count");
  }
  if (inferAt >= 0) {
    if (known == 0 || count % known != 0)
      return fail("cannot reshape " + shapeToString(input) + " to " +
                  shapeToString(requested));
    out[inferAt] = count / known;
    known *= out[inferAt];
  }
  if (known != count)
    return fail(llvm::formatv("cannot reshape {0} ({1} elements) to {2} ({3} "
                              "elements)",
                              shapeToString(input), count,
                              shapeToString(out), known));
  if (auto e = checkShape("the reshaped value", out))
    return std::move(e);
  return out;
}

Expected<Shape> cleave::flattenShape(llvm::ArrayRef<int64_t> input,
                                     int64_t axis) {
  int64_t rank = input.size();
  // Unlike other axes, Flatten's may equal the rank, and a negative one
  // counts from the rank (not rank + 1).
  if (axis < -rank || axis > rank)
    return fail(llvm::formatv("axis {0} is out of range for rank {1}", axis,
                              rank));
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= input[d];
  return Shape{outer, inner};
}

Expected<Shape> cleave::unsqueezeShape(llvm::ArrayRef<int64_t> input,
                                       llvm::ArrayRef<int64_t> axes) {
  int64_t rank = input.size() + axes.size();
  auto normalized = normalizeAxes(axes, rank);
  if (!normalized)
    return normalized.takeError();
  Shape out;
  size_t next = 0, a = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (a < normalized->size() && (*normalized)[a] == d) {
      out.push_back(1);
      ++a;
    } else {
      out.push_back(input[next++]);
    }
  }
  return out;
}

Expected<Shape> cleave::squeezeShape(llvm::ArrayRef<int64_t> input,
                                     llvm::ArrayRef<int64_t> axes) {
  auto normalized = normalizeAxes(axes, input.size());
  if (!normalized)
    return normalized.takeError();
  Shape out;
  for (int64_t d = 0; d < (int64_t)input.size(); ++d) {
    bool listed = llvm::is_contained(*normalized, d);
    if (listed && input[d] != 1)
      return fail(llvm::formatv("cannot squeeze dimension {0} of size {1}", d,
                                input[d]));
    if (listed || (axes.empty() && input[d] == 1))
      continue;
    out.push_back(input[d]);
  }
  return out;
}

Expected<SliceBounds> cleave::sliceBounds(llvm::ArrayRef<int64_t> input,
                                          llvm::ArrayRef<int64_t> starts,
                                          llvm::ArrayRef<int64_t> ends,
                                          llvm::ArrayRef<int64_t> axes,
                                          llvm::ArrayRef<int64_t> steps) {
  int64_t rank = input.size();
  if (starts.size() != ends.size() ||
      (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size()))
    return fail("starts, ends, axes and steps have different lengths");
  SliceBounds b;
  for (int64_t d = 0; d < rank; ++d) {
    b.start.push_back(0);
    b.limit.push_back(input[d]);
    b.step.push_back(1);
  }
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis = normalizeAxis(axes.empty() ? (int64_t)i : axes[i], rank);
    if (!axis)
      return axis.takeError();
    if (seen[*axis])
      return fail(llvm::formatv("axis {0} is sliced twice", *axis));
    seen[*axis] = true;
    int64_t dim = input[*axis];
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0)
      return fail("slice step is 0");
    // Clamp as the ONNX spec does; negative values count from the end.
    auto adjust = [&](int64_t v) {
      if (v < 0)
        v = v <= INT64_MIN / 2 ? INT64_MIN / 2 : v + dim;
      return v;
    };
    int64_t start = adjust(starts[i]), end = adjust(ends[i]);
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      end = std::max(end, start);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      end = std::min(end, start);
      if (dim == 0)
        start = end = -1 + 1; // empty
    }
    b.start[*axis] = start;
    b.limit[*axis] = end;
    b.step[*axis] = step;
  }
  for (int64_t d = 0; d < rank; ++d) {
    int64_t extent = b.step[d] > 0 ? b.limit[d] - b.start[d]
                                   : b.start[d] - b.limit[d];
    int64_t stride = std::abs(b.step[d]);
    b.resultShape.push_back((extent + stride - 1) / stride);
  }
  return b;
}

Expected<std::vector<int64_t>>
cleave::splitSizes(int64_t dim, llvm::ArrayRef<int64_t> split,
                   int64_t numOutputs) {
  std::vector<int64_t> sizes;
  if (!split.empty()) {
    int64_t total = 0;
    for (int64_t s : split) {
      if (s < 0)
        return fail("split sizes must not be negative");
      total += s;
    }
    if (total != dim)
      return fail(llvm::formatv("split sizes add up to {0}, but the "
                                "dimension has size {1}",
                                total, dim));
    sizes.assign(split.begin(), split.end());
    return sizes;
  }
  if (numOutputs <= 0)
    return fail("split has no outputs");
  int64_t part = (dim + numOutputs - 1) / numOutputs;
  for (int64_t i = 0, left = dim; i < numOutputs; ++i) {
    sizes.push_back(std::min(part, left));
    left -= sizes.back();
  }
  return sizes;
}

llvm::Error cleave::checkShape(llvm::StringRef what,
                               llvm::ArrayRef<int64_t> shape) {
  int64_t product = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d < 0)
      return fail(llvm::formatv("{0} has shape {1}: dimension {2} is "
                                "negative",
                                what, shapeToString(shape), i));
    if (d > kMaxDimension)
      return fail(llvm::formatv("{0} has shape {1}: dimension {2} ({3}) is "
                                "more than the 2^40 a tensor may have; export "
                                "it with a smaller dimension {2}",
                                what, shapeToString(shape), i, d));
    if (d != 0 && (llvm::MulOverflow(product, d, product) ||
                   product > (int64_t(1) << 62)))
      return fail(llvm::formatv("{0} has shape {1}: its dimensions multiply "
                                "past 2^62 elements; export it with smaller "
                                "dimensions",
                                what, shapeToString(shape)));
  }
  return llvm::Error::success();
}

llvm::Error cleave::checkInputSize(llvm::StringRef name,
                                   llvm::ArrayRef<int64_t> shape,
                                   int64_t elementBytes) {
  int64_t bytes = elementBytes;
  for (auto [i, d] : llvm::enumerate(shape))
    if (llvm::MulOverflow(bytes, d, bytes))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("graph input '{0}' has shape {1}: dimension {2} ({3}) "
                        "makes its size overflow 64 bits of bytes, so no "
                        "memory plan can hold it; export it with a smaller "
                        "dimension {2}",
                        name, shapeToString(shape), i, d));
  return checkShape("graph input '" + name.str() + "'", shape);
}
