//===- Checkpoint.cpp - training checkpoints: save, find, resume ----------===//
//
// Saving: every rank writes rank-<r>.bin to a temporary name, hashing as it
// writes, fsyncs it and renames it; the ranks agree that all succeeded;
// rank 0 gathers their entries and writes manifest.json the same way, last.
// Loading: every rank verifies its whole file and every tensor against its
// program before the ranks agree and any memory is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/Sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

using namespace cleave::runtime;
namespace pb = cleave::program;

struct Runtime::StateTensor {
  int id = -1;
  std::string name;
  const char *kind = "parameter"; // or "optimizer_state"
  std::vector<int64_t> fullShape, sliceStart, sliceSize;
  DType dtype = DType::F32;
  uint64_t bytes = 0;
};

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string ints(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + str(v[i]);
  return s + "]";
}

std::string errnoText() { return std::strerror(errno); }

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

/// Writes pieces to `path` through `path`.tmp: write, fsync, rename, fsync
/// the folder. `produce` is called with a sink until it returns false.
template <typename Produce>
Status writeAtomically(const std::string &folder, const std::string &name,
                       Produce &&produce) {
  std::string path = folder + "/" + name, temp = path + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return Status::error(temp + ": cannot create: " + errnoText());
  Status status = produce([&](const void *data, size_t size) -> Status {
    const char *p = static_cast<const char *>(data);
    while (size) {
      ssize_t n = write(fd, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return Status::error(temp + ": write failed: " + errnoText());
      p += n;
      size -= size_t(n);
    }
    return Status::ok();
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

Status readWhole(const std::string &path, std::string &bytes) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Status::error(path + ": cannot stat: " + errnoText());
  }
  bytes.resize(size_t(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      close(fd);
      return Status::error(path + ": read failed at byte " + str(done) + ": " +
                           (n == 0 ? "unexpected end of file" : errnoText()));
    }
    done += size_t(n);
  }
  close(fd);
  return Status::ok();
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
// The runtime's side
//===----------------------------------------------------------------------===//

std::vector<Runtime::StateTensor> Runtime::stateTensors() const {
  std::map<int, const pb::Parameter *> paramOf;
  std::map<std::string, const pb::Parameter *> paramByName;
  for (const pb::Parameter &p : program_.parameters()) {
    paramOf[p.tensor()] = &p;
    paramByName[p.name()] = &p;
  }
  std::vector<StateTensor> out;
  std::map<std::string, int> seen;
  for (int id = 0; id < program_.tensors_size(); ++id) {
    const pb::Tensor &t = program_.tensors(id);
    if (t.category() != pb::PARAMETERS && t.category() != pb::OPTIMIZER_STATE)
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
    } else {
      // "wte.exp_avg": the moment of parameter "wte", sliced as it is.
      s.kind = "optimizer_state";
      s.name = t.name();
      size_t dot = s.name.rfind('.');
      if (dot != std::string::npos) {
        auto it = paramByName.find(s.name.substr(0, dot));
        if (it != paramByName.end() &&
            std::vector<int64_t>(it->second->slice_size().begin(),
                                 it->second->slice_size().end()) == s.sliceSize)
          param = it->second;
      }
    }
    if (param) {
      s.fullShape.assign(param->full_shape().begin(),
                         param->full_shape().end());
      s.sliceStart.assign(param->slice_start().begin(),
                          param->slice_start().end());
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

Status Runtime::writeRankCheckpoint(const std::string &folder,
                                    std::string &entry) {
  std::vector<StateTensor> state = stateTensors();
  std::string file = "rank-" + str(comm_.rank()) + ".bin";
  Sha256 hash;
  uint64_t offset = 0;
  std::string tensors;
  CLEAVE_CHECK(writeAtomically(folder, file, [&](auto &&sink) -> Status {
    std::vector<char> bytes;
    for (const StateTensor &s : state) {
      CLEAVE_CHECK(readTensor(s.id, bytes));
      hash.update(bytes.data(), bytes.size());
      CLEAVE_CHECK(sink(bytes.data(), bytes.size()));
      tensors += std::string(tensors.empty() ? "" : ",") +
                 "\n        {\"name\": " + jsonQuote(s.name) +
                 ", \"kind\": \"" + s.kind + "\", \"dtype\": \"" +
                 dtypeText(s.dtype) + "\", \"shape\": " + ints(s.fullShape) +
                 ", \"slice_start\": " + ints(s.sliceStart) +
                 ", \"slice_size\": " + ints(s.sliceSize) +
                 ", \"offset\": " + str(offset) +
                 ", \"bytes\": " + str(bytes.size()) + "}";
      offset += bytes.size();
    }
    return Status::ok();
  }));
  const pb::Mesh &mesh = program_.mesh();
  LossScaler::State scaler = scaler_.state();
  entry = "    {\"rank\": " + str(comm_.rank()) +
          ", \"data_rank\": " + str(mesh.data_rank()) +
          ", \"pipeline_rank\": " + str(mesh.pipeline_rank()) +
          ", \"tensor_rank\": " + str(mesh.tensor_rank()) +
          ",\n      \"file\": " + jsonQuote(file) +
          ", \"bytes\": " + str(offset) + ", \"sha256\": \"" +
          hash.hexDigest() +
          "\",\n      \"optimizer_steps\": " + str(optimizerSteps_) +
          ", \"loss_scaler\": {\"scale\": " + jsonNumber(scaler.scale) +
          ", \"hysteresis\": " + str(scaler.hysteresis) +
          ", \"good_steps\": " + str(scaler.goodSteps) +
          "},\n      \"tensors\": [" + tensors + "]}";
  return Status::ok();
}

Status Runtime::saveCheckpoint(const std::string &root, int64_t steps,
                               const TokenData *data) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  std::string folder = checkpointFolder(root, steps);
  Status status = makeFolder(root);
  if (status)
    status = makeFolder(folder);
  // Resumed at this very step: the checkpoint is there already.
  bool complete = false;
  CLEAVE_CHECK(
      comm_.agree(status && exists(folder + "/manifest.json"), complete));
  if (complete)
    return Status::ok();
  std::string entry;
  if (status)
    status = writeRankCheckpoint(folder, entry);
  bool all = false;
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not write its part "
                                  "of the checkpoint (its message says why)");
  std::vector<std::string> entries;
  CLEAVE_CHECK(comm_.gatherToRoot(entry, entries));
  if (comm_.rank() == 0) {
    const pb::Mesh &mesh = program_.mesh();
    std::string manifest =
        "{\"format\": \"cleave-checkpoint\", \"version\": " +
        str(kCheckpointVersion) + ", \"step\": " + str(steps) +
        ",\n  \"model\": " + jsonQuote(program_.model()) +
        ",\n  \"layout\": {\"world_size\": " + str(mesh.world_size()) +
        ", \"data_degree\": " + str(mesh.data_degree()) +
        ", \"pipeline_degree\": " + str(mesh.pipeline_degree()) +
        ", \"tensor_degree\": " + str(mesh.tensor_degree()) + "},\n" +
        "  \"data\": {\"path\": " + jsonQuote(data ? data->path() : "") +
        ", \"tokens\": " + str(data ? data->size() : 0) +
        ", \"next_step\": " + str(steps) + "},\n  \"ranks\": [\n";
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
  return Status::ok();
}

Status Runtime::readRankCheckpoint(const std::string &folder,
                                   const JsonValue &manifest,
                                   const TokenData *data, std::string &file,
                                   const JsonValue *&entry) {
  std::string manifestPath = folder + "/manifest.json";
  int64_t version = 0, step = 0;
  if (stringMember(manifest, "format") != "cleave-checkpoint" ||
      !intMember(manifest, "version", version) ||
      !intMember(manifest, "step", step))
    return Status::error(manifestPath + ": not a cleave checkpoint manifest "
                                        "(format, version or step missing)");
  if (version > kCheckpointVersion)
    return Status::error(manifestPath + ": version " + str(version) +
                         " is newer than this cleave-run reads (" +
                         str(kCheckpointVersion) +
                         "); resume with the cleave-run that wrote it");
  const pb::Mesh &mesh = program_.mesh();
  const JsonValue *layout = manifest.find("layout");
  int64_t world = 0, dataDegree = 0, pipeline = 0, tensor = 0;
  if (!layout || !intMember(*layout, "world_size", world) ||
      !intMember(*layout, "data_degree", dataDegree) ||
      !intMember(*layout, "pipeline_degree", pipeline) ||
      !intMember(*layout, "tensor_degree", tensor))
    return Status::error(manifestPath + ": the layout is missing or "
                                        "incomplete");
  auto describe = [](int64_t w, int64_t d, int64_t p, int64_t t) {
    return str(w) + (w == 1 ? " rank" : " ranks") + " (data " + str(d) +
           ", pipeline " + str(p) + ", tensor " + str(t) + ")";
  };
  if (world != mesh.world_size() || dataDegree != mesh.data_degree() ||
      pipeline != mesh.pipeline_degree() || tensor != mesh.tensor_degree())
    return Status::error(
        manifestPath + ": the checkpoint was written by a layout of " +
        describe(world, dataDegree, pipeline, tensor) + ", this program's is " +
        describe(mesh.world_size(), mesh.data_degree(), mesh.pipeline_degree(),
                 mesh.tensor_degree()) +
        "; loading into another layout is not supported yet: resume with "
        "the program compiled for the checkpoint's layout");
  if (const JsonValue *d = manifest.find("data")) {
    int64_t tokens = 0;
    if (data && intMember(*d, "tokens", tokens) && tokens != data->size())
      return Status::error(
          data->path() + ": " + str(data->size()) +
          " tokens, but the checkpoint's run read " + str(tokens) + " from " +
          stringMember(*d, "path") +
          ": resume with the same token file to continue exactly");
  }
  const JsonValue *ranks = manifest.find("ranks");
  entry = nullptr;
  if (ranks && ranks->kind == JsonValue::Kind::Array)
    for (const JsonValue &r : ranks->array) {
      int64_t rank = -1;
      if (intMember(r, "rank", rank) && rank == comm_.rank())
        entry = &r;
    }
  if (!entry)
    return Status::error(manifestPath + ": no entry for rank " +
                         str(comm_.rank()));
  std::string name = stringMember(*entry, "file");
  int64_t expectedBytes = 0;
  std::string expectedHash = stringMember(*entry, "sha256");
  if (name.empty() || name.find('/') != std::string::npos ||
      !intMember(*entry, "bytes", expectedBytes) || expectedHash.size() != 64)
    return Status::error(manifestPath + ": rank " + str(comm_.rank()) +
                         "'s file, size or sha256 is missing or malformed");
  std::string path = folder + "/" + name;
  CLEAVE_CHECK(readWhole(path, file));
  if (int64_t(file.size()) != expectedBytes)
    return Status::error(path + ": " + str(file.size()) +
                         " bytes, the manifest says " + str(expectedBytes) +
                         ": the file is truncated or was replaced");
  Sha256 hash;
  hash.update(file.data(), file.size());
  std::string actual = hash.hexDigest();
  if (actual != expectedHash)
    return Status::error(path + ": SHA-256 " + actual +
                         " does not match the manifest's " + expectedHash +
                         ": the file is corrupt");

  // Every tensor this rank holds, as the program has it, and nothing more.
  const JsonValue *list = entry->find("tensors");
  if (!list || list->kind != JsonValue::Kind::Array)
    return Status::error(manifestPath + ": rank " + str(comm_.rank()) +
                         " lists no tensors");
  std::map<std::string, const JsonValue *> byName;
  for (const JsonValue &t : list->array)
    byName[stringMember(t, "name")] = &t;
  std::vector<StateTensor> state = stateTensors();
  for (const StateTensor &s : state) {
    auto it = byName.find(s.name);
    if (it == byName.end())
      return Status::error(
          path + ": no tensor '" + s.name + "' (" + s.kind +
          ") in the checkpoint, which this program holds: the checkpoint "
          "was written for another model or layout");
    const JsonValue &t = *it->second;
    std::vector<int64_t> shape, start, size;
    int64_t offset = 0, bytes = 0;
    std::string dtype = stringMember(t, "dtype");
    if (!intsMember(t, "shape", shape) ||
        !intsMember(t, "slice_start", start) ||
        !intsMember(t, "slice_size", size) || !intMember(t, "offset", offset) ||
        !intMember(t, "bytes", bytes))
      return Status::error(manifestPath + ": tensor '" + s.name + "' of rank " +
                           str(comm_.rank()) + " is malformed");
    if (dtype != dtypeText(s.dtype) || shape != s.fullShape ||
        start != s.sliceStart || size != s.sliceSize)
      return Status::error(
          path + ": tensor '" + s.name + "' is " + dtype + " " + ints(shape) +
          " (slice at " + ints(start) + " of size " + ints(size) +
          ") in the checkpoint, but " + dtypeText(s.dtype) + " " +
          ints(s.fullShape) + " (slice at " + ints(s.sliceStart) + " of size " +
          ints(s.sliceSize) +
          ") in this program: the checkpoint was written for another model "
          "or layout");
    if (uint64_t(bytes) != s.bytes || offset < 0 ||
        uint64_t(offset) + s.bytes > file.size())
      return Status::error(path + ": tensor '" + s.name + "': its bytes [" +
                           str(offset) + ", " + str(offset + bytes) +
                           ") do not fit the file");
    byName.erase(it);
  }
  if (!byName.empty())
    return Status::error(path + ": tensor '" + byName.begin()->first +
                         "' in the checkpoint is not held by this program: "
                         "the checkpoint was written for another model or "
                         "layout");
  LossScaler::State scaler;
  const JsonValue *ls = entry->find("loss_scaler");
  const JsonValue *scale = ls ? ls->find("scale") : nullptr;
  int64_t optimizerSteps = 0;
  if (!intMember(*entry, "optimizer_steps", optimizerSteps) || !scale ||
      scale->kind != JsonValue::Kind::Number ||
      !intMember(*ls, "hysteresis", scaler.hysteresis) ||
      !intMember(*ls, "good_steps", scaler.goodSteps))
    return Status::error(manifestPath + ": rank " + str(comm_.rank()) +
                         "'s optimizer_steps or loss_scaler is missing");
  return Status::ok();
}

Status Runtime::loadCheckpoint(const std::string &folder, const TokenData *data,
                               int64_t &steps) {
  if (!initialized_)
    return Status::error("the runtime is not initialized");
  std::string manifestPath = folder + "/manifest.json";
  std::string text, file, error;
  JsonValue manifest;
  const JsonValue *entry = nullptr;
  Status status = readWhole(manifestPath, text);
  if (status && !parseJson(text, manifest, error))
    status = Status::error(manifestPath + ": not valid JSON: " + error);
  if (status)
    status = readRankCheckpoint(folder, manifest, data, file, entry);
  // Nothing is written until every rank has checked all it will load.
  bool all = false;
  CLEAVE_CHECK(comm_.agree(status.isOk(), all));
  if (!status)
    return status;
  if (!all)
    return Status::error(folder + ": another rank could not load its part "
                                  "of the checkpoint (its message says why)");
  for (const StateTensor &s : stateTensors()) {
    for (const JsonValue &t : entry->find("tensors")->array)
      if (stringMember(t, "name") == s.name) {
        int64_t offset = 0;
        intMember(t, "offset", offset);
        CLEAVE_CHECK(writeTensor(s.id, file.data() + offset));
        break;
      }
  }
  const JsonValue &ls = *entry->find("loss_scaler");
  LossScaler::State scaler;
  scaler.scale = ls.find("scale")->number;
  intMember(ls, "hysteresis", scaler.hysteresis);
  intMember(ls, "good_steps", scaler.goodSteps);
  scaler_.restore(scaler);
  intMember(*entry, "optimizer_steps", optimizerSteps_);
  intMember(manifest, "step", steps);
  return backend_->synchronize();
}
