//===- Tensor.cpp - element types of the runtime --------------------------===//

#include "runtime/Tensor.h"
#include "runtime/ops/ElementTypes.h"

#include <cmath>

using namespace cleave::runtime;

size_t cleave::runtime::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64: case DType::I64: case DType::U64: return 8;
  case DType::F32: case DType::I32: case DType::U32: return 4;
  case DType::F16: case DType::BF16: case DType::I16: case DType::U16:
    return 2;
  case DType::I8: case DType::U8: case DType::Bool: return 1;
  case DType::Undefined: return 0;
  }
  return 0;
}

const char *cleave::runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "f32";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::F64: return "f64";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I16: return "i16";
  case DType::I8: return "i8";
  case DType::U8: return "u8";
  case DType::Bool: return "bool";
  case DType::U16: return "u16";
  case DType::U32: return "u32";
  case DType::U64: return "u64";
  case DType::Undefined: return "undefined";
  }
  return "undefined";
}

double cleave::runtime::loadElement(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32: return static_cast<const float *>(data)[i];
  case DType::F64: return static_cast<const double *>(data)[i];
  case DType::F16:
    return ops::halfToFloat(static_cast<const ops::Half *>(data)[i]);
  case DType::BF16:
    return ops::bf16ToFloat(static_cast<const ops::BFloat16 *>(data)[i]);
  case DType::I64: return double(static_cast<const int64_t *>(data)[i]);
  case DType::I32: return static_cast<const int32_t *>(data)[i];
  case DType::I16: return static_cast<const int16_t *>(data)[i];
  case DType::I8: return static_cast<const int8_t *>(data)[i];
  case DType::U8: return static_cast<const uint8_t *>(data)[i];
  case DType::Bool: return static_cast<const uint8_t *>(data)[i] != 0;
  case DType::U16: return static_cast<const uint16_t *>(data)[i];
  case DType::U32: return static_cast<const uint32_t *>(data)[i];
  case DType::U64: return double(static_cast<const uint64_t *>(data)[i]);
  case DType::Undefined: break;
  }
  return std::nan("");
}

void cleave::runtime::storeElement(void *data, DType dtype, int64_t i,
                                   double v) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(data)[i] = float(v); break;
  case DType::F64: static_cast<double *>(data)[i] = v; break;
  case DType::F16:
    static_cast<ops::Half *>(data)[i] = ops::floatToHalf(float(v));
    break;
  case DType::BF16:
    static_cast<ops::BFloat16 *>(data)[i] = ops::floatToBf16(float(v));
    break;
  case DType::I64: static_cast<int64_t *>(data)[i] = int64_t(v); break;
  case DType::I32: static_cast<int32_t *>(data)[i] = int32_t(v); break;
  case DType::I16: static_cast<int16_t *>(data)[i] = int16_t(v); break;
  case DType::I8: static_cast<int8_t *>(data)[i] = int8_t(v); break;
  case DType::U8: case DType::Bool:
    static_cast<uint8_t *>(data)[i] = uint8_t(v);
    break;
  case DType::U16: static_cast<uint16_t *>(data)[i] = uint16_t(v); break;
  case DType::U32: static_cast<uint32_t *>(data)[i] = uint32_t(v); break;
  case DType::U64: static_cast<uint64_t *>(data)[i] = uint64_t(v); break;
  case DType::Undefined: break;
  }
}
