//===- HostTensor.cpp - storage and conversions of host tensors ----------===//

#include "frontend/HostTensor.h"
#include "frontend/OnnxShapes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>

#include <unistd.h>

using namespace cleave;

bool cleave::isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::F64 ||
         t == DType::BF16;
}

bool cleave::isSupported(DType t) {
  switch (t) {
  case DType::F32: case DType::F16: case DType::F64: case DType::BF16:
  case DType::U8: case DType::I8: case DType::I16: case DType::I32:
  case DType::I64: case DType::Bool: case DType::U16: case DType::U32:
  case DType::U64:
    return true;
  default:
    return false;
  }
}

std::string cleave::dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "float32";
  case DType::F16: return "float16";
  case DType::F64: return "float64";
  case DType::BF16: return "bfloat16";
  case DType::U8: return "uint8";
  case DType::I8: return "int8";
  case DType::U16: return "uint16";
  case DType::I16: return "int16";
  case DType::I32: return "int32";
  case DType::I64: return "int64";
  case DType::U32: return "uint32";
  case DType::U64: return "uint64";
  case DType::Bool: return "bool";
  case DType::String: return "string";
  default: return "type " + std::to_string(static_cast<int>(t));
  }
}

HostTensor::HostTensor(DType dtype, llvm::ArrayRef<int64_t> shape)
    : type(dtype), dims(shape.begin(), shape.end()) {
  if (isFloat(dtype))
    floatData.assign(numElements(), 0.0);
  else
    intData.assign(numElements(), 0);
}

HostTensor HostTensor::scalarInt(int64_t v, DType dtype) {
  HostTensor t(dtype, {});
  t.setInt(0, v);
  return t;
}

HostTensor HostTensor::ints(llvm::ArrayRef<int64_t> values, DType dtype) {
  HostTensor t(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(i, values[i]);
  return t;
}

llvm::Error cleave::checkHostTensorSize(llvm::ArrayRef<int64_t> shape,
                                        int64_t limitBytes) {
  // value_too_large tells the importer to name the graph inputs the size
  // came from.
  auto tooLarge = [&](const llvm::Twine &why) {
    return llvm::createStringError(
        std::make_error_code(std::errc::value_too_large),
        "a constant of shape " + shapeToString(shape) + " " + why);
  };
  // The dimensions other than 0 too (checkShape in OnnxShapes.h): an empty
  // constant's other dimensions still enter shape arithmetic.
  int64_t count = 1, nonzero = 1, bytes;
  for (int64_t d : shape) {
    if (d < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "a constant of shape " +
                                         shapeToString(shape) +
                                         " has a negative dimension");
    if (d > kMaxDimension)
      return tooLarge("has a dimension above 2^40");
    if (d != 0 && (llvm::MulOverflow(nonzero, d, nonzero) ||
                   nonzero > (int64_t(1) << 62)))
      return tooLarge("has more elements than a 64-bit count holds");
    count *= d;
  }
  int64_t pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  int64_t memory = pages > 0 && pageSize > 0 ? pages * pageSize : INT64_MAX;
  const char *whose = "this machine's";
  if (limitBytes > 0 && limitBytes < memory) {
    memory = limitBytes;
    whose = "the import's limit of";
  }
  // Folding holds four copies at its peak: the HostTensor (8 bytes an
  // element), the flat indices of its two broadcast operands (8 each) and
  // the IR constant made from it.
  if (llvm::MulOverflow<int64_t>(count, 4 * 8, bytes) || bytes > memory)
    return tooLarge(llvm::formatv(
        "({0} elements) is computed while importing, but needs {1:F1} GiB, "
        "more than {3} {2:F1} GiB of memory",
        count, double(count) * 32 / (1 << 30), double(memory) / (1 << 30),
        whose));
  return llvm::Error::success();
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

int64_t HostTensor::getInt(int64_t i) const {
  if (!isFloating())
    return intData[i];
  double v = floatData[i];
  if (std::isnan(v))
    return 0;
  if (v >= 9.2e18)
    return INT64_MAX;
  if (v <= -9.2e18)
    return INT64_MIN;
  return static_cast<int64_t>(v);
}

double HostTensor::getDouble(int64_t i) const {
  return isFloating() ? floatData[i] : static_cast<double>(intData[i]);
}

/// Rounds to bfloat16 (round to nearest even), kept as a double.
static double roundToBF16(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f))
    return v;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Rounds to IEEE half precision (round to nearest even), kept as a double.
static double roundToF16(double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0)
    return v;
  double a = std::fabs(v);
  if (a >= 65520.0)
    return v > 0 ? INFINITY : -INFINITY;
  int exp;
  std::frexp(a, &exp); // a = m * 2^exp, m in [0.5, 1)
  // Half has 11 significant bits; subnormals below 2^-14 have a fixed step.
  int e = std::max(exp - 1, -14);
  double step = std::ldexp(1.0, e - 10);
  double r = std::nearbyint(a / step) * step;
  return v > 0 ? r : -r;
}

static int64_t wrapInt(int64_t v, DType t) {
  switch (t) {
  case DType::Bool: return v != 0;
  case DType::U8: return static_cast<uint8_t>(v);
  case DType::I8: return static_cast<int8_t>(v);
  case DType::U16: return static_cast<uint16_t>(v);
  case DType::I16: return static_cast<int16_t>(v);
  case DType::I32: return static_cast<int32_t>(v);
  case DType::U32: return static_cast<uint32_t>(v);
  default: return v;
  }
}

void HostTensor::setDouble(int64_t i, double v) {
  switch (type) {
  case DType::F32: floatData[i] = static_cast<float>(v); return;
  case DType::F64: floatData[i] = v; return;
  case DType::F16: floatData[i] = roundToF16(v); return;
  case DType::BF16: floatData[i] = roundToBF16(v); return;
  case DType::Bool: intData[i] = v != 0; return;
  default: break;
  }
  int64_t iv;
  if (std::isnan(v))
    iv = 0;
  else if (v >= 9.2e18)
    iv = INT64_MAX;
  else if (v <= -9.2e18)
    iv = INT64_MIN;
  else
    iv = static_cast<int64_t>(v); // truncation toward zero, as ONNX Cast
  intData[i] = wrapInt(iv, type);
}

void HostTensor::setInt(int64_t i, int64_t v) {
  if (isFloating())
    setDouble(i, static_cast<double>(v));
  else
    intData[i] = wrapInt(v, type);
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> out(numElements());
  for (int64_t i = 0; i < numElements(); ++i)
    out[i] = getInt(i);
  return out;
}

HostTensor HostTensor::castTo(DType dtype) const {
  HostTensor out(dtype, dims);
  for (int64_t i = 0; i < numElements(); ++i) {
    if (isFloating())
      out.setDouble(i, floatData[i]);
    else
      out.setInt(i, intData[i]);
  }
  return out;
}

HostTensor HostTensor::reshaped(llvm::ArrayRef<int64_t> shape) const {
  HostTensor out = *this;
  out.dims.assign(shape.begin(), shape.end());
  return out;
}

llvm::SmallVector<int64_t, 4> cleave::stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 4> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}
