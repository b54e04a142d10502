//===- KernelArgs.cpp - attribute, shape and broadcasting helpers ---------===//
//
// Every backend's kernels read their attributes and check their shapes
// through these, so they say the same things about the same mistakes.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/KernelArgs.h"

#include <algorithm>
#include <cmath>

using namespace cleave::runtime;
using namespace cleave::runtime::ops;

std::string ops::shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

static const char *kindName(AttrValue::Kind kind) {
  switch (kind) {
  case AttrValue::Kind::Int:
    return "an integer";
  case AttrValue::Kind::Float:
    return "a float";
  case AttrValue::Kind::String:
    return "a string";
  case AttrValue::Kind::Ints:
    return "an integer array";
  }
  return "unknown";
}

static Status wrongKind(const KernelArgs &a, const char *name,
                        const AttrValue &v, const char *expected) {
  return a.error(std::string("attribute '") + name + "' is " +
                 kindName(v.kind) + ", expected " + expected);
}

Status KernelArgs::intAttr(const char *name, int64_t &value) const {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return error(std::string("missing attribute '") + name + "'");
  const AttrValue &v = it->second;
  if (v.kind == AttrValue::Kind::Int) {
    value = v.i;
    return Status::ok();
  }
  if (v.kind == AttrValue::Kind::Float && v.f == std::floor(v.f) &&
      std::fabs(v.f) < 9.0e18) {
    value = int64_t(v.f);
    return Status::ok();
  }
  return wrongKind(*this, name, v, "an integer");
}

Status KernelArgs::intAttr(const char *name, int64_t &value,
                           int64_t byDefault) const {
  if (!attrs.count(name)) {
    value = byDefault;
    return Status::ok();
  }
  return intAttr(name, value);
}

Status KernelArgs::floatAttr(const char *name, double &value) const {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return error(std::string("missing attribute '") + name + "'");
  const AttrValue &v = it->second;
  if (v.kind == AttrValue::Kind::Float) {
    value = v.f;
    return Status::ok();
  }
  if (v.kind == AttrValue::Kind::Int) {
    value = double(v.i);
    return Status::ok();
  }
  return wrongKind(*this, name, v, "a float");
}

Status KernelArgs::floatAttr(const char *name, double &value,
                             double byDefault) const {
  if (!attrs.count(name)) {
    value = byDefault;
    return Status::ok();
  }
  return floatAttr(name, value);
}

Status KernelArgs::stringAttr(const char *name, std::string &value,
                              const std::string &byDefault) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    value = byDefault;
    return Status::ok();
  }
  if (it->second.kind != AttrValue::Kind::String)
    return wrongKind(*this, name, it->second, "a string");
  value = it->second.s;
  return Status::ok();
}

Status KernelArgs::intsAttr(const char *name,
                            std::vector<int64_t> &value) const {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return error(std::string("missing attribute '") + name + "'");
  const AttrValue &v = it->second;
  if (v.kind == AttrValue::Kind::Ints) {
    value = v.ints;
    return Status::ok();
  }
  if (v.kind == AttrValue::Kind::Int) { // a one-element array
    value = {v.i};
    return Status::ok();
  }
  return wrongKind(*this, name, v, "an integer array");
}

Status KernelArgs::expectDType(const TensorRef &t, DType expected,
                               const char *what) const {
  if (t.dtype == expected)
    return Status::ok();
  return error(std::string(what) + " has element type " + dtypeName(t.dtype) +
               ", expected " + dtypeName(expected));
}

Status KernelArgs::expectShape(const TensorRef &t, const Shape &expected,
                               const char *what) const {
  if (t.shape == expected)
    return Status::ok();
  return error(std::string(what) + " has shape " + shapeString(t.shape) +
               ", expected " + shapeString(expected));
}

Status ops::normalizeAxis(const KernelArgs &a, int64_t &axis, int64_t rank,
                          const char *what) {
  if (axis < -rank || axis >= rank)
    return a.error(std::string(what) + " " + std::to_string(axis) +
                   " is out of range for rank " + std::to_string(rank));
  if (axis < 0)
    axis += rank;
  return Status::ok();
}

Shape ops::stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

int64_t ops::product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  auto last = shape.begin() + std::min(end, shape.size());
  for (auto it = shape.begin() + std::min(begin, shape.size()); it < last; ++it)
    n *= *it;
  return n;
}

bool ops::broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return false;
  return true;
}

bool ops::broadcastShapes(const Shape &a, const Shape &b, Shape &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    result[i] = da == 1 ? db : da;
  }
  return true;
}

BroadcastPlan ops::makeBroadcastPlan(const std::vector<Shape> &operands,
                                     const Shape &out) {
  size_t count = operands.size(), rank = out.size();
  // Per operand, the stride of each result dimension (0 where broadcast).
  std::vector<Shape> strides(count, Shape(rank, 0));
  for (size_t k = 0; k < count; ++k) {
    const Shape &s = operands[k];
    size_t lead = rank - s.size();
    Shape own = stridesOf(s);
    for (size_t i = 0; i < s.size(); ++i)
      strides[k][lead + i] = s[i] == 1 ? 0 : own[i];
  }
  return planFromStrides(out, strides);
}

BroadcastPlan ops::planFromStrides(const Shape &out,
                                   const std::vector<Shape> &strides) {
  size_t count = strides.size(), rank = out.size();
  // Drop dimensions of size 1, merge a dimension into the one after it when
  // every operand steps through both as one.
  Shape dims;
  std::vector<Shape> merged(count);
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1)
      continue;
    bool canMerge = !dims.empty();
    for (size_t k = 0; canMerge && k < count; ++k)
      canMerge = merged[k].back() == strides[k][d] * out[d];
    if (canMerge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < count; ++k)
        merged[k].back() = strides[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < count; ++k)
        merged[k].push_back(strides[k][d]);
    }
  }
  BroadcastPlan plan;
  plan.innerStride.assign(count, 0);
  plan.outerStrides.assign(count, Shape());
  if (dims.empty())
    return plan; // one element
  plan.inner = dims.back();
  for (size_t k = 0; k < count; ++k) {
    plan.innerStride[k] = merged[k].back();
    plan.outerStrides[k].assign(merged[k].begin(), merged[k].end() - 1);
  }
  plan.outerDims.assign(dims.begin(), dims.end() - 1);
  plan.rows = product(plan.outerDims);
  return plan;
}
