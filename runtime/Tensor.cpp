//===- Tensor.cpp - element types of the runtime --------------------------===//

#include "runtime/Tensor.h"

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
