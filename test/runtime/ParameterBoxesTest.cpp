//===- ParameterBoxesTest.cpp - parameters held as boxes of full tensors ---===//
//
// Tensor parallelism gives a rank one or several boxes of a parameter
// (Parameter.pieces: a blocked sharding, GPT-2's fused QKV weight), and
// ZeRO-3 a flat range of those boxes concatenated. These tests build the
// programs of every rank of a layout (2 and 4 tensor ranks, tensor 2 x
// sharded data 2) and run each in a one-rank Runtime: a rank's tensors
// must equal the elements of a one-rank initialization that an
// element-by-element walk of its boxes names; the ranks' slices must
// assemble (--save-params' assembly) into the one-rank parameters byte for
// byte; and a checkpoint written by the ranks of one layout (their files
// and manifest entries put together as the collective save does) must load
// into the ranks of another, gathered equal to what was saved.
//
//===----------------------------------------------------------------------===//

#include "TestPrograms.h"
#include "runtime/Executor.h"
#include "runtime/Parameters.h"
#include "runtime/ProgramLoader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// What one rank holds of one parameter: boxes concatenated along `axis`,
/// with flatSize >= 0 only that range of their elements (ZeRO-3).
struct Holding {
  std::vector<Box> boxes;
  int axis = 0;
  int64_t flatStart = 0, flatSize = -1;
};

/// A parameter of the test model, and how its initial values are made.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool fromFile; // params.bin, else "normal:0.5"
};

const std::vector<ParamSpec> kParams = {
    {"qkv", {12, 4}, false},  // fused QKV: 3 blocks of rows
    {"proj", {4, 12}, true},  // 3 blocks of columns, from params.bin
    {"kv", {4, 4}, false},    // grouped-query: over the major half of T = 4
    {"bias", {6}, false},     // replicated
};

std::vector<float> fileValues(const ParamSpec &spec) {
  std::vector<float> v(size_t(elementsOf(spec.shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(0.37f * float(i + 1));
  return v;
}

/// Rank `index` of `parts` over dimension `dim` of `shape` cut in `blocks`
/// equal blocks: its part of every block, concatenated along `dim`.
Holding blocked(const std::vector<int64_t> &shape, int dim, int64_t blocks,
                int64_t parts, int64_t index) {
  Holding h;
  h.axis = dim;
  int64_t block = shape[dim] / blocks, part = block / parts;
  for (int64_t k = 0; k < blocks; ++k) {
    Box b{std::vector<int64_t>(shape.size(), 0), shape};
    b.start[dim] = k * block + index * part;
    b.size[dim] = part;
    h.boxes.push_back(b);
  }
  return h;
}

using RankLayout = std::map<std::string, Holding>;
using Layout = std::vector<RankLayout>;

/// Tensor degree T (1, 2 or 4): qkv [3 blocks {"tensor"}, {}], proj
/// [{}, 3 blocks {"tensor"}], kv [{"tensor":(1)2}, {}] at T = 4 (else
/// {"tensor"}), bias replicated.
Layout tensorLayout(int64_t t) {
  Layout layout;
  for (int64_t c = 0; c < t; ++c) {
    RankLayout r;
    // One rank holds each whole: one box, as the emitter writes it.
    r["qkv"] = blocked(kParams[0].shape, 0, t == 1 ? 1 : 3, t, c);
    r["proj"] = blocked(kParams[1].shape, 1, t == 1 ? 1 : 3, t, c);
    r["kv"] = t == 4 ? blocked(kParams[2].shape, 0, 1, 2, c / 2)
                     : blocked(kParams[2].shape, 0, 1, t, c);
    r["bias"] = blocked(kParams[3].shape, 0, 1, 1, 0);
    layout.push_back(r);
  }
  return layout;
}

/// Tensor 2 x sharded data 2 (rank = 2 t + d): qkv's concatenated boxes
/// split in two flat chunks over the data ranks (ZeRO-3 on top).
Layout tensorZeroLayout() {
  Layout tensor = tensorLayout(2), layout;
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t d = 0; d < 2; ++d) {
      RankLayout r = tensor[t];
      int64_t elements = elementsOf(kParams[0].shape) / 2;
      r["qkv"].flatStart = d * elements / 2;
      r["qkv"].flatSize = elements / 2;
      layout.push_back(r);
    }
  return layout;
}

/// The shape of what a holding's boxes concatenate to.
std::vector<int64_t> concatShape(const Holding &h) {
  std::vector<int64_t> shape = h.boxes[0].size;
  shape[h.axis] = 0;
  for (const Box &b : h.boxes)
    shape[h.axis] += b.size[h.axis];
  return shape;
}

/// The full tensor's row-major index of element `local` of the holding
/// (counted from its flat start): an element-by-element walk, independent
/// of the runtime's runs.
int64_t fullIndexOf(const std::vector<int64_t> &full, const Holding &h,
                    int64_t local) {
  std::vector<int64_t> shape = concatShape(h), index(shape.size());
  int64_t rest = local + h.flatStart;
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  int64_t along = index[h.axis];
  const Box *box = nullptr;
  for (const Box &b : h.boxes) {
    if (along < b.size[h.axis]) {
      box = &b;
      break;
    }
    along -= b.size[h.axis];
  }
  index[h.axis] = along;
  int64_t at = 0;
  for (size_t d = 0; d < full.size(); ++d)
    at = at * full[d] + box->start[d] + index[d];
  return at;
}

int64_t heldElements(const Holding &h) {
  return h.flatSize >= 0 ? h.flatSize : elementsOf(concatShape(h));
}

/// One rank's program: every parameter as its holding, with seed `seed`,
/// and (`state`) an AdamW first moment beside each.
ProgramBuilder rankProgram(const RankLayout &layout, uint64_t seed,
                           bool state) {
  ProgramBuilder b;
  b.p.mutable_batch()->set_microbatches(1);
  int fn = b.function("forward", pb::FORWARD);
  b.step(fn, 0);
  for (const ParamSpec &spec : kParams) {
    const Holding &h = layout.at(spec.name);
    std::vector<int64_t> local = concatShape(h);
    std::vector<int64_t> tensorShape =
        h.flatSize >= 0 ? std::vector<int64_t>{h.flatSize} : local;
    int id = b.f32(tensorShape, spec.name, pb::PARAMETERS);
    pb::Parameter *p = spec.fromFile
                           ? b.fileParameter(spec.name, id, fileValues(spec))
                           : b.parameter(spec.name, id);
    if (!spec.fromFile)
      p->set_generator("normal:0.5");
    p->set_seed(seed);
    p->clear_full_shape();
    p->clear_slice_start();
    p->clear_slice_size();
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      p->add_full_shape(spec.shape[d]);
      p->add_slice_start(h.boxes[0].start[d]);
      p->add_slice_size(local[d]);
    }
    if (h.boxes.size() > 1) {
      b.p.set_version(pb::VERSION_PIECES);
      p->set_pieces_axis(h.axis);
      for (const Box &box : h.boxes) {
        pb::Box *out = p->add_pieces();
        for (size_t d = 0; d < box.start.size(); ++d) {
          out->add_start(box.start[d]);
          out->add_size(box.size[d]);
        }
      }
    }
    if (h.flatSize >= 0) {
      p->mutable_flat_range()->set_start(h.flatStart);
      p->mutable_flat_range()->set_size(h.flatSize);
      p->mutable_state_range()->set_start(h.flatStart);
      p->mutable_state_range()->set_size(h.flatSize);
    }
    if (state)
      b.f32(tensorShape, spec.name + ".exp_avg", pb::OPTIMIZER_STATE);
  }
  return b;
}

/// A loaded, initialized program of one rank in a one-rank world.
struct Rank {
  TempDir dir;
  pb::Program program;
  Communicator comm;
  std::unique_ptr<Runtime> runtime;

  Status load(const ProgramBuilder &b) {
    std::string path = b.write(dir.path());
    CLEAVE_CHECK(loadProgram(path, program));
    runtime = std::make_unique<Runtime>(program, dir.path(), comm,
                                        RunOptions{true});
    return runtime->initialize();
  }
  /// The tensor named `name`'s floats (its held elements only).
  std::vector<float> values(const std::string &name) const {
    for (int i = 0; i < program.tensors_size(); ++i)
      if (program.tensors(i).name() == name) {
        TensorRef t = runtime->tensor(i);
        return std::vector<float>(t.as<float>(),
                                  t.as<float>() + t.numElements());
      }
    ADD_FAILURE() << "no tensor " << name;
    return {};
  }
  float *data(const std::string &name) {
    for (int i = 0; i < program.tensors_size(); ++i)
      if (program.tensors(i).name() == name)
        return static_cast<float *>(runtime->tensor(i).data);
    return nullptr;
  }
};

using Ranks = std::vector<std::unique_ptr<Rank>>;

Ranks loadLayout(const Layout &layout, uint64_t seed, bool state = false) {
  Ranks ranks;
  for (const RankLayout &r : layout) {
    ranks.push_back(std::make_unique<Rank>());
    Status status = ranks.back()->load(rankProgram(r, seed, state));
    EXPECT_TRUE(status) << status.message();
  }
  return ranks;
}

/// --save-params' assembly of the ranks' slices.
std::vector<NamedTensor> gathered(const Ranks &ranks) {
  std::vector<std::string> all;
  for (const auto &r : ranks) {
    all.emplace_back();
    Status status = r->runtime->parameterSlices(all.back());
    EXPECT_TRUE(status) << status.message();
  }
  std::vector<NamedTensor> full;
  Status status = assembleParameters(all, full);
  EXPECT_TRUE(status) << status.message();
  return full;
}

void expectSameTensors(const std::vector<NamedTensor> &a,
                       const std::vector<NamedTensor> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].shape, b[i].shape);
    EXPECT_TRUE(a[i].bytes == b[i].bytes) << a[i].name << " differs";
  }
}

const float *floatsOf(const std::vector<NamedTensor> &full,
                      const std::string &name) {
  for (const NamedTensor &t : full)
    if (t.name == name)
      return reinterpret_cast<const float *>(t.bytes.data());
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

} // namespace

TEST(ParameterBoxes, TheC_attnBoxesOfRank1Of2) {
  // docs/tensor-parallel.md: c_attn.weight [192, 64] with T = 2, rank 1:
  // rows [32, 64), [96, 128), [160, 192).
  Holding h = blocked({192, 64}, 0, 3, 2, 1);
  ASSERT_EQ(h.boxes.size(), 3u);
  EXPECT_EQ(h.boxes[0].start, (std::vector<int64_t>{32, 0}));
  EXPECT_EQ(h.boxes[1].start, (std::vector<int64_t>{96, 0}));
  EXPECT_EQ(h.boxes[2].start, (std::vector<int64_t>{160, 0}));
  EXPECT_EQ(h.boxes[2].size, (std::vector<int64_t>{32, 64}));
}

TEST(ParameterBoxes, EachRankHoldsItsElementsOfTheOneRankInit) {
  Ranks one = loadLayout(tensorLayout(1), 7);
  std::vector<NamedTensor> full = gathered(one);
  for (const Layout &layout :
       {tensorLayout(2), tensorLayout(4), tensorZeroLayout()}) {
    Ranks ranks = loadLayout(layout, 7);
    for (size_t r = 0; r < ranks.size(); ++r)
      for (const ParamSpec &spec : kParams) {
        const Holding &h = layout[r].at(spec.name);
        std::vector<float> held = ranks[r]->values(spec.name);
        const float *whole = floatsOf(full, spec.name);
        ASSERT_GE(int64_t(held.size()), heldElements(h));
        for (int64_t e = 0; e < heldElements(h); ++e)
          ASSERT_EQ(held[e], whole[fullIndexOf(spec.shape, h, e)])
              << spec.name << " of rank " << r << " of " << ranks.size()
              << ", element " << e;
      }
    // And --save-params gathers them back into the one-rank parameters.
    expectSameTensors(gathered(ranks), full);
  }
}

TEST(ParameterBoxes, AGatherWithAnElementHeldByNoRankIsRefused) {
  Layout layout = tensorLayout(4);
  layout.pop_back(); // rank 3 missing: kv is whole still (rank 2 holds
                     // the same rows, a replica over the minor sub-axis)
  Ranks ranks = loadLayout(layout, 7);
  std::vector<std::string> all;
  for (const auto &r : ranks) {
    all.emplace_back();
    ASSERT_TRUE(r->runtime->parameterSlices(all.back()));
  }
  std::vector<NamedTensor> full;
  Status status = assembleParameters(all, full);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "parameter 'proj': part of it is held by no rank");
}

namespace {

/// Sets every rank's "NAME.exp_avg" to its elements' full indices + 0.5, so
/// a load can be checked element by element.
void fillState(Ranks &ranks, const Layout &layout) {
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const ParamSpec &spec : kParams) {
      const Holding &h = layout[r].at(spec.name);
      float *state = ranks[r]->data(spec.name + ".exp_avg");
      ASSERT_NE(state, nullptr);
      for (int64_t e = 0; e < heldElements(h); ++e)
        state[e] = float(fullIndexOf(spec.shape, h, e)) + 0.5f;
    }
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

/// The checkpoint of step 3 that the ranks of a layout write together:
/// each saves its own (a one-rank world), then their files and manifest
/// entries are put in one folder as rank 0 of the collective save would
/// (version 3 when some piece has boxes).
std::string saveTogether(Ranks &ranks, const std::string &folder) {
  std::string entries, head, tail;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::string root = folder + "/saved-" + std::to_string(r);
    CheckpointSaveTimes times;
    Status status = ranks[r]->runtime->saveCheckpoint(root, 3, nullptr, times);
    EXPECT_TRUE(status) << status.message();
    std::string step = checkpointFolder(root, 3);
    std::string text = readText(step + "/manifest.json");
    size_t open = text.find("\"ranks\": [");
    size_t close = text.rfind("]");
    EXPECT_NE(open, std::string::npos);
    head = text.substr(0, open + 10);
    tail = text.substr(close);
    std::string entry = text.substr(open + 10, close - open - 10);
    std::string file = "rank-" + std::to_string(r) + ".bin";
    replaceAll(entry, "\"rank\": 0,", "\"rank\": " + std::to_string(r) + ",");
    replaceAll(entry, "\"rank-0.bin\"", "\"" + file + "\"");
    entries += (r ? ",\n" : "") + entry;
    writeFile(folder + "/" + file, readText(step + "/rank-0.bin"));
  }
  replaceAll(head, "\"world_size\": 1",
             "\"world_size\": " + std::to_string(ranks.size()));
  replaceAll(head, "\"version\": 1", "\"version\": 3");
  writeFile(folder + "/manifest.json", head + entries + tail);
  return folder;
}

} // namespace

TEST(ParameterBoxes, CheckpointsReshardBetweenBoxLayouts) {
  struct Case {
    const char *name;
    Layout from, to;
  };
  std::vector<Case> cases = {
      {"tensor 2 -> tensor 4", tensorLayout(2), tensorLayout(4)},
      {"tensor 4 -> 1 rank", tensorLayout(4), tensorLayout(1)},
      {"1 rank -> tensor 2", tensorLayout(1), tensorLayout(2)},
      {"tensor 2 x ZeRO-3 2 -> tensor 4", tensorZeroLayout(), tensorLayout(4)},
      {"tensor 4 -> tensor 2 x ZeRO-3 2", tensorLayout(4), tensorZeroLayout()},
  };
  for (Case &c : cases) {
    SCOPED_TRACE(c.name);
    // Saved: seed 7 and a state of full indices; loaded into seed 9, so
    // nothing matches unless the load put it there.
    Ranks saving = loadLayout(c.from, 7, /*state=*/true);
    fillState(saving, c.from);
    std::vector<NamedTensor> saved = gathered(saving);
    TempDir dir;
    std::string folder = saveTogether(saving, dir.path());
    CheckpointManifest m;
    Status status = readCheckpointManifest(folder, m);
    ASSERT_TRUE(status) << status.message();
    EXPECT_EQ(m.worldSize, int64_t(c.from.size()));

    Ranks loading = loadLayout(c.to, 9, /*state=*/true);
    // (Its own initialization differs from what was saved.)
    EXPECT_NE(gathered(loading)[3].bytes, saved[3].bytes); // qkv
    for (auto &r : loading) {
      int64_t steps = 0;
      status = r->runtime->loadCheckpoint(folder, nullptr, steps);
      ASSERT_TRUE(status) << status.message();
      EXPECT_EQ(steps, 3);
    }
    expectSameTensors(gathered(loading), saved);
    for (size_t r = 0; r < loading.size(); ++r)
      for (const ParamSpec &spec : kParams) {
        const Holding &h = c.to[r].at(spec.name);
        std::vector<float> state = loading[r]->values(spec.name + ".exp_avg");
        for (int64_t e = 0; e < heldElements(h); ++e)
          ASSERT_EQ(state[e], float(fullIndexOf(spec.shape, h, e)) + 0.5f)
              << spec.name << ".exp_avg of rank " << r << ", element " << e;
      }
  }
}

TEST(ParameterBoxes, BadBoxesInACheckpointNameFileAndTensor) {
  Layout layout = tensorLayout(2);
  Ranks saving = loadLayout(layout, 7, /*state=*/true);
  TempDir dir;
  std::string folder = saveTogether(saving, dir.path());
  std::string good = readText(folder + "/manifest.json");
  std::string manifestPath = folder + "/manifest.json";
  // Rank 1's qkv boxes are rows [2, 4), [6, 8), [10, 12).
  std::string box1 = "{\"start\": [6, 0], \"size\": [2, 4]}";
  ASSERT_NE(good.find(box1), std::string::npos) << good;
  struct Bad {
    std::string from, to, expected;
  };
  std::vector<Bad> bad = {
      {box1, "{\"start\": [3, 0], \"size\": [2, 4]}",
       manifestPath + ": rank 1: tensor 'qkv': box 1 (from [3, 0] of size "
                      "[2, 4]) overlaps box 0 (from [2, 0] of size [2, 4])"},
      {box1, "{\"start\": [6, 0], \"size\": [1, 4]}",
       manifestPath + ": rank 1: tensor 'qkv': its boxes concatenated along "
                      "axis 0 are 5 long, its slice [6, 4] 6"},
      {box1, "{\"start\": [11, 0], \"size\": [2, 4]}",
       manifestPath + ": rank 1: tensor 'qkv': box 1 (from [11, 0] of size "
                      "[2, 4]) does not lie in [12, 4]"},
      {box1, "{\"start\": [6, 0], \"size\": [2, 3]}",
       manifestPath + ": rank 1: tensor 'qkv': box 1 (from [6, 0] of size "
                      "[2, 3]) is not 4 wide in axis 1 as its slice [6, 4]"},
  };
  for (const Bad &b : bad) {
    std::string text = good;
    // The first occurrence: the parameter's (its state's comes after).
    text.replace(text.find(b.from), b.from.size(), b.to);
    writeFile(manifestPath, text);
    CheckpointManifest m;
    Status status = readCheckpointManifest(folder, m);
    ASSERT_FALSE(status) << b.to;
    EXPECT_EQ(status.message(), b.expected);
  }
  // Boxes that are each fine but leave rows [10, 12) of qkv to no rank:
  // the load of a 1-rank program names the manifest, the tensor and the
  // hole, and loads nothing.
  std::string text = good;
  std::string last = "{\"start\": [10, 0], \"size\": [2, 4]}";
  for (size_t at = text.find(last); at != std::string::npos;
       at = text.find(last))
    text.replace(at, last.size(), "{\"start\": [0, 0], \"size\": [2, 4]}");
  // Rank 0 holds [0, 2) too: an overlap across ranks, which replicas may
  // have.
  writeFile(manifestPath, text);
  CheckpointManifest m;
  ASSERT_TRUE(readCheckpointManifest(folder, m));
  Ranks loading = loadLayout(tensorLayout(1), 9, /*state=*/true);
  std::vector<NamedTensor> before = gathered(loading);
  int64_t steps = 0;
  Status status = loading[0]->runtime->loadCheckpoint(folder, nullptr, steps);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find(manifestPath + ": tensor 'qkv': "),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("are held by no rank of the checkpoint"),
            std::string::npos)
      << status.message();
  expectSameTensors(gathered(loading), before);
}
