//===- OnnxModel.cpp - ONNX files, tensors and attributes ----------------===//

#include "frontend/OnnxModel.h"
#include "frontend/OnnxShapes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace cleave;
using llvm::Expected;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

Expected<std::unique_ptr<onnx::ModelProto>>
cleave::readOnnxModel(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot read the model: " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    return fail("the file is empty, not an ONNX model");
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  stream.SetTotalBytesLimit(INT32_MAX);
  auto model = std::make_unique<onnx::ModelProto>();
  if (!model->ParseFromCodedStream(&stream) ||
      !stream.ConsumedEntireMessage()) {
    if (stream.CurrentPosition() >= (int)bytes.size())
      return fail(llvm::formatv("the file ends inside a protobuf record "
                                "after {0} bytes: a truncated ONNX model, or "
                                "not one at all; copy or export it again",
                                bytes.size()));
    return fail(llvm::formatv("not an ONNX model: protobuf parsing failed at "
                              "byte offset {0} of {1}",
                              stream.CurrentPosition(), bytes.size()));
  }
  // Arbitrary bytes sometimes parse as a protobuf with unknown fields; a real
  // model names an IR version, an opset and a graph.
  if (model->ir_version() <= 0 || model->opset_import_size() == 0 ||
      !model->has_graph())
    return fail("not an ONNX model (no ir_version, opset_import or "
                       "graph); export one with torch.onnx.export");
  return model;
}

int64_t cleave::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64: case DType::I64: case DType::U64: return 8;
  case DType::F32: case DType::I32: case DType::U32: return 4;
  case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
  default: return 1;
  }
}

/// Resolves an external-data location inside `modelDir`, refusing absolute
/// paths and any `..` that would leave the folder.
static Expected<std::string> resolveExternal(llvm::StringRef location,
                                             llvm::StringRef modelDir,
                                             llvm::StringRef tensorName) {
  if (location.empty())
    return fail("initializer '" + tensorName +
                "' has external data without a location");
  if (llvm::sys::path::is_absolute(location) || location.startswith("/") ||
      location.startswith("\\"))
    return fail("initializer '" + tensorName + "' has external data at the "
                "absolute path '" + location + "'; external data must lie "
                "in the model's folder (use a relative location)");
  for (auto it = llvm::sys::path::begin(location),
            end = llvm::sys::path::end(location);
       it != end; ++it)
    if (*it == "..")
      return fail("initializer '" + tensorName + "' has external data at '" +
                  location + "', which leaves the model's folder; external "
                  "data must lie in the model's folder");
  llvm::SmallString<256> full(modelDir);
  llvm::sys::path::append(full, location);
  return std::string(full);
}

/// An external_data `offset` or `length`: a decimal count of bytes.
static Expected<int64_t> externalCount(const std::string &value,
                                       llvm::StringRef key,
                                       llvm::StringRef tensorName) {
  int64_t n;
  if (llvm::StringRef(value).getAsInteger(10, n) || n < 0)
    return fail("initializer '" + tensorName + "': external data " + key +
                " '" + value + "' is not a count of bytes (a decimal "
                "integer >= 0); export the model again");
  return n;
}

/// Opens the external data file at `path` for reading, and returns its
/// descriptor and size. Only a regular file inside the model's folder, with
/// one name, is read: a symlink whose target leaves the folder, or a file
/// with several hard links (whose other names may lie anywhere, a system
/// file linked in among the weights), would copy a file from outside the
/// model into params.bin; a FIFO or device would block or never end.
static Expected<std::pair<int, uint64_t>>
openExternal(const std::string &path, llvm::StringRef modelDir,
             llvm::StringRef location, llvm::StringRef tensorName) {
  auto refuse = [&](const llvm::Twine &why) {
    return fail("initializer '" + tensorName + "': external data file '" +
                path + "' " + why);
  };
  char realDir[PATH_MAX], realFile[PATH_MAX];
  std::string dir = modelDir.str();
  if (!::realpath(dir.c_str(), realDir))
    return fail("initializer '" + tensorName + "': cannot resolve the "
                "model's folder '" + dir + "': " + std::strerror(errno));
  if (!::realpath(path.c_str(), realFile))
    return fail("initializer '" + tensorName +
                "': cannot read external data file '" + path +
                "': " + std::strerror(errno));
  llvm::StringRef inside(realFile), folder(realDir);
  if (!(inside.startswith(folder) &&
        (folder == "/" || inside.substr(folder.size()).startswith("/"))))
    return refuse("is a link to '" + inside + "', outside the model's "
                  "folder '" + folder + "'; external data must lie in the "
                  "model's folder (copy the file there instead of linking "
                  "it)");
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the checks on
  // the open descriptor then refuse it.
  int fd = ::open(realFile, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fail("initializer '" + tensorName +
                "': cannot read external data file '" + path +
                "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return fail("initializer '" + tensorName +
                "': cannot read external data file '" + path +
                "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char *kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a folder"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return refuse(llvm::Twine("is ") + kind + ", not a regular file; "
                  "external data must be a file of the model's folder");
  }
  if (st.st_nlink > 1) {
    ::close(fd);
    return refuse(llvm::formatv(
        "has {0} hard links; its other names may lie outside the model's "
        "folder (a file linked in from elsewhere), so it is not read; give "
        "'{1}' a name of its own (cp '{1}' tmp && mv tmp '{1}')",
        uint64_t(st.st_nlink), location));
  }
  return std::make_pair(fd, uint64_t(st.st_size));
}

Expected<std::optional<std::vector<char>>>
cleave::readTensorBytes(const onnx::TensorProto &tensor,
                        llvm::StringRef modelDir) {
  DType dtype = static_cast<DType>(tensor.data_type());
  if (!isSupported(dtype))
    return fail("tensor '" + tensor.name() + "' has unsupported element type " +
                dtypeName(dtype));
  llvm::ArrayRef<int64_t> dims(tensor.dims().data(), tensor.dims().size());
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return fail("tensor '" + tensor.name() + "' has a negative dimension");
    if (llvm::MulOverflow(count, d, count))
      return fail("tensor '" + tensor.name() + "' has shape " +
                  shapeToString(dims) +
                  ", more elements than a 64-bit count holds; export the model "
                  "again");
  }
  if (auto e = checkShape("tensor '" + tensor.name() + "'", dims))
    return std::move(e);
  int64_t size = dtypeSize(dtype);
  int64_t expected;
  if (llvm::MulOverflow(count, size, expected))
    return fail("tensor '" + tensor.name() + "' has shape " +
                shapeToString(dims) +
                ", more bytes than a 64-bit count holds; export the model "
                "again");
  std::vector<char> bytes;

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = expected;
    for (const auto &entry : tensor.external_data()) {
      if (entry.key() == "location") {
        location = entry.value();
      } else if (entry.key() == "offset" || entry.key() == "length") {
        auto n = externalCount(entry.value(), entry.key(), tensor.name());
        if (!n)
          return n.takeError();
        (entry.key() == "offset" ? offset : length) = *n;
      }
    }
    auto path = resolveExternal(location, modelDir, tensor.name());
    if (!path)
      return path.takeError();
    if (length != expected)
      return fail(llvm::formatv("initializer '{0}': external data length {1} "
                                "does not match its shape ({2} bytes)",
                                tensor.name(), length, expected));
    auto opened = openExternal(*path, modelDir, location, tensor.name());
    if (!opened)
      return opened.takeError();
    auto [fd, fileSize] = *opened;
    // offset and length are each below 2^63, so their sum fits in 64 bits.
    uint64_t end = uint64_t(offset) + uint64_t(length);
    if (end > fileSize) {
      ::close(fd);
      return fail(llvm::formatv("initializer '{0}': external data file '{1}' "
                                "has {2} bytes, but the tensor needs bytes "
                                "{3}..{4} (offset {3}, length {5})",
                                tensor.name(), *path, fileSize, offset, end,
                                length));
    }
    auto file = llvm::MemoryBuffer::getOpenFileSlice(
        fd, *path, length, offset, /*IsVolatile=*/false);
    ::close(fd);
    if (!file)
      return fail("initializer '" + tensor.name() +
                  "': cannot read external data file '" + *path +
                  "': " + file.getError().message());
    llvm::StringRef data = (*file)->getBuffer();
    bytes.assign(data.begin(), data.end());
    return std::optional<std::vector<char>>(std::move(bytes));
  }

  if (tensor.has_raw_data()) {
    if ((int64_t)tensor.raw_data().size() != expected)
      return fail(llvm::formatv("tensor '{0}' has {1} bytes of raw data, its "
                                "shape needs {2}",
                                tensor.name(), tensor.raw_data().size(),
                                expected));
    bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
    return std::optional<std::vector<char>>(std::move(bytes));
  }

  // Typed fields. Small types (bool, int8, float16 ...) travel in int32_data.
  auto copyFrom = [&](const auto &field) -> llvm::Error {
    if ((int64_t)field.size() != count)
      return fail(llvm::formatv("tensor '{0}' has {1} values, its shape needs "
                                "{2}",
                                tensor.name(), field.size(), count));
    bytes.resize(expected);
    for (int64_t i = 0; i < count; ++i) {
      auto v = field.Get(i);
      switch (dtype) {
      case DType::F32: { float f = v; std::memcpy(&bytes[i * 4], &f, 4); break; }
      case DType::F64: { double f = v; std::memcpy(&bytes[i * 8], &f, 8); break; }
      case DType::I64: case DType::U64: {
        int64_t x = v; std::memcpy(&bytes[i * 8], &x, 8); break; }
      case DType::I32: case DType::U32: {
        int32_t x = v; std::memcpy(&bytes[i * 4], &x, 4); break; }
      case DType::I16: case DType::U16: case DType::F16: case DType::BF16: {
        uint16_t x = v; std::memcpy(&bytes[i * 2], &x, 2); break; }
      default: { uint8_t x = v; bytes[i] = x; break; }
      }
    }
    return llvm::Error::success();
  };
  llvm::Error error = llvm::Error::success();
  switch (dtype) {
  case DType::F32:
    if (tensor.float_data_size() == 0 && count != 0)
      return std::optional<std::vector<char>>();
    error = copyFrom(tensor.float_data());
    break;
  case DType::F64:
    if (tensor.double_data_size() == 0 && count != 0)
      return std::optional<std::vector<char>>();
    error = copyFrom(tensor.double_data());
    break;
  case DType::I64:
    if (tensor.int64_data_size() == 0 && count != 0)
      return std::optional<std::vector<char>>();
    error = copyFrom(tensor.int64_data());
    break;
  case DType::U32: case DType::U64:
    if (tensor.uint64_data_size() == 0 && count != 0)
      return std::optional<std::vector<char>>();
    error = copyFrom(tensor.uint64_data());
    break;
  default:
    if (tensor.int32_data_size() == 0 && count != 0)
      return std::optional<std::vector<char>>();
    error = copyFrom(tensor.int32_data());
    break;
  }
  if (error)
    return std::move(error);
  return std::optional<std::vector<char>>(std::move(bytes));
}

/// Decodes a 16-bit float of either kind to double.
static double halfToDouble(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

Expected<HostTensor> cleave::decodeTensor(const onnx::TensorProto &tensor,
                                          llvm::StringRef modelDir) {
  auto bytes = readTensorBytes(tensor, modelDir);
  if (!bytes)
    return bytes.takeError();
  if (!*bytes)
    return fail("tensor '" + tensor.name() + "' carries no data");
  DType dtype = static_cast<DType>(tensor.data_type());
  llvm::SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  HostTensor out(dtype, shape);
  const char *p = (*bytes)->data();
  for (int64_t i = 0, n = out.numElements(); i < n; ++i) {
    switch (dtype) {
    case DType::F32: { float f; std::memcpy(&f, p + 4 * i, 4); out.setDouble(i, f); break; }
    case DType::F64: { double f; std::memcpy(&f, p + 8 * i, 8); out.setDouble(i, f); break; }
    case DType::F16: case DType::BF16: {
      uint16_t h; std::memcpy(&h, p + 2 * i, 2);
      out.setDouble(i, halfToDouble(h, dtype == DType::BF16)); break; }
    case DType::I64: case DType::U64: {
      int64_t x; std::memcpy(&x, p + 8 * i, 8); out.setInt(i, x); break; }
    case DType::I32: { int32_t x; std::memcpy(&x, p + 4 * i, 4); out.setInt(i, x); break; }
    case DType::U32: { uint32_t x; std::memcpy(&x, p + 4 * i, 4); out.setInt(i, x); break; }
    case DType::I16: { int16_t x; std::memcpy(&x, p + 2 * i, 2); out.setInt(i, x); break; }
    case DType::U16: { uint16_t x; std::memcpy(&x, p + 2 * i, 2); out.setInt(i, x); break; }
    case DType::I8: out.setInt(i, static_cast<int8_t>(p[i])); break;
    default: out.setInt(i, static_cast<uint8_t>(p[i])); break;
    }
  }
  return out;
}

const onnx::AttributeProto *cleave::findAttr(const onnx::NodeProto &node,
                                             llvm::StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t cleave::intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                        int64_t defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr ? attr->i() : defaultValue;
}

float cleave::floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                        float defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr ? attr->f() : defaultValue;
}

std::string cleave::stringAttr(const onnx::NodeProto &node,
                               llvm::StringRef name,
                               llvm::StringRef defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr ? attr->s() : std::string(defaultValue);
}

std::vector<int64_t> cleave::intsAttr(const onnx::NodeProto &node,
                                      llvm::StringRef name) {
  const auto *attr = findAttr(node, name);
  if (!attr)
    return {};
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}
