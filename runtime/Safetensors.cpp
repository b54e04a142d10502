//===- Safetensors.cpp - write tensors in the safetensors format ----------===//

#include "runtime/Safetensors.h"
#include "runtime/Json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

using namespace cleave::runtime;

const char *cleave::runtime::safetensorsDType(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::F64: return "F64";
  case DType::I64: return "I64";
  case DType::I32: return "I32";
  case DType::I16: return "I16";
  case DType::I8: return "I8";
  case DType::U8: return "U8";
  case DType::Bool: return "BOOL";
  case DType::U16: return "U16";
  case DType::U32: return "U32";
  case DType::U64: return "U64";
  case DType::Undefined: break;
  }
  return "UNKNOWN";
}

Status cleave::runtime::writeSafetensors(const std::string &path,
                                         std::vector<NamedTensor> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor &a, const NamedTensor &b) {
              return a.name < b.name;
            });
  std::string header = "{";
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor &t = tensors[i];
    if (i && t.name == tensors[i - 1].name)
      return Status::error(path + ": two tensors named '" + t.name + "'");
    std::string shape = "[";
    for (size_t d = 0; d < t.shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.shape[d]);
    shape += "]";
    header += (i ? "," : "") + jsonQuote(t.name) + ":{\"dtype\":\"" +
              safetensorsDType(t.dtype) + "\",\"shape\":" + shape +
              ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return Status::error(path + ": cannot write the parameters: " +
                         std::strerror(errno));
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = (uint64_t(header.size()) >> (8 * i)) & 0xff;
  out.write(reinterpret_cast<const char *>(length), 8);
  out.write(header.data(), header.size());
  for (const NamedTensor &t : tensors)
    out.write(t.bytes.data(), t.bytes.size());
  out.close();
  if (!out)
    return Status::error(path + ": writing the parameters failed");
  return Status::ok();
}
