//===- Checkpoint.cpp - training checkpoints: save, find, resume ----------===//
//
// Saving: every rank copies its state to host memory at the step boundary;
// a writer thread writes rank-<r>.bin to a temporary name, hashing as it
// writes, fsyncs it and renames it while training goes on; later, on the
// main thread, the ranks agree that all succeeded and rank 0 gathers their
// entries and writes manifest.json the same way, last.
// Loading, in any layout: every rank plans the slices it holds by name and
// box (planSlice), streams the files they lie in with their SHA-256 checked
// (readSlices), and the ranks agree that all succeeded and that every
// tensor of the checkpoint is held by one of them before any memory is
// written.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Crc32c.h"
#include "runtime/Executor.h"
#include "runtime/Sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <vector>

using namespace cleave::runtime;
namespace pb = cleave::program;

struct Runtime::StateTensor {
  int id = -1;
  std::string name;
  const char *kind = "parameter"; // or "optimizer_state"
  std::vector<int64_t> fullShape, sliceStart, sliceSize;
  // A blocked tensor-parallel slice (Parameter.pieces): these boxes
  // concatenated along boxesAxis.
  std::vector<Box> boxes;
  int boxesAxis = 0;
  // ZeRO-1's optimizer state: the slice's elements [flatStart, flatStart +
  // flatSize) first, then padding, which checkpoints leave out.
  int64_t flatStart = 0, flatSize = -1;
  DType dtype = DType::F32;
  uint64_t bytes = 0; // the tensor's, padding included
};

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string ints(const std::vector<int64_t> &v) { return formatInts(v); }

std::string errnoText() { return std::strerror(errno); }

/// `size` lowercase hex digits, as the writer gives a checksum.
bool isHex(const std::string &text, size_t size) {
  return text.size() == size &&
         text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

/// A piece's own check, over its bytes fed in order: its CRC-32C, or the
/// SHA-256 of a manifest from before them.
class PieceCheck {
public:
  explicit PieceCheck(const CheckpointPiece &piece) : piece_(&piece) {}
  void update(const char *data, size_t size) {
    if (piece_->crc32c.empty())
      sha_.update(data, size);
    else
      crc_.update(data, size);
  }
  /// Empty when the bytes match the manifest; else "have CRC-32C x, the
  /// manifest says y". Once: the check is spent after it.
  std::string mismatch() {
    bool crc = !piece_->crc32c.empty();
    std::string actual = crc ? crc_.hexDigest() : sha_.hexDigest();
    const std::string &expected = crc ? piece_->crc32c : piece_->sha256;
    if (actual == expected)
      return "";
    return std::string("have ") + (crc ? "CRC-32C " : "SHA-256 ") + actual +
           ", the manifest says " + expected;
  }

private:
  const CheckpointPiece *piece_;
  Sha256 sha_;
  Crc32c crc_;
};

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

Status makeFolder(const std::string &path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error(
        path + ": cannot create the checkpoint folder: " + errnoText());
  return Status::ok();
}

Status syncFolder(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return Status::error(path + ": cannot open to sync: " + errnoText());
  int rc = fsync(fd);
  close(fd);
  if (rc != 0)
    return Status::error(path + ": fsync failed: " + errnoText());
  return Status::ok();
}

/// O_DIRECT's alignment of memory, file offset and size (4096 covers
/// every logical block size Linux file systems use).
constexpr uintptr_t kDirectAlign = 4096;

/// Writes pieces to `path` through `path`.tmp: write, fsync, rename, fsync
/// the folder. `produce` is called with a sink until it returns false.
/// `direct`: the file is opened with O_DIRECT, so that what is page-aligned
/// in a piece goes from memory to the disk without a copy into the page
/// cache (the kernel's copy was a third of a save's CPU time); the rest of
/// a piece, and every piece where the file system refuses O_DIRECT (tmpfs),
/// is written through the page cache.
template <typename Produce>
Status writeAtomically(const std::string &folder, const std::string &name,
                       Produce &&produce, bool direct = false) {
  std::string path = folder + "/" + name, temp = path + ".tmp";
  int flags = O_WRONLY | O_CREAT | O_TRUNC;
  int fd = direct ? open(temp.c_str(), flags | O_DIRECT, 0644) : -1;
  if (fd < 0) {
    direct = false;
    fd = open(temp.c_str(), flags, 0644);
  }
  if (fd < 0)
    return Status::error(temp + ": cannot create: " + errnoText());
  auto buffered = [&] {
    if (direct && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) == 0)
      direct = false;
    return !direct;
  };
  uint64_t offset = 0;
  auto writeAll = [&](const char *p, size_t size) -> Status {
    while (size) {
      ssize_t n = write(fd, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      // O_DIRECT refused for this write (a file system with larger
      // blocks): the page cache takes it and the rest.
      if (n < 0 && errno == EINVAL && direct && buffered())
        continue;
      if (n <= 0)
        return Status::error(temp + ": write failed: " + errnoText());
      p += n;
      size -= size_t(n);
      offset += uint64_t(n);
    }
    return Status::ok();
  };
  Status status = produce([&](const void *data, size_t size) -> Status {
    const char *p = static_cast<const char *>(data);
    if (direct && reinterpret_cast<uintptr_t>(p) % kDirectAlign == 0 &&
        offset % kDirectAlign == 0) {
      size_t aligned = size & ~size_t(kDirectAlign - 1);
      CLEAVE_CHECK(writeAll(p, aligned));
      p += aligned;
      size -= aligned;
    }
    if (size && direct && !buffered())
      return Status::error(temp + ": cannot leave O_DIRECT: " + errnoText());
    return writeAll(p, size);
  });
  if (status && fsync(fd) != 0)
    status = Status::error(temp + ": fsync failed: " + errnoText());
  if (close(fd) != 0 && status)
    status = Status::error(temp + ": close failed: " + errnoText());
  if (status && rename(temp.c_str(), path.c_str()) != 0)
    status =
        Status::error(temp + ": cannot rename to " + path + ": " + errnoText());
  if (!status) {
    unlink(temp.c_str());
    return status;
  }
  return syncFolder(folder);
}

/// Reads `path` in chunks of at most `chunkBytes`: `sized(bytes)` first,
/// with the size fstat reports (its error stops the read), then
/// `consume(offset, data, size)` per chunk.
Status
streamFile(const std::string &path, uint64_t chunkBytes,
           const std::function<Status(uint64_t)> &sized,
           const std::function<void(uint64_t, const char *, size_t)> &consume) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Status::error(path + ": cannot stat: " + errnoText());
  }
  uint64_t size = uint64_t(st.st_size);
  Status status = sized(size);
  std::vector<char> chunk(size_t(std::min(size, chunkBytes)));
  uint64_t done = 0;
  while (status && done < size) {
    size_t want = size_t(std::min<uint64_t>(chunk.size(), size - done));
    ssize_t n = read(fd, chunk.data(), want);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      status = Status::error(path + ": read failed at byte " +
                             str(int64_t(done)) + ": " +
                             (n == 0 ? "unexpected end of file" : errnoText()));
      break;
    }
    consume(done, chunk.data(), size_t(n));
    done += uint64_t(n);
  }
  close(fd);
  return status;
}

Status readWhole(const std::string &path, std::string &bytes) {
  bytes.clear();
  return streamFile(
      path, uint64_t(1) << 30,
      [&](uint64_t size) {
        bytes.reserve(size_t(size));
        return Status::ok();
      },
      [&](uint64_t, const char *data, size_t n) { bytes.append(data, n); });
}

/// The complete checkpoints of `root` (a step-S folder with a manifest) and
/// the unfinished ones, by step.
void listCheckpoints(const std::string &root, std::map<int64_t, bool> &steps) {
  DIR *dir = opendir(root.c_str());
  if (!dir)
    return;
  while (dirent *e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.compare(0, 5, "step-") != 0 || name.size() == 5)
      continue;
    char *end = nullptr;
    long long step = std::strtoll(name.c_str() + 5, &end, 10);
    if (*end || step < 0)
      continue;
    steps[step] = exists(root + "/" + name + "/manifest.json");
  }
  closedir(dir);
}

Status removeTree(const std::string &path) {
  // First the manifest: from then on the folder is not a checkpoint.
  std::string manifest = path + "/manifest.json";
  if (unlink(manifest.c_str()) != 0 && errno != ENOENT)
    return Status::error(manifest + ": cannot remove: " + errnoText());
  DIR *dir = opendir(path.c_str());
  if (!dir)
    return Status::error(path + ": cannot open to remove: " + errnoText());
  std::vector<std::string> names;
  while (dirent *e = readdir(dir))
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
      names.push_back(path + "/" + e->d_name);
  closedir(dir);
  for (const std::string &name : names)
    if (unlink(name.c_str()) != 0)
      return Status::error(name + ": cannot remove: " + errnoText());
  if (rmdir(path.c_str()) != 0)
    return Status::error(path + ": cannot remove: " + errnoText());
  return Status::ok();
}

const char *dtypeText(DType dtype) { return safetensorsDType(dtype); }

/// Integer member `key` of `v`, or an error naming where.
bool intMember(const JsonValue &v, const char *key, int64_t &out) {
  const JsonValue *m = v.find(key);
  // Range first: converting a double out of int64's range is undefined.
  if (!m || m->kind != JsonValue::Kind::Number ||
      !(std::fabs(m->number) < 9.2e18))
    return false;
  out = int64_t(m->number);
  return double(out) == m->number;
}

bool intsMember(const JsonValue &v, const char *key,
                std::vector<int64_t> &out) {
  const JsonValue *m = v.find(key);
  if (!m || m->kind != JsonValue::Kind::Array)
    return false;
  out.clear();
  for (const JsonValue &x : m->array) {
    if (x.kind != JsonValue::Kind::Number || !(std::fabs(x.number) < 9.2e18))
      return false;
    out.push_back(int64_t(x.number));
  }
  return true;
}

/// Why `boxes` concatenated along `axis` are not a slice of size `size` of
/// a tensor of `shape` without overlap; empty when they are.
std::string boxesMisfit(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &size,
                        const std::vector<Box> &boxes, int axis) {
  size_t rank = shape.size();
  if (axis < 0 || size_t(axis) >= rank || size.size() != rank)
    return "boxes_axis " + str(axis) + " is not an axis of " + ints(shape);
  int64_t along = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box &b = boxes[i];
    std::string what = "box " + str(int64_t(i)) + " (from " + ints(b.start) +
                       " of size " + ints(b.size) + ")";
    if (b.start.size() != rank || b.size.size() != rank)
      return what + " has not the " + str(int64_t(rank)) + " axes of " +
             ints(shape);
    for (size_t d = 0; d < rank; ++d) {
      if (b.start[d] < 0 || b.size[d] < 1 || b.start[d] > shape[d] - b.size[d])
        return what + " does not lie in " + ints(shape);
      if (d != size_t(axis) && b.size[d] != size[d])
        return what + " is not " + str(size[d]) + " wide in axis " +
               str(int64_t(d)) + " as its slice " + ints(size);
    }
    along += b.size[axis];
    for (size_t j = 0; j < i; ++j) {
      bool overlap = true;
      for (size_t d = 0; d < rank; ++d)
        overlap &= b.start[d] < boxes[j].start[d] + boxes[j].size[d] &&
                   boxes[j].start[d] < b.start[d] + b.size[d];
      if (overlap)
        return what + " overlaps box " + str(int64_t(j)) + " (from " +
               ints(boxes[j].start) + " of size " + ints(boxes[j].size) + ")";
    }
  }
  if (along != size[axis])
    return "its boxes concatenated along axis " + str(axis) + " are " +
           str(along) + " long, its slice " + ints(size) + " " +
           str(size[axis]);
  return "";
}

std::string stringMember(const JsonValue &v, const char *key) {
  const JsonValue *m = v.find(key);
  return m && m->kind == JsonValue::Kind::String ? m->string : std::string();
}

} // namespace

std::string cleave::runtime::checkpointFolder(const std::string &root,
                                              int64_t step) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/')
    r.pop_back();
  return r + "/step-" + str(step);
}

Status cleave::runtime::findCheckpoint(const std::string &path,
                                       std::string &folder) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  if (exists(p + "/manifest.json")) {
    folder = p;
    return Status::ok();
  }
  if (!exists(p))
    return Status::error(p + ": no such checkpoint folder");
  std::string base = p.substr(p.rfind('/') + 1);
  if (base.compare(0, 5, "step-") == 0)
    return Status::error(p + "/manifest.json: missing: the save of this "
                             "step did not complete, so it is not a "
                             "checkpoint; resume from the checkpoint folder "
                             "to take the newest complete one");
  std::map<int64_t, bool> steps;
  listCheckpoints(p, steps);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (it->second) {
      folder = checkpointFolder(p, it->first);
      return Status::ok();
    }
  return Status::error(
      p +
      ": no complete checkpoint in it (a step-S folder "
      "with a manifest.json)" +
      (steps.empty() ? std::string() : "; only unfinished saves"));
}

Status cleave::runtime::removeOldCheckpoints(const std::string &root,
                                             int64_t keep) {
  std::map<int64_t, bool> steps;
  listCheckpoints(root, steps);
  int64_t kept = 0, newest = -1;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (!it->second)
      continue;
    newest = std::max(newest, it->first);
    if (++kept > keep)
      CLEAVE_CHECK(removeTree(checkpointFolder(root, it->first)));
  }
  for (auto &[step, complete] : steps)
    if (!complete && step < newest)
      CLEAVE_CHECK(removeTree(checkpointFolder(root, step)));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Reading by name and box
//===----------------------------------------------------------------------===//

namespace {

bool dtypeFromText(const std::string &text, DType &dtype) {
  for (int d = int(DType::F32); d <= int(DType::U64); ++d)
    if (text == safetensorsDType(DType(d))) {
      dtype = DType(d);
      return true;
    }
  return false;
}

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace

int64_t CheckpointPiece::elements() const {
  return flatSize >= 0 ? flatSize : elementsOf(sliceSize);
}

std::vector<FlatRun> cleave::runtime::flatRuns(
    const std::vector<int64_t> &shape, const std::vector<int64_t> &start,
    const std::vector<int64_t> &size, int64_t flatStart, int64_t flatSize) {
  std::vector<FlatRun> runs;
  int64_t elements = elementsOf(size);
  int64_t begin = flatSize >= 0 ? flatStart : 0;
  int64_t end = flatSize >= 0 ? flatStart + flatSize : elements;
  if (begin >= end)
    return runs;
  // The box is blocks of `block` elements consecutive in the full tensor:
  // its trailing axes that span the tensor, and the one before them.
  size_t rank = shape.size();
  size_t k = rank;
  int64_t block = 1;
  while (k > 0) {
    --k;
    block *= size[k];
    if (size[k] != shape[k])
      break;
  }
  std::vector<int64_t> fullStride(rank, 1);
  for (size_t d = rank; d-- > 1;)
    fullStride[d - 1] = fullStride[d] * shape[d];
  std::vector<int64_t> index(rank, 0);
  for (int64_t b = begin / block; b * block < end; ++b) {
    // The block's index over the axes before k, then its first element.
    int64_t rest = b, full = 0;
    for (size_t d = k; d-- > 0;) {
      full += (start[d] + rest % size[d]) * fullStride[d];
      rest /= size[d];
    }
    for (size_t d = k; d < rank; ++d)
      full += start[d] * fullStride[d];
    int64_t lo = std::max(begin, b * block),
            hi = std::min(end, b * block + block);
    runs.push_back({full + lo - b * block, lo - begin, hi - lo});
  }
  return runs;
}

std::vector<FlatRun> cleave::runtime::boxRuns(const std::vector<int64_t> &shape,
                                              const std::vector<Box> &boxes,
                                              int axis, int64_t flatStart,
                                              int64_t flatSize) {
  std::vector<FlatRun> runs;
  if (boxes.empty() || axis < 0 || size_t(axis) >= shape.size())
    return runs;
  // The concatenation is `outer` rows (the axes before `axis`, the same in
  // every box) of `along` indices of `axis` of `inner` elements each (the
  // axes after it, the same too); box b's part of a row is
  // b.size[axis] * inner elements consecutive in it, from its offset.
  int64_t inner = 1, outer = 1, along = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    if (d < size_t(axis))
      outer *= boxes[0].size[d];
    else if (d > size_t(axis))
      inner *= boxes[0].size[d];
  for (const Box &b : boxes)
    along += b.size[axis];
  int64_t row = along * inner;
  int64_t begin = flatSize >= 0 ? flatStart : 0;
  int64_t end = flatSize >= 0 ? flatStart + flatSize : outer * row;
  int64_t offset = 0;
  for (const Box &b : boxes) {
    int64_t part = b.size[axis] * inner;
    for (const FlatRun &r : flatRuns(shape, b.start, b.size, 0, -1)) {
      // Cut the box's run where it leaves the box's part of a row.
      for (int64_t at = r.local, full = r.full, left = r.count; left > 0;) {
        int64_t within = at % part, n = std::min(left, part - within);
        int64_t local = at / part * row + offset * inner + within;
        int64_t lo = std::max(local, begin), hi = std::min(local + n, end);
        if (lo < hi)
          runs.push_back({full + lo - local, lo - begin, hi - lo});
        at += n;
        full += n;
        left -= n;
      }
    }
    offset += b.size[axis];
  }
  std::sort(runs.begin(), runs.end(), [](const FlatRun &a, const FlatRun &b) {
    return a.local < b.local;
  });
  // Runs consecutive in both orders are one (a box that is one block).
  std::vector<FlatRun> merged;
  for (const FlatRun &r : runs)
    if (!merged.empty() &&
        merged.back().local + merged.back().count == r.local &&
        merged.back().full + merged.back().count == r.full)
      merged.back().count += r.count;
    else
      merged.push_back(r);
  return merged;
}

std::vector<FlatRun> cleave::runtime::sliceRuns(
    const std::vector<int64_t> &shape, const std::vector<int64_t> &start,
    const std::vector<int64_t> &size, const std::vector<Box> &boxes, int axis,
    int64_t flatStart, int64_t flatSize) {
  if (boxes.empty())
    return flatRuns(shape, start, size, flatStart, flatSize);
  std::vector<FlatRun> runs = boxRuns(shape, boxes, axis, flatStart, flatSize);
  std::sort(runs.begin(), runs.end(),
            [](const FlatRun &a, const FlatRun &b) { return a.full < b.full; });
  return runs;
}

int64_t cleave::runtime::forEachSharedRun(
    const std::vector<FlatRun> &a, const std::vector<FlatRun> &b,
    const std::function<void(int64_t, int64_t, int64_t)> &f) {
  int64_t shared = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t aEnd = a[i].full + a[i].count, bEnd = b[j].full + b[j].count;
    int64_t lo = std::max(a[i].full, b[j].full), hi = std::min(aEnd, bEnd);
    if (lo < hi) {
      f(a[i].local + lo - a[i].full, b[j].local + lo - b[j].full, hi - lo);
      shared += hi - lo;
    }
    if (aEnd <= bEnd)
      ++i;
    else
      ++j;
  }
  return shared;
}

uint64_t CheckpointTensor::fullBytes() const {
  return uint64_t(elementsOf(shape)) * dtypeSize(dtype);
}

std::string cleave::runtime::formatInts(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string cleave::runtime::describeLayout(int64_t w, int64_t d, int64_t p,
                                            int64_t t) {
  return str(w) + (w == 1 ? " rank" : " ranks") + " (data " + str(d) +
         ", pipeline " + str(p) + ", tensor " + str(t) + ")";
}

std::string CheckpointManifest::describeLayout() const {
  return cleave::runtime::describeLayout(worldSize, dataDegree, pipelineDegree,
                                         tensorDegree);
}

Status cleave::runtime::readCheckpointManifest(const std::string &folder,
                                               CheckpointManifest &m) {
  m = CheckpointManifest();
  m.folder = folder;
  std::string path = m.manifestPath(), text, error;
  CLEAVE_CHECK(readWhole(path, text));
  JsonValue json;
  if (!parseJson(text, json, error))
    return Status::error(path + ": not valid JSON: " + error);
  if (stringMember(json, "format") != "cleave-checkpoint" ||
      !intMember(json, "version", m.version) ||
      !intMember(json, "step", m.step) || m.step < 0)
    return Status::error(path + ": not a cleave checkpoint manifest "
                                "(format, version or step missing)");
  if (m.version > kCheckpointVersion)
    return Status::error(path + ": version " + str(m.version) +
                         " is newer than this cleave-run reads (" +
                         str(kCheckpointVersion) +
                         "); resume with the cleave-run that wrote it");
  m.model = stringMember(json, "model");
  const JsonValue *layout = json.find("layout");
  if (!layout || !intMember(*layout, "world_size", m.worldSize) ||
      !intMember(*layout, "data_degree", m.dataDegree) ||
      !intMember(*layout, "pipeline_degree", m.pipelineDegree) ||
      !intMember(*layout, "tensor_degree", m.tensorDegree) || m.worldSize < 1)
    return Status::error(path + ": the layout is missing or incomplete");
  if (const JsonValue *d = json.find("data")) {
    m.dataPath = stringMember(*d, "path");
    if (!intMember(*d, "tokens", m.tokens))
      m.tokens = -1;
    if (!intMember(*d, "global_batch", m.globalBatch))
      m.globalBatch = -1;
    if (!intMember(*d, "seq_len", m.seqLen))
      m.seqLen = -1;
  }
  const JsonValue *ranks = json.find("ranks");
  if (!ranks || ranks->kind != JsonValue::Kind::Array ||
      int64_t(ranks->array.size()) != m.worldSize)
    return Status::error(path + ": expected one entry per rank of the " +
                         m.describeLayout() + " in \"ranks\"");
  for (const JsonValue &r : ranks->array) {
    CheckpointRank rank;
    int64_t bytes = 0;
    if (!intMember(r, "rank", rank.rank) ||
        rank.rank != int64_t(m.ranks.size()))
      return Status::error(path + ": entry " + str(int64_t(m.ranks.size())) +
                           " of \"ranks\" is not rank " +
                           str(int64_t(m.ranks.size())));
    std::string which = path + ": rank " + str(rank.rank);
    intMember(r, "data_rank", rank.dataRank);
    intMember(r, "pipeline_rank", rank.pipelineRank);
    intMember(r, "tensor_rank", rank.tensorRank);
    rank.file = stringMember(r, "file");
    rank.sha256 = stringMember(r, "sha256");
    if (rank.file.empty() || rank.file.find('/') != std::string::npos ||
        rank.file == "." || rank.file == ".." ||
        !intMember(r, "bytes", bytes) || bytes < 0 || rank.sha256.size() != 64)
      return Status::error(which +
                           "'s file, size or sha256 is missing or malformed");
    rank.bytes = uint64_t(bytes);
    const JsonValue *ls = r.find("loss_scaler");
    const JsonValue *scale = ls ? ls->find("scale") : nullptr;
    if (!intMember(r, "optimizer_steps", rank.optimizerSteps) || !scale ||
        scale->kind != JsonValue::Kind::Number ||
        !intMember(*ls, "hysteresis", rank.scaler.hysteresis) ||
        !intMember(*ls, "good_steps", rank.scaler.goodSteps))
      return Status::error(which +
                           "'s optimizer_steps or loss_scaler is missing");
    rank.scaler.scale = scale->number;
    // Absent in the first version-1 manifests: every rank counts.
    const JsonValue *trains = r.find("trains");
    rank.trains =
        !trains || trains->kind != JsonValue::Kind::Bool || trains->boolean;
    const JsonValue *list = r.find("tensors");
    if (!list || list->kind != JsonValue::Kind::Array)
      return Status::error(which + " lists no tensors");
    int rankIndex = int(m.ranks.size());
    for (const JsonValue &t : list->array) {
      std::string name = stringMember(t, "name");
      std::string kind = stringMember(t, "kind");
      std::string dtypeText = stringMember(t, "dtype");
      std::vector<int64_t> shape;
      CheckpointPiece piece;
      piece.rankIndex = rankIndex;
      int64_t offset = 0, pieceBytes = 0;
      DType dtype = DType::Undefined;
      if (name.empty() || !intsMember(t, "shape", shape) ||
          !intsMember(t, "slice_start", piece.sliceStart) ||
          !intsMember(t, "slice_size", piece.sliceSize) ||
          !intMember(t, "offset", offset) ||
          !intMember(t, "bytes", pieceBytes) ||
          !dtypeFromText(dtypeText, dtype))
        return Status::error(which + ": tensor '" + name + "' is malformed");
      // Version 3: several boxes concatenated along an axis (a blocked
      // tensor-parallel slice); slice_start is then the first box's start.
      if (const JsonValue *list = t.find("boxes")) {
        int64_t axis = 0;
        bool ok = list->kind == JsonValue::Kind::Array &&
                  !list->array.empty() && intMember(t, "boxes_axis", axis);
        for (size_t i = 0; ok && i < list->array.size(); ++i) {
          Box box;
          ok = intsMember(list->array[i], "start", box.start) &&
               intsMember(list->array[i], "size", box.size);
          piece.boxes.push_back(std::move(box));
        }
        if (!ok)
          return Status::error(which + ": tensor '" + name +
                               "': boxes is not a list of {start, size} "
                               "with a boxes_axis");
        piece.boxesAxis = int(axis);
        std::string misfit =
            boxesMisfit(shape, piece.sliceSize, piece.boxes, piece.boxesAxis);
        if (misfit.empty() && piece.sliceStart != piece.boxes[0].start)
          misfit = "slice_start " + ints(piece.sliceStart) +
                   " is not its first box's start";
        if (!misfit.empty())
          return Status::error(which + ": tensor '" + name + "': " + misfit);
      }
      bool inside = piece.sliceStart.size() == shape.size() &&
                    piece.sliceSize.size() == shape.size();
      int64_t elements = 1;
      for (size_t d = 0; inside && d < shape.size(); ++d) {
        inside &= shape[d] >= 0 && piece.sliceSize[d] >= 0 &&
                  piece.sliceStart[d] >= 0 &&
                  (!piece.boxes.empty() ||
                   piece.sliceStart[d] + piece.sliceSize[d] <= shape[d]) &&
                  piece.sliceSize[d] <= shape[d] &&
                  piece.sliceSize[d] < (int64_t(1) << 40);
        elements *= inside ? piece.sliceSize[d] : 1;
      }
      if (!inside)
        return Status::error(which + ": tensor '" + name + "': slice at " +
                             ints(piece.sliceStart) + " of size " +
                             ints(piece.sliceSize) + " does not lie in " +
                             ints(shape));
      // Version 2: only a flat range of the box (ZeRO-1's state).
      if (t.find("flat_range")) {
        std::vector<int64_t> range;
        if (!intsMember(t, "flat_range", range) || range.size() != 2 ||
            range[0] < 0 || range[1] < 0 || range[0] > elements - range[1])
          return Status::error(which + ": tensor '" + name +
                               "': flat_range is not [start, size] within "
                               "its slice's " +
                               str(elements) + " elements");
        piece.flatStart = range[0];
        piece.flatSize = elements = range[1];
      }
      if (t.find("sha256")) {
        piece.sha256 = stringMember(t, "sha256");
        if (!isHex(piece.sha256, 64))
          return Status::error(which + ": tensor '" + name +
                               "': sha256 is not 64 hex digits");
      }
      if (t.find("crc32c")) {
        piece.crc32c = stringMember(t, "crc32c");
        if (!isHex(piece.crc32c, 8))
          return Status::error(which + ": tensor '" + name +
                               "': crc32c is not 8 hex digits");
      }
      if (pieceBytes != elements * int64_t(dtypeSize(dtype)) || offset < 0 ||
          uint64_t(offset) + uint64_t(pieceBytes) > rank.bytes)
        return Status::error(which + ": tensor '" + name + "': its bytes [" +
                             str(offset) + ", " + str(offset + pieceBytes) +
                             ") are not its slice's or do not fit " +
                             rank.file + "'s " + str(bytes));
      piece.offset = uint64_t(offset);
      piece.bytes = uint64_t(pieceBytes);
      auto [it, fresh] = m.tensors.try_emplace(name);
      CheckpointTensor &tensor = it->second;
      if (fresh) {
        tensor.name = name;
        tensor.kind = kind;
        tensor.dtype = dtype;
        tensor.shape = shape;
      } else if (tensor.dtype != dtype || tensor.shape != shape) {
        return Status::error(which + ": tensor '" + name + "' is " + dtypeText +
                             " " + ints(shape) + ", rank " +
                             str(tensor.pieces.front().rankIndex) + "'s is " +
                             safetensorsDType(tensor.dtype) + " " +
                             ints(tensor.shape));
      } else if (!tensor.pieces.empty() &&
                 tensor.pieces.back().rankIndex == rankIndex) {
        return Status::error(which + ": tensor '" + name + "' twice");
      }
      tensor.pieces.push_back(std::move(piece));
    }
    m.ranks.push_back(std::move(rank));
  }
  return Status::ok();
}

Status cleave::runtime::streamCheckpointFile(
    const CheckpointManifest &m, int rankIndex,
    const std::function<void(uint64_t, const char *, size_t)> &consume) {
  const CheckpointRank &rank = m.ranks[rankIndex];
  std::string path = m.filePath(rankIndex);
  Sha256 hash;
  // Each tensor's own check, where the manifest has one: a flipped byte is
  // then named by its tensor, not only its file.
  struct Checked {
    const std::string *name;
    const CheckpointPiece *piece;
    PieceCheck check;
  };
  std::vector<Checked> pieces;
  for (auto &[name, t] : m.tensors)
    for (const CheckpointPiece &p : t.pieces)
      if (p.rankIndex == rankIndex && p.hasOwnCheck())
        pieces.push_back({&name, &p, PieceCheck(p)});
  std::sort(pieces.begin(), pieces.end(),
            [](const Checked &a, const Checked &b) {
              return a.piece->offset < b.piece->offset;
            });
  size_t first = 0; // pieces before it end before the chunk
  // When the tensors' SHA-256s cover every byte of the file (what a writer
  // of them wrote: the file is its tensors), they say all the file's
  // would: it is not computed again (a second pass over every byte). Their
  // CRC-32Cs do not: the file's SHA-256 is checked with them.
  uint64_t coveredTo = 0;
  for (const Checked &c : pieces)
    if (!c.piece->sha256.empty() && c.piece->offset <= coveredTo)
      coveredTo = std::max(coveredTo, c.piece->offset + c.piece->bytes);
  bool fileHash = coveredTo < rank.bytes;
  // 64 MiB: a read is cheap next to hashing it, and leaves no trace in the
  // memory of a rank.
  CLEAVE_CHECK(streamFile(
      path, uint64_t(64) << 20,
      [&](uint64_t size) {
        if (size == rank.bytes)
          return Status::ok();
        return Status::error(path + ": " + str(int64_t(size)) +
                             " bytes, the manifest says " +
                             str(int64_t(rank.bytes)) +
                             ": the file is truncated or was replaced");
      },
      [&](uint64_t at, const char *data, size_t size) {
        if (fileHash)
          hash.update(data, size);
        while (first < pieces.size() &&
               pieces[first].piece->offset + pieces[first].piece->bytes <= at)
          ++first;
        for (size_t i = first;
             i < pieces.size() && pieces[i].piece->offset < at + size; ++i) {
          const CheckpointPiece &p = *pieces[i].piece;
          uint64_t begin = std::max(at, p.offset);
          uint64_t end = std::min(at + size, p.offset + p.bytes);
          if (begin < end)
            pieces[i].check.update(data + (begin - at), size_t(end - begin));
        }
        consume(at, data, size);
      }));
  for (Checked &c : pieces) {
    std::string mismatch = c.check.mismatch();
    if (!mismatch.empty())
      return Status::error(
          path + ": bytes [" + str(int64_t(c.piece->offset)) + ", " +
          str(int64_t(c.piece->offset + c.piece->bytes)) + ") of tensor '" +
          *c.name + "' " + mismatch + ": the file is corrupt");
  }
  if (!fileHash)
    return Status::ok();
  std::string actual = hash.hexDigest();
  if (actual != rank.sha256)
    return Status::error(path + ": SHA-256 " + actual +
                         " does not match the manifest's " + rank.sha256 +
                         ": the file is corrupt");
  return Status::ok();
}

namespace {

/// A piece to read and the name of its tensor (for errors).
struct NamedPiece {
  const std::string *name;
  const CheckpointPiece *piece;
};

/// Reads only `pieces` of rank file `rankIndex` (every one with its own
/// check in the manifest), each in chunks handed to `consume(offset,
/// data, size)`, and checks the file's size before and each piece's
/// CRC-32C (or SHA-256) after it is read: a rank that needs one tensor of a
/// file reads that tensor's bytes, not the file. Errors name the file, the
/// tensor and its bytes, as streamCheckpointFile's.
Status readCheckpointPieces(
    const CheckpointManifest &m, int rankIndex, std::vector<NamedPiece> pieces,
    const std::function<void(uint64_t, const char *, size_t)> &consume) {
  const CheckpointRank &rank = m.ranks[rankIndex];
  std::string path = m.filePath(rankIndex);
  std::sort(pieces.begin(), pieces.end(),
            [](const NamedPiece &a, const NamedPiece &b) {
              return a.piece->offset < b.piece->offset;
            });
  pieces.erase(std::unique(pieces.begin(), pieces.end(),
                           [](const NamedPiece &a, const NamedPiece &b) {
                             return a.piece == b.piece;
                           }),
               pieces.end());
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0)
    return Status::error(path + ": cannot stat: " + errnoText());
  if (uint64_t(st.st_size) != rank.bytes)
    return Status::error(
        path + ": " + str(int64_t(st.st_size)) + " bytes, the manifest says " +
        str(int64_t(rank.bytes)) + ": the file is truncated or was replaced");
  uint64_t largest = 0;
  for (const NamedPiece &p : pieces)
    largest = std::max(largest, p.piece->bytes);
  // 64 MiB, as a whole file's stream.
  std::vector<char> chunk(
      size_t(std::min<uint64_t>(largest, uint64_t(64) << 20)));
  for (const NamedPiece &p : pieces) {
    const CheckpointPiece &piece = *p.piece;
    PieceCheck check(piece);
    uint64_t done = 0;
    while (done < piece.bytes) {
      size_t want =
          size_t(std::min<uint64_t>(chunk.size(), piece.bytes - done));
      ssize_t n = pread(fd, chunk.data(), want, off_t(piece.offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return Status::error(
            path + ": read failed at byte " +
            str(int64_t(piece.offset + done)) + " (tensor '" + *p.name +
            "'): " + (n == 0 ? "unexpected end of file" : errnoText()));
      check.update(chunk.data(), size_t(n));
      consume(piece.offset + done, chunk.data(), size_t(n));
      done += uint64_t(n);
    }
    std::string mismatch = check.mismatch();
    if (!mismatch.empty())
      return Status::error(path + ": bytes [" + str(int64_t(piece.offset)) +
                           ", " + str(int64_t(piece.offset + piece.bytes)) +
                           ") of tensor '" + *p.name + "' " + mismatch +
                           ": the file is corrupt");
  }
  return Status::ok();
}

} // namespace

Status cleave::runtime::planSlice(const CheckpointManifest &m,
                                  int preferredRank, SliceRequest &request) {
  const CheckpointTensor &t = *request.tensor;
  request.pieces.clear();
  bool inside = request.start.size() == t.shape.size() &&
                request.size.size() == t.shape.size();
  if (!request.boxes.empty()) {
    std::string misfit = inside ? boxesMisfit(t.shape, request.size,
                                              request.boxes, request.boxesAxis)
                                : std::string();
    if (!misfit.empty())
      return Status::error(
          m.manifestPath() + ": tensor '" + t.name + "' is " + ints(t.shape) +
          " in the checkpoint; the slice asked for: " + misfit);
  }
  for (size_t d = 0; inside && d < t.shape.size(); ++d)
    inside &= request.start[d] >= 0 && request.size[d] >= 0 &&
              (!request.boxes.empty() ||
               request.start[d] + request.size[d] <= t.shape[d]);
  int64_t boxElements = inside ? elementsOf(request.size) : 0;
  if (inside && request.flatSize >= 0)
    inside = request.flatStart >= 0 &&
             request.flatStart <= boxElements - request.flatSize;
  std::string range = request.flatSize < 0
                          ? std::string()
                          : " (its elements [" + str(request.flatStart) + ", " +
                                str(request.flatStart + request.flatSize) +
                                "))";
  if (!inside)
    return Status::error(
        m.manifestPath() + ": tensor '" + t.name + "' is " + ints(t.shape) +
        " in the checkpoint, which has no slice at " + ints(request.start) +
        " of size " + ints(request.size) + range);
  int64_t elements = request.flatSize >= 0 ? request.flatSize : boxElements;
  if (elements == 0)
    return Status::ok();
  std::vector<FlatRun> wanted =
      sliceRuns(t.shape, request.start, request.size, request.boxes,
                request.boxesAxis, request.flatStart, request.flatSize);
  std::vector<std::vector<FlatRun>> held;
  for (const CheckpointPiece &p : t.pieces)
    held.push_back(sliceRuns(t.shape, p.sliceStart, p.sliceSize, p.boxes,
                             p.boxesAxis, p.flatStart, p.flatSize));
  auto nothing = [](int64_t, int64_t, int64_t) {};
  // One piece that holds it all: the common case of replicas.
  const CheckpointPiece *whole = nullptr;
  for (size_t i = 0; i < t.pieces.size(); ++i)
    if ((!whole || t.pieces[i].rankIndex == preferredRank) &&
        forEachSharedRun(wanted, held[i], nothing) == elements)
      whole = &t.pieces[i];
  if (whole) {
    request.pieces.push_back(whole);
    return Status::ok();
  }
  // Pieces that together cover it (a split tensor, ZeRO-1's ranges), each
  // adding something.
  std::vector<char> covered(size_t(elements), 0);
  int64_t left = elements;
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    int64_t added = 0;
    forEachSharedRun(wanted, held[i], [&](int64_t at, int64_t, int64_t n) {
      for (int64_t e = at; e < at + n; ++e)
        if (!covered[e]) {
          covered[e] = 1;
          ++added;
        }
    });
    if (added)
      request.pieces.push_back(&t.pieces[i]);
    left -= added;
  }
  if (left)
    return Status::error(
        m.manifestPath() + ": tensor '" + t.name + "': " + str(left) +
        " elements of the slice at " + ints(request.start) + " of size " +
        ints(request.size) + range + " are held by no rank of the checkpoint");
  return Status::ok();
}

Status cleave::runtime::readSlices(const CheckpointManifest &m,
                                   std::vector<SliceRequest> &requests,
                                   bool everyFile) {
  // Where each piece's bytes go as the file streams by: straight into the
  // request when the piece is exactly its box, else into a copy of the
  // piece that is cut into the box once the file is verified.
  struct Use {
    SliceRequest *request;
    const CheckpointPiece *piece;
    char *direct = nullptr;
    std::string buffer;
  };
  std::map<int, std::vector<Use>> byFile;
  for (SliceRequest &r : requests) {
    int64_t elements = r.flatSize >= 0 ? r.flatSize : elementsOf(r.size);
    r.bytes.assign(size_t(elements) * dtypeSize(r.tensor->dtype), '\0');
    for (const CheckpointPiece *p : r.pieces)
      byFile[p->rankIndex].push_back({&r, p});
  }
  if (everyFile)
    for (size_t r = 0; r < m.ranks.size(); ++r)
      byFile[int(r)];
  for (auto &[rankIndex, uses] : byFile) {
    for (Use &u : uses) {
      const CheckpointPiece &p = *u.piece;
      const SliceRequest &r = *u.request;
      bool wholeBox = p.flatSize < 0 || (p.flatStart == 0 &&
                                         p.flatSize == elementsOf(p.sliceSize));
      bool wholeRequest = r.flatSize < 0 || (r.flatStart == 0 &&
                                             r.flatSize == elementsOf(r.size));
      if (p.sliceStart == r.start && p.sliceSize == r.size &&
          p.boxes == r.boxes && p.boxesAxis == r.boxesAxis &&
          ((wholeBox && wholeRequest) ||
           (p.flatStart == r.flatStart && p.flatSize == r.flatSize)))
        u.direct = &u.request->bytes[0];
      else
        u.buffer.assign(size_t(u.piece->bytes), '\0');
    }
    auto consume = [&](uint64_t at, const char *data, size_t size) {
      for (Use &u : uses) {
        uint64_t begin = std::max(at, u.piece->offset);
        uint64_t end = std::min(at + size, u.piece->offset + u.piece->bytes);
        if (begin >= end)
          continue;
        char *to = u.direct ? u.direct : &u.buffer[0];
        std::memcpy(to + (begin - u.piece->offset), data + (begin - at),
                    size_t(end - begin));
      }
    };
    // With a check per piece, only the needed pieces are read and
    // checked; a manifest without them (older) has only the file's, so
    // the whole file is read to check it.
    std::vector<NamedPiece> pieces;
    bool ownChecks = true;
    for (const Use &u : uses) {
      pieces.push_back({&u.request->tensor->name, u.piece});
      ownChecks &= u.piece->hasOwnCheck();
    }
    if (ownChecks && !everyFile)
      CLEAVE_CHECK(readCheckpointPieces(m, rankIndex, pieces, consume));
    else
      CLEAVE_CHECK(streamCheckpointFile(m, rankIndex, consume));
    for (Use &u : uses) {
      if (u.direct)
        continue;
      size_t element = dtypeSize(u.request->tensor->dtype);
      char *to = &u.request->bytes[0];
      const char *from = u.buffer.data();
      const CheckpointTensor &t = *u.request->tensor;
      const SliceRequest &r = *u.request;
      const CheckpointPiece &p = *u.piece;
      forEachSharedRun(sliceRuns(t.shape, r.start, r.size, r.boxes, r.boxesAxis,
                                 r.flatStart, r.flatSize),
                       sliceRuns(t.shape, p.sliceStart, p.sliceSize, p.boxes,
                                 p.boxesAxis, p.flatStart, p.flatSize),
                       [&](int64_t at, int64_t in, int64_t n) {
                         std::memcpy(to + at * element, from + in * element,
                                     n * element);
                       });
      std::string().swap(u.buffer);
    }
  }
  return Status::ok();
}

Status cleave::runtime::readFullTensors(const CheckpointManifest &m,
                                        bool optimizerState,
                                        std::vector<NamedTensor> &tensors) {
  std::vector<SliceRequest> requests;
  for (auto &[name, t] : m.tensors) {
    if (t.kind != "parameter" && !optimizerState)
      continue;
    SliceRequest request;
    request.tensor = &t;
    request.start.assign(t.shape.size(), 0);
    request.size = t.shape;
    CLEAVE_CHECK(planSlice(m, -1, request));
    requests.push_back(std::move(request));
  }
  // An export is the checkpoint's archive: every byte is checked, even
  // those of replicas it does not take.
  CLEAVE_CHECK(readSlices(m, requests, /*everyFile=*/true));
  tensors.clear();
  for (SliceRequest &r : requests) {
    NamedTensor t;
    t.name = r.tensor->name;
    t.dtype = r.tensor->dtype;
    t.shape = r.tensor->shape;
    t.bytes = std::move(r.bytes);
    tensors.push_back(std::move(t));
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// The runtime's side
//===----------------------------------------------------------------------===//

std::vector<Runtime::StateTensor> Runtime::stateTensors() const {
  std::map<int, const pb::Parameter *> paramOf;
  std::map<std::string, const pb::Parameter *> paramByName;
  // ZeRO-1's working copies are made from the masters each step: not state.
  std::set<int> workingCopies;
  for (const pb::Parameter &p : program_.parameters()) {
    paramOf[p.tensor()] = &p;
    paramByName[p.name()] = &p;
    if (p.has_working_tensor())
      workingCopies.insert(p.working_tensor());
  }
  std::vector<StateTensor> out;
  std::map<std::string, int> seen;
  for (int id = 0; id < program_.tensors_size(); ++id) {
    const pb::Tensor &t = program_.tensors(id);
    if ((t.category() != pb::PARAMETERS &&
         t.category() != pb::OPTIMIZER_STATE) ||
        workingCopies.count(id))
      continue;
    StateTensor s;
    s.id = id;
    s.dtype = tensors_[id].dtype;
    s.bytes = tensorBytes_[id];
    s.sliceSize = tensors_[id].shape;
    const pb::Parameter *param = nullptr;
    if (t.category() == pb::PARAMETERS) {
      auto it = paramOf.find(id);
      param = it == paramOf.end() ? nullptr : it->second;
      s.name = param ? param->name() : t.name();
      if (param && param->has_flat_range()) {
        // Sharded data parallelism: a flat chunk holding a range of the
        // slice, as ZeRO-1's state below.
        s.sliceSize.assign(param->slice_size().begin(),
                           param->slice_size().end());
        s.flatStart = param->flat_range().start();
        s.flatSize = param->flat_range().size();
      } else if (param) {
        // The slice; a padded vocabulary's tensor has more rows, zero.
        s.sliceSize.assign(param->slice_size().begin(),
                           param->slice_size().end());
      }
    } else {
      // "wte.exp_avg": the moment of parameter "wte", sliced as it is.
      s.kind = "optimizer_state";
      s.name = t.name();
      size_t dot = s.name.rfind('.');
      if (dot != std::string::npos) {
        auto it = paramByName.find(s.name.substr(0, dot));
        std::vector<int64_t> slice;
        if (it != paramByName.end())
          slice.assign(it->second->slice_size().begin(),
                       it->second->slice_size().end());
        if (it != paramByName.end() && it->second->has_state_range() &&
            s.sliceSize.size() == 1) {
          // ZeRO-1: a flat chunk holding a range of the slice.
          param = it->second;
          s.sliceSize = slice;
          s.flatStart = param->state_range().start();
          s.flatSize = param->state_range().size();
        } else if (it != paramByName.end() &&
                   tensors_[it->second->tensor()].shape == s.sliceSize &&
                   !it->second->has_flat_range()) {
          // Shaped as its parameter's tensor: its slice (a padded
          // vocabulary's rows first).
          param = it->second;
          s.sliceSize = slice;
        }
      }
    }
    if (param) {
      s.fullShape.assign(param->full_shape().begin(),
                         param->full_shape().end());
      s.sliceStart.assign(param->slice_start().begin(),
                          param->slice_start().end());
      if (param->pieces_size() > 0) {
        s.boxes = parameterBoxes(*param);
        s.boxesAxis = param->pieces_axis();
      }
    } else {
      s.fullShape = s.sliceSize;
      s.sliceStart.assign(s.sliceSize.size(), 0);
    }
    // A name twice on one rank (never so far) stays apart, the same way in
    // every run of the program.
    if (int n = seen[s.name]++)
      s.name += "#" + str(n + 1);
    out.push_back(std::move(s));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Saving: a copy at the step boundary, a writer thread, a collective commit
//===----------------------------------------------------------------------===//

void CheckpointWriter::start() {
  done_.store(false, std::memory_order_release);
  status_ = Status::ok();
  entry.clear();
  pending_ = true;
  writeBegan = Clock::now();
  // The thread inherits the mask: a stop signal is the main thread's to
  // take (its handler sets the flag the step boundary reads).
  sigset_t stops, old;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, &old);
  thread_ = std::thread([this] { write(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

Status CheckpointWriter::join() {
  if (thread_.joinable())
    thread_.join();
  return status_;
}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable())
    thread_.join();
  release();
}

void CheckpointWriter::release() {
  if (bytes_)
    backend_->releaseHost(bytes_);
  bytes_ = nullptr;
  backend_ = nullptr;
  capacity_ = fileBytes_ = 0;
}

Status CheckpointWriter::reserve(Backend &backend, size_t fileBytes) {
  // Whole pages: O_DIRECT writes the last one's start too.
  size_t want = (std::max<size_t>(fileBytes, 1) + kDirectAlign - 1) &
                ~size_t(kDirectAlign - 1);
  if (!bytes_ || backend_ != &backend || capacity_ < want) {
    release();
    void *base = nullptr;
    // 2 MiB: huge pages where the kernel gives them, so that the first
    // copy into it does not fault in a page every 4 KiB.
    CLEAVE_CHECK(backend.allocateHost(want, uint64_t(2) << 20, base));
    backend_ = &backend;
    bytes_ = static_cast<char *>(base);
    capacity_ = want;
  }
  fileBytes_ = fileBytes;
  return Status::ok();
}

void CheckpointWriter::checkTensors(Sha256 *file) {
  tensorDigests_.assign(tensors.size(), "");
  // A mebibyte at a time: the CRC reads what the SHA left in the cache.
  const size_t chunk = size_t(1) << 20;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Crc32c crc;
    const char *p = bytes_ + tensors[i].offset;
    for (size_t done = 0; done < tensors[i].bytes; done += chunk) {
      size_t n = std::min(chunk, tensors[i].bytes - done);
      if (file)
        file->update(p + done, n);
      crc.update(p + done, n);
    }
    tensorDigests_[i] = crc.hexDigest();
  }
}

Status CheckpointWriter::copyIn(const std::function<Status(size_t)> &copy,
                                bool hashNow) {
  hashed_ = false;
  if (!hashNow) {
    for (size_t i = 0; i < tensors.size(); ++i)
      CLEAVE_CHECK(copy(i));
    return Status::ok();
  }
  // The bytes copied so far (file order); the largest value: stop.
  const size_t stop = std::numeric_limits<size_t>::max();
  std::atomic<size_t> copied{0};
  std::thread sha([&] {
    Sha256 hash;
    size_t done = 0;
    while (done < fileBytes_) {
      size_t ready = copied.load(std::memory_order_acquire);
      if (ready == stop)
        return;
      if (ready == done) {
        std::this_thread::yield();
        continue;
      }
      hash.update(bytes_ + done, ready - done);
      done = ready;
    }
    fileDigest_ = hash.hexDigest();
  });
  Status status = Status::ok();
  for (size_t i = 0; i < tensors.size() && status; ++i) {
    status = copy(i);
    copied.store(status ? tensors[i].offset + tensors[i].bytes : stop,
                 std::memory_order_release);
  }
  if (status)
    checkTensors(nullptr); // beside the SHA-256, on this thread
  sha.join();
  hashed_ = status.isOk();
  return status;
}

void CheckpointWriter::write() {
  // The thread mostly waits for the disk. Where the copy did not hash the
  // bytes, it hashes them here first, at the step's priority: at the
  // lowest (nice 19, tried first) it got no CPU beside a step that uses
  // every core and finished only when the next save waited for it.
  std::thread hashing;
  if (!hashed_)
    hashing = std::thread([this] {
      Sha256 file;
      checkTensors(&file);
      fileDigest_ = file.hexDigest();
    });
  status_ = writeAtomically(
      folder, file,
      [&](auto &&sink) -> Status { return sink(bytes_, fileBytes_); },
      /*direct=*/true);
  if (hashing.joinable())
    hashing.join();
  if (status_) {
    std::string list;
    for (size_t i = 0; i < tensors.size(); ++i)
      list += std::string(i ? "," : "") + "\n        " + tensors[i].head +
              ", \"offset\": " + str(int64_t(tensors[i].offset)) +
              ", \"bytes\": " + str(int64_t(tensors[i].bytes)) +
              ", \"crc32c\": \"" + tensorDigests_[i] + "\"}";
    entry = rankHead + ",\n      \"file\": " + jsonQuote(file) +
            ", \"bytes\": " + str(int64_t(fileBytes_)) + ", \"sha256\": \"" +
            fileDigest_ + "\"" + rankTail + ",\n      \"tensors\": [" + list +
            "]}";
  }
  writeEnded = Clock::now();
  done_.store(true, std::memory_order_release);
}

std::string Runtime::pieceHead(const StateTensor &s) {
  std::string head = "{\"name\": " + jsonQuote(s.name) + ", \"kind\": \"" +
                     s.kind + "\", \"dtype\": \"" + dtypeText(s.dtype) +
                     "\", \"shape\": " + ints(s.fullShape) +
                     ", \"slice_start\": " + ints(s.sliceStart) +
                     ", \"slice_size\": " + ints(s.sliceSize);
  if (s.flatSize >= 0)
    head += ", \"flat_range\": " + ints({s.flatStart, s.flatSize});
  if (!s.boxes.empty()) {
    head += ", \"boxes\": [";
    for (size_t b = 0; b < s.boxes.size(); ++b)
      head += std::string(b ? ", " : "") +
              "{\"start\": " + ints(s.boxes[b].start) +
              ", \"size\": " + ints(s.boxes[b].size) + "}";
    head += "], \"boxes_axis\": " + str(s.boxesAxis);
  }
  return head;
}

Status Runtime::decideCheckpointWrites() {
  if (checkpointWritesDecided_)
    return Status::ok();
  std::vector<StateTensor> state = stateTensors();
  // Each piece as the first 128 bits of its head's SHA-256: 32 bytes per
  // tensor and rank, not the heads themselves, cross the job.
  std::vector<std::string> keys;
  std::string mine;
  for (const StateTensor &s : state) {
    std::string head = pieceHead(s);
    Sha256 hash;
    hash.update(head.data(), head.size());
    keys.push_back(hash.hexDigest().substr(0, 32));
    mine += keys.back();
  }
  std::vector<std::string> all;
  CLEAVE_CHECK(comm_.allGatherSmall(mine, all));
  std::set<std::string> lower;
  for (int r = 0; r < comm_.rank(); ++r)
    for (size_t at = 0; at + 32 <= all[r].size(); at += 32)
      lower.insert(all[r].substr(at, 32));
  checkpointWrites_.assign(state.size(), 1);
  for (size_t i = 0; i < state.size(); ++i)
    checkpointWrites_[i] = !lower.count(keys[i]);
  checkpointWritesDecided_ = true;
  return Status::ok();
}

Status Runtime::layoutCheckpointFile(const std::vector<StateTensor> &state) {
  CheckpointWriter &w = checkpoint_;
  if (w.pending())
    return Status::error("a checkpoint save is still pending: its memory "
                         "cannot be laid out again");
  w.tensors.resize(size_t(
      std::count(checkpointWrites_.begin(), checkpointWrites_.end(), 1)));
  size_t fileBytes = 0;
  for (size_t i = 0, j = 0; i < state.size(); ++i) {
    if (!checkpointWrites_[i])
      continue;
    const StateTensor &s = state[i];
    CheckpointWriter::Tensor &t = w.tensors[j++];
    t.offset = fileBytes;
    // A ZeRO-1 chunk without its padding, a padded vocabulary without
    // its zero rows.
    t.bytes = s.flatSize >= 0
                  ? size_t(s.flatSize) * dtypeSize(s.dtype)
                  : std::min(size_t(s.bytes),
                             size_t(elementsOf(s.sliceSize)) *
                                 dtypeSize(s.dtype));
    t.head = pieceHead(s);
    fileBytes += t.bytes;
  }
  // The same pieces at every save: the memory of the last one is reused.
  return w.reserve(*backend_, fileBytes);
}

Status Runtime::reserveCheckpointMemory() {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  CLEAVE_CHECK(decideCheckpointWrites());
  return layoutCheckpointFile(stateTensors());
}

Status Runtime::snapshotCheckpoint(const std::string &folder, int64_t steps,
                                   const TokenData *data) {
  CheckpointWriter &w = checkpoint_;
  std::vector<StateTensor> state = stateTensors();
  w.folder = folder;
  w.file = "rank-" + str(comm_.rank()) + ".bin";
  w.step = steps;
  w.dataPath = data ? data->path() : "";
  w.dataTokens = data ? data->size() : 0;
  CLEAVE_CHECK(layoutCheckpointFile(state));
  std::vector<int> ids; // of w.tensors
  for (size_t i = 0; i < state.size(); ++i)
    if (checkpointWrites_[i])
      ids.push_back(state[i].id);
  // The CPU backends' kernels use the host's cores: hashed now, on them,
  // not beside the next step (CheckpointWriter::copyIn).
  bool hashNow = backend_->kernelsUseHostCores();
  CLEAVE_CHECK(w.copyIn(
      [&](size_t j) {
        const CheckpointWriter::Tensor &t = w.tensors[j];
        return backend_->download(w.bytes() + t.offset, tensor(ids[j]).data,
                                  t.bytes);
      },
      hashNow));
  const pb::Mesh &mesh = program_.mesh();
  // A rank without an optimizer function (a pipeline stage with no
  // gradient) never advances its step count or loss scaler: a load into
  // another layout takes the training state from the ranks that do.
  bool trains = false;
  for (const pb::Step &step : program_.schedule())
    trains |= program_.functions(step.function()).kind() == pb::OPTIMIZER;
  LossScaler::State scaler = scaler_.state();
  w.rankHead = "    {\"rank\": " + str(comm_.rank()) +
               ", \"data_rank\": " + str(mesh.data_rank()) +
               ", \"pipeline_rank\": " + str(mesh.pipeline_rank()) +
               ", \"tensor_rank\": " + str(mesh.tensor_rank());
  w.rankTail = std::string(",\n      \"trains\": ") +
               (trains ? "true" : "false") +
               ", \"optimizer_steps\": " + str(optimizerSteps_) +
               ", \"loss_scaler\": {\"scale\": " + jsonNumber(scaler.scale) +
               ", \"hysteresis\": " + str(scaler.hysteresis) +
               ", \"good_steps\": " + str(scaler.goodSteps) + "}";
  return Status::ok();
}

namespace {
double secondsSince(CheckpointWriter::Clock::time_point began) {
  return std::chrono::duration<double>(CheckpointWriter::Clock::now() - began)
      .count();
}
} // namespace

Status Runtime::startCheckpoint(const std::string &root, int64_t steps,
                                const TokenData *data,
                                CheckpointSaveTimes &times) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  times = CheckpointSaveTimes();
  times.step = steps;
  if (checkpoint_.pending())
    return Status::error("a checkpoint save is still pending: finish it "
                         "before starting another");
  std::string folder = checkpointFolder(root, steps);
  times.folder = folder;
  Status status = makeFolder(root);
  if (status)
    status = makeFolder(folder);
  // Resumed at this very step: the checkpoint is there already.
  bool complete = false;
  CLEAVE_CHECK(
      comm_.agree(status && exists(folder + "/manifest.json"), complete));
  if (complete)
    return Status::ok();
  CLEAVE_CHECK(decideCheckpointWrites());
  auto began = CheckpointWriter::Clock::now();
  double traceBegan = trace_.active() ? trace_.nowUs() : 0;
  if (status)
    status = snapshotCheckpoint(folder, steps, data);
  bool all = false;
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not copy its state "
                                  "for the checkpoint (its message says why)");
  times.copy = secondsSince(began);
  trace_.add("checkpoint copy (step-" + str(steps) + ")", 0, traceBegan);
  checkpoint_.start();
  return Status::ok();
}

Status Runtime::finishCheckpoint(CheckpointSaveTimes &times) {
  if (!checkpoint_.pending())
    return Status::ok();
  CheckpointWriter &w = checkpoint_;
  times.folder = w.folder;
  times.step = w.step;
  auto began = CheckpointWriter::Clock::now();
  Status status = w.join();
  w.committed();
  times.wait = secondsSince(began);
  times.write =
      std::chrono::duration<double>(w.writeEnded - w.writeBegan).count();
  if (trace_.active()) {
    double now = trace_.nowUs();
    trace_.addSpan("checkpoint write (step-" + str(w.step) + ")", 2,
                   now - secondsSince(w.writeBegan) * 1e6, times.write * 1e6);
  }
  auto committing = CheckpointWriter::Clock::now();
  double traceBegan = trace_.active() ? trace_.nowUs() : 0;
  const std::string &folder = w.folder;
  bool all = false;
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not write its part "
                                  "of the checkpoint (its message says why)");
  std::vector<std::string> entries;
  CLEAVE_CHECK(comm_.gatherToRoot(w.entry, entries));
  if (comm_.rank() == 0) {
    const pb::Mesh &mesh = program_.mesh();
    // Version 1 readers know no flat ranges: they must refuse such a
    // checkpoint rather than misread it; without one it is version 1.
    int version = 1;
    for (const std::string &e : entries) {
      if (e.find("\"flat_range\"") != std::string::npos)
        version = std::max(version, 2);
      if (e.find("\"boxes\"") != std::string::npos)
        version = std::max(version, 3);
    }
    std::string manifest =
        "{\"format\": \"cleave-checkpoint\", \"version\": " + str(version) +
        ", \"step\": " + str(w.step) +
        ",\n  \"model\": " + jsonQuote(program_.model()) +
        ",\n  \"layout\": {\"world_size\": " + str(mesh.world_size()) +
        ", \"data_degree\": " + str(mesh.data_degree()) +
        ", \"pipeline_degree\": " + str(mesh.pipeline_degree()) +
        ", \"tensor_degree\": " + str(mesh.tensor_degree()) + "},\n" +
        "  \"data\": {\"path\": " + jsonQuote(w.dataPath) +
        ", \"tokens\": " + str(w.dataTokens) +
        ", \"global_batch\": " + str(program_.batch().global_batch()) +
        ", \"seq_len\": " + str(program_.batch().seq_len()) +
        ", \"next_step\": " + str(w.step) + "},\n  \"ranks\": [\n";
    for (size_t r = 0; r < entries.size(); ++r)
      manifest += entries[r] + (r + 1 < entries.size() ? ",\n" : "\n");
    manifest += "  ]}\n";
    status = writeAtomically(folder, "manifest.json", [&](auto &&sink) {
      return sink(manifest.data(), manifest.size());
    });
  }
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + "/manifest.json: rank 0 could not write "
                                  "the manifest (its message says why)");
  times.commit = secondsSince(committing);
  times.saved = true;
  trace_.add("checkpoint commit (step-" + str(w.step) + ")", 0, traceBegan);
  return Status::ok();
}

Status Runtime::saveCheckpoint(const std::string &root, int64_t steps,
                               const TokenData *data,
                               CheckpointSaveTimes &times) {
  CLEAVE_CHECK(finishCheckpoint(times));
  CLEAVE_CHECK(startCheckpoint(root, steps, data, times));
  double copy = times.copy;
  CLEAVE_CHECK(finishCheckpoint(times));
  times.copy = copy;
  return Status::ok();
}

bool Runtime::sameLayout(const CheckpointManifest &m) const {
  const pb::Mesh &mesh = program_.mesh();
  return m.worldSize == mesh.world_size() &&
         m.dataDegree == mesh.data_degree() &&
         m.pipelineDegree == mesh.pipeline_degree() &&
         m.tensorDegree == mesh.tensor_degree();
}

Status Runtime::planCheckpointLoad(const CheckpointManifest &m,
                                   const TokenData *data,
                                   std::vector<SliceRequest> &requests,
                                   std::vector<uint64_t> &used) {
  std::string manifestPath = m.manifestPath();
  const pb::Batch &batch = program_.batch();
  if (data && m.tokens >= 0 && m.tokens != data->size())
    return Status::error(
        data->path() + ": " + str(data->size()) +
        " tokens, but the checkpoint's run read " + str(m.tokens) + " from " +
        m.dataPath + ": resume with the same token file to continue exactly");
  // The data position is the step: step s reads samples from s*B on.
  if (m.globalBatch >= 0 &&
      (m.globalBatch != batch.global_batch() || m.seqLen != batch.seq_len()))
    return Status::error(
        manifestPath + ": the checkpoint's run read global batches of " +
        str(m.globalBatch) + " x " + str(m.seqLen) +
        " tokens, this program reads " + str(batch.global_batch()) + " x " +
        str(batch.seq_len()) +
        ": its step would start at another sample; compile with the "
        "checkpoint's batch_size and sequence length");
  std::vector<std::string> names;
  for (auto &[name, t] : m.tensors)
    names.push_back(name);
  // A same-layout load reads this rank's own file (and, for what it held
  // alike with a lower rank, that rank's: each piece is written once).
  int preferred = sameLayout(m) ? comm_.rank() : -1;
  for (const StateTensor &s : stateTensors()) {
    auto it = m.tensors.find(s.name);
    if (it == m.tensors.end())
      return Status::error(
          manifestPath + ": no tensor '" + s.name + "' (" + s.kind +
          ") in the checkpoint, which this program holds: the checkpoint "
          "was written for another model");
    const CheckpointTensor &t = it->second;
    used[std::lower_bound(names.begin(), names.end(), s.name) - names.begin()] =
        1;
    if (t.dtype != s.dtype || t.shape != s.fullShape)
      return Status::error(m.filePath(t.pieces.front().rankIndex) +
                           ": tensor '" + s.name + "' is " +
                           dtypeText(t.dtype) + " " + ints(t.shape) +
                           " in the checkpoint, but " + dtypeText(s.dtype) +
                           " " + ints(s.fullShape) +
                           " in this program: the checkpoint was "
                           "written for another model");
    SliceRequest request;
    request.tensor = &t;
    request.start = s.sliceStart;
    request.size = s.sliceSize;
    request.boxes = s.boxes;
    request.boxesAxis = s.boxesAxis;
    request.flatStart = s.flatStart;
    request.flatSize = s.flatSize;
    CLEAVE_CHECK(planSlice(m, preferred, request));
    requests.push_back(std::move(request));
  }
  return Status::ok();
}

Status Runtime::loadCheckpoint(const std::string &folder, const TokenData *data,
                               int64_t &steps) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  CheckpointManifest m;
  Status status = readCheckpointManifest(folder, m);
  bool all = false;
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not read the "
                                  "manifest (its message says why)");
  // Every rank has read the same manifest: the same number of names.
  std::vector<SliceRequest> requests;
  std::vector<uint64_t> used(m.tensors.size(), 0);
  status = planCheckpointLoad(m, data, requests, used);
  CLEAVE_CHECK(comm_.maxAll(used));
  if (status) {
    // Each tensor of the checkpoint goes somewhere: else it is another
    // model's (a name this one does not have).
    size_t i = 0;
    for (auto &[name, t] : m.tensors)
      if (!used[i++]) {
        status = Status::error(
            m.filePath(t.pieces.front().rankIndex) + ": tensor '" + name +
            "' (" + t.kind +
            ") in the checkpoint is held by no rank of this "
            "program: the checkpoint was written for another model");
        break;
      }
  }
  // The training state is one for the whole job: every rank that trains
  // agrees on overflow and steps at every step. On the same layout each
  // rank takes its own entry; on another, that of the first rank that
  // trains, after checking that all that train agree.
  const CheckpointRank *state = nullptr;
  if (status) {
    if (sameLayout(m))
      state = &m.ranks[comm_.rank()];
    for (const CheckpointRank &r : m.ranks)
      if (r.trains && !state)
        state = &r;
    if (!state)
      state = &m.ranks.front();
    for (const CheckpointRank &r : m.ranks)
      if (r.trains && state->trains &&
          (r.optimizerSteps != state->optimizerSteps ||
           r.scaler.scale != state->scaler.scale ||
           r.scaler.hysteresis != state->scaler.hysteresis ||
           r.scaler.goodSteps != state->scaler.goodSteps))
        status = Status::error(
            m.manifestPath() + ": rank " + str(r.rank) +
            "'s optimizer_steps or loss_scaler differ from rank " +
            str(state->rank) + "'s: the ranks did not save one state");
  }
  if (status)
    status = readSlices(m, requests);
  // Nothing is written until every rank has checked all it will load.
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not load its part "
                                  "of the checkpoint (its message says why)");
  std::vector<StateTensor> tensors = stateTensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    // A ZeRO-1 chunk's padding stays zero.
    requests[i].bytes.resize(size_t(tensors[i].bytes), '\0');
    CLEAVE_CHECK(writeTensor(tensors[i].id, requests[i].bytes.data()));
  }
  scaler_.restore(state->scaler);
  optimizerSteps_ = state->optimizerSteps;
  steps = m.step;
  return backend_->synchronize();
}
