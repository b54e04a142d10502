//===- Parameters.cpp - a program's parameters: made, gathered, saved -----===//

#include "runtime/Parameters.h"
#include "runtime/Executor.h"
#include "runtime/Random.h"
#include "runtime/ProgramLoader.h"
#include "runtime/ops/KernelArgs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

using namespace cleave::runtime;
namespace pb = cleave::program;
using google::protobuf::RepeatedField;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// Appends plain values and strings to a byte string (gatherParameters).
struct ByteWriter {
  std::string bytes;
  template <typename T> void put(T v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  }
  void putString(const std::string &s) {
    put<uint64_t>(s.size());
    bytes += s;
  }
  void putInts(const RepeatedField<int64_t> &v) {
    put<uint64_t>(v.size());
    for (int64_t x : v)
      put(x);
  }
};

struct ByteReader {
  const std::string &bytes;
  size_t at = 0;
  bool ok = true;
  template <typename T> T get() {
    T v{};
    if (at + sizeof v > bytes.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string getString() {
    uint64_t n = get<uint64_t>();
    if (!ok || n > bytes.size() - at) {
      ok = false;
      return {};
    }
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
  RepeatedField<int64_t> getInts() {
    RepeatedField<int64_t> v;
    uint64_t n = get<uint64_t>();
    for (uint64_t i = 0; ok && i < n; ++i)
      v.Add(get<int64_t>());
    return v;
  }
};

} // namespace

double cleave::runtime::generatedNormal(uint64_t seed, const std::string &name,
                                        uint64_t k) {
  uint64_t key = streamKey(seed, name);
  double u1 = uniform53(key, 2 * k), u2 = uniform53(key, 2 * k + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

//===----------------------------------------------------------------------===//
// Parameters in
//===----------------------------------------------------------------------===//

std::vector<Box> cleave::runtime::parameterBoxes(const pb::Parameter &param) {
  std::vector<Box> boxes;
  for (const pb::Box &b : param.pieces())
    boxes.push_back({std::vector<int64_t>(b.start().begin(), b.start().end()),
                     std::vector<int64_t>(b.size().begin(), b.size().end())});
  if (boxes.empty())
    boxes.push_back({std::vector<int64_t>(param.slice_start().begin(),
                                          param.slice_start().end()),
                     std::vector<int64_t>(param.slice_size().begin(),
                                          param.slice_size().end())});
  return boxes;
}

std::vector<FlatRun> cleave::runtime::parameterRuns(const pb::Parameter &param) {
  std::vector<int64_t> shape(param.full_shape().begin(),
                             param.full_shape().end());
  int64_t flatStart = param.has_flat_range() ? param.flat_range().start() : 0;
  int64_t flatSize = param.has_flat_range() ? param.flat_range().size() : -1;
  if (shape.empty()) // a scalar: its one element
    return flatSize == 0 ? std::vector<FlatRun>{}
                         : std::vector<FlatRun>{{0, 0, 1}};
  return boxRuns(shape, parameterBoxes(param), param.pieces_axis(), flatStart,
                 flatSize);
}

/// A parameter's tensor: its slice (one box of the full tensor or several
/// concatenated), or with flat_range (sharded data parallelism) a range of
/// the slice's elements then zero padding. Only those elements are read
/// from the file or generated, the generator evaluated at each element's
/// index in the full tensor, so a slice equals that part of a one-rank
/// initialization and nothing the size of the whole is ever made (delayed
/// parameter initialization).
Status Runtime::initializeParameter(const pb::Parameter &param) {
  const TensorRef &t = tensors_[param.tensor()];
  std::string where = "parameters '" + param.name() + "'";
  size_t elementSize = dtypeSize(t.dtype);
  // Built in host memory, then written to the backend's.
  std::vector<char> host;
  char *out = static_cast<char *>(t.data);
  if (!backend_->hostMemory()) {
    host.assign(t.sizeBytes(), 0);
    out = host.data();
  }
  auto written = [&] {
    return host.empty() ? Status::ok() : writeTensor(param.tensor(), out);
  };
  std::memset(out, 0, t.sizeBytes());
  std::vector<FlatRun> runs = parameterRuns(param);
  if (param.has_file()) {
    std::string path = resolveProgramPath(directory_, param.file().path());
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return Status::error(where + ": cannot open " + path + ": " +
                           std::strerror(errno));
    for (const FlatRun &run : runs) {
      char *dst = out + run.local * elementSize;
      size_t want = run.count * elementSize;
      off_t from = param.file().offset() + run.full * elementSize;
      while (want) {
        ssize_t got = pread(fd, dst, want, from);
        if (got <= 0) {
          std::string why =
              got == 0 ? "unexpected end of file" : std::strerror(errno);
          close(fd);
          return Status::error(where + ": reading " + path + " at byte " +
                               str(from) + " failed: " + why);
        }
        dst += got;
        from += got;
        want -= size_t(got);
      }
    }
    close(fd);
    return written();
  }
  const std::string &generator = param.generator();
  if (generator == "zeros") {
  } else if (generator == "ones") {
    for (const FlatRun &run : runs)
      for (int64_t e = 0; e < run.count; ++e)
        storeElement(out, t.dtype, run.local + e, 1.0);
  } else if (generator.compare(0, 7, "normal:") == 0) {
    double stddev = std::strtod(generator.c_str() + 7, nullptr);
    for (const FlatRun &run : runs)
      for (int64_t e = 0; e < run.count; ++e)
        storeElement(out, t.dtype, run.local + e,
                     stddev * generatedNormal(param.seed(), param.name(),
                                              run.full + e));
  } else {
    return Status::error(where + ": unknown generator '" + generator + "'");
  }
  return written();
}

//===----------------------------------------------------------------------===//
// Parameters out
//===----------------------------------------------------------------------===//

Status Runtime::gatherParameters(std::vector<NamedTensor> &full) {
  full.clear();
  std::string slices;
  CLEAVE_CHECK(parameterSlices(slices));
  std::vector<std::string> all;
  CLEAVE_CHECK(comm_.gatherToRoot(slices, all));
  if (comm_.rank() != 0)
    return Status::ok();
  return assembleParameters(all, full);
}

Status Runtime::parameterSlices(std::string &slices) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  ByteWriter w;
  w.put<uint64_t>(program_.parameters_size());
  for (const pb::Parameter &p : program_.parameters()) {
    const TensorRef &t = tensors_[p.tensor()];
    w.putString(p.name());
    w.put<int32_t>(int32_t(t.dtype));
    w.putInts(p.full_shape());
    w.putInts(p.slice_start());
    w.putInts(p.slice_size());
    // A blocked slice: its boxes and their axis (none for one box).
    w.put<uint64_t>(p.pieces_size());
    for (const pb::Box &b : p.pieces()) {
      w.putInts(b.start());
      w.putInts(b.size());
    }
    w.put<int32_t>(p.pieces_axis());
    // A flat chunk (sharded data parallelism): its range, without padding;
    // -1 for a slice held whole.
    w.put<int64_t>(p.has_flat_range() ? p.flat_range().start() : -1);
    std::vector<char> bytes;
    CLEAVE_CHECK(readTensor(p.tensor(), bytes));
    if (p.has_flat_range()) {
      bytes.resize(size_t(p.flat_range().size()) * dtypeSize(t.dtype));
    } else {
      // A padded vocabulary: the slice's rows, without the padding's.
      size_t elements = 1;
      for (int64_t d : p.slice_size())
        elements *= size_t(d);
      bytes.resize(std::min(bytes.size(), elements * dtypeSize(t.dtype)));
    }
    w.putString(std::string(bytes.begin(), bytes.end()));
  }
  slices = std::move(w.bytes);
  return Status::ok();
}

Status cleave::runtime::assembleParameters(const std::vector<std::string> &all,
                                           std::vector<NamedTensor> &full) {
  full.clear();
  struct Assembled {
    NamedTensor tensor;
    std::vector<char> covered;
  };
  std::map<std::string, Assembled> byName;
  for (size_t r = 0; r < all.size(); ++r) {
    ByteReader in{all[r]};
    uint64_t count = in.get<uint64_t>();
    for (uint64_t i = 0; in.ok && i < count; ++i) {
      std::string name = in.getString();
      DType dtype = DType(in.get<int32_t>());
      RepeatedField<int64_t> fullShape = in.getInts();
      RepeatedField<int64_t> start = in.getInts();
      RepeatedField<int64_t> size = in.getInts();
      std::vector<Box> boxes;
      for (uint64_t b = 0, n = in.get<uint64_t>(); in.ok && b < n; ++b) {
        RepeatedField<int64_t> boxStart = in.getInts(), boxSize = in.getInts();
        boxes.push_back({{boxStart.begin(), boxStart.end()},
                         {boxSize.begin(), boxSize.end()}});
      }
      int axis = in.get<int32_t>();
      int64_t flatStart = in.get<int64_t>();
      std::string bytes = in.getString();
      if (!in.ok)
        break;
      auto [it, fresh] = byName.try_emplace(name);
      Assembled &a = it->second;
      int64_t elements = 1;
      for (int64_t d : fullShape)
        elements *= d;
      std::vector<int64_t> shape(fullShape.begin(), fullShape.end());
      if (fresh) {
        a.tensor.name = name;
        a.tensor.dtype = dtype;
        a.tensor.shape = shape;
        a.tensor.bytes.assign(elements * dtypeSize(dtype), '\0');
        a.covered.assign(elements, 0);
      } else if (a.tensor.dtype != dtype || a.tensor.shape != shape) {
        return Status::error("parameter '" + name + "': rank " + str(r) +
                             " holds a slice of a tensor of another type or "
                             "shape than another rank");
      }
      // Where the slice (or its flat range) lies in the full tensor; the
      // loader checked the boxes of this program, and every rank's
      // program is this compile's.
      size_t elementSize = dtypeSize(dtype);
      std::vector<FlatRun> runs =
          shape.empty()
              ? std::vector<FlatRun>{{0, 0, 1}}
              : sliceRuns(shape, {start.begin(), start.end()},
                          {size.begin(), size.end()}, boxes, axis,
                          flatStart >= 0 ? flatStart : 0,
                          flatStart >= 0
                              ? int64_t(bytes.size() / elementSize)
                              : -1);
      for (const FlatRun &run : runs) {
        if (run.full < 0 || run.count > elements - run.full ||
            (run.local + run.count) * int64_t(elementSize) >
                int64_t(bytes.size()))
          return Status::error("parameter '" + name + "': rank " + str(r) +
                               " holds elements past its end");
        // Replicas (data-parallel ranks, a sub-axis's ranks) hold the same
        // bytes; the first rank holding an element gives it, as a
        // checkpoint export does.
        for (int64_t e = 0; e < run.count;) {
          int64_t end = e;
          while (end < run.count && !a.covered[run.full + end])
            ++end;
          std::memcpy(&a.tensor.bytes[(run.full + e) * elementSize],
                      &bytes[(run.local + e) * elementSize],
                      (end - e) * elementSize);
          std::fill_n(a.covered.begin() + run.full + e, end - e, 1);
          while (end < run.count && a.covered[run.full + end])
            ++end;
          e = end;
        }
      }
    }
    if (!in.ok)
      return Status::error("the parameters rank " + str(r) +
                           " sent are malformed");
  }
  for (auto &[name, a] : byName) {
    if (std::find(a.covered.begin(), a.covered.end(), 0) != a.covered.end())
      return Status::error("parameter '" + name +
                           "': part of it is held by no rank");
    full.push_back(std::move(a.tensor));
  }
  return Status::ok();
}

Status Runtime::saveParameters(const std::string &path) {
  std::vector<NamedTensor> full;
  CLEAVE_CHECK(gatherParameters(full));
  if (comm_.rank() != 0)
    return Status::ok();
  return writeSafetensors(path, std::move(full));
}
