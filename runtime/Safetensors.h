//===- Safetensors.h - write tensors in the safetensors format -*- C++ -*-===//
//
// The format of `cleave-run --save-params` (and models/safetensors_io.py):
// an 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}}
// padded with spaces to a multiple of 8, then the data, offsets relative to
// the end of the header. Tensors are written in sorted name order.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_SAFETENSORS_H
#define CLEAVE_RUNTIME_SAFETENSORS_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace cleave::runtime {

struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes; // row-major, little-endian
};

/// safetensors' name of a dtype ("F32", "BF16", "BOOL", ...).
const char *safetensorsDType(DType dtype);

/// Writes `tensors` to `path`; an error naming the path if it cannot.
Status writeSafetensors(const std::string &path,
                        std::vector<NamedTensor> tensors);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_SAFETENSORS_H
