//===- TestPrograms.h - small per-rank programs built in C++ for tests ----===//
//
// The runtime's tests do not depend on the compiler: they write programs
// directly. ProgramBuilder lays tensors out in one buffer at 64-byte
// offsets; tinyLanguageModel() is a complete forward program with a loss
// (embedding -> matmul -> add -> cross-entropy) whose loss the tests also
// compute by hand.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_TEST_RUNTIME_TESTPROGRAMS_H
#define CLEAVE_TEST_RUNTIME_TESTPROGRAMS_H

#include "program.pb.h"
#include "runtime/ProgramSeal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace cleave::test {

namespace pb = cleave::program;

/// A fresh folder under the test temp dir, removed with its files.
class TempDir {
public:
  TempDir() {
    std::string pattern = "/tmp/cleave-runtime-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data()) ? buf.data() : "/tmp";
  }
  ~TempDir() {
    std::string command = "rm -rf '" + path_ + "'";
    if (path_ != "/tmp")
      (void)std::system(command.c_str());
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

template <typename T> std::string bytesOf(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}

class ProgramBuilder {
public:
  explicit ProgramBuilder(int rank = 0, int worldSize = 1) {
    p.set_magic("cleave-program");
    p.set_version(pb::VERSION_CURRENT);
    p.set_model("test.onnx");
    pb::Mesh *mesh = p.mutable_mesh();
    mesh->set_rank(rank);
    mesh->set_world_size(worldSize);
    mesh->set_data_degree(worldSize);
    mesh->set_pipeline_degree(1);
    mesh->set_tensor_degree(1);
    mesh->set_data_rank(rank);
    pb::Buffer *buffer = p.add_buffers();
    buffer->set_space(pb::DEVICE);
    buffer->set_alignment(64);
    p.mutable_memory();
  }

  /// A group of world ranks; returns its id.
  int group(const std::string &name, std::vector<int> ranks) {
    pb::Group *g = p.mutable_mesh()->add_groups();
    g->set_name(name);
    for (int r : ranks)
      g->add_ranks(r);
    return p.mesh().groups_size() - 1;
  }

  int tensor(std::vector<int64_t> shape, pb::DType dtype,
             pb::Category category, const std::string &name = "") {
    pb::Tensor *t = p.add_tensors();
    t->set_buffer(0);
    t->set_offset(end_);
    uint64_t bytes = elementSize(dtype);
    for (int64_t d : shape) {
      t->add_shape(d);
      bytes *= uint64_t(d);
    }
    t->set_dtype(dtype);
    t->set_category(category);
    t->set_name(name);
    end_ += (bytes + 63) / 64 * 64;
    p.mutable_buffers(0)->set_size_bytes(end_);
    return p.tensors_size() - 1;
  }
  int f32(std::vector<int64_t> shape, const std::string &name = "",
          pb::Category category = pb::ACTIVATIONS) {
    return tensor(std::move(shape), pb::F32, category, name);
  }
  int constant(std::vector<int64_t> shape, const std::vector<float> &values,
               const std::string &name = "") {
    int id = tensor(std::move(shape), pb::F32, pb::CONSTANTS, name);
    p.mutable_tensors(id)->set_data(bytesOf(values));
    return id;
  }

  int function(const std::string &name, pb::FunctionKind kind) {
    pb::Function *f = p.add_functions();
    f->set_name(name);
    f->set_kind(kind);
    return p.functions_size() - 1;
  }
  pb::Kernel *kernel(int fn, const std::string &op, std::vector<int> inputs,
                     std::vector<int> outputs) {
    pb::Kernel *k = p.mutable_functions(fn)->add_body()->mutable_kernel();
    k->set_op(op);
    k->set_location("/" + op);
    for (int i : inputs)
      k->add_inputs(i);
    for (int o : outputs)
      k->add_outputs(o);
    return k;
  }
  void free(int fn, int tensor) {
    p.mutable_functions(fn)->add_body()->mutable_free()->set_tensor(tensor);
  }
  void step(int fn, int microbatch) {
    pb::Step *s = p.add_schedule();
    s->set_function(fn);
    s->set_microbatch(microbatch);
  }

  pb::Parameter *parameter(const std::string &name, int tensor) {
    pb::Parameter *param = p.add_parameters();
    param->set_name(name);
    param->set_tensor(tensor);
    for (int64_t d : p.tensors(tensor).shape()) {
      param->add_full_shape(d);
      param->add_slice_start(0);
      param->add_slice_size(d);
    }
    return param;
  }
  /// A parameter whose full tensor is `values`, appended to `paramsBin`.
  pb::Parameter *fileParameter(const std::string &name, int tensor,
                               const std::vector<float> &values) {
    pb::Parameter *param = parameter(name, tensor);
    pb::FileData *file = param->mutable_file();
    file->set_path("params.bin");
    file->set_offset(paramsBin.size());
    file->set_size_bytes(values.size() * 4);
    file->set_sha256(runtime::sha256Hex(bytesOf(values))); // as the emitter
    paramsBin += bytesOf(values);
    return param;
  }
  void binding(bool input, const std::string &name, int tensor,
               pb::BindingRole role) {
    pb::Binding *b = input ? p.add_inputs() : p.add_outputs();
    b->set_name(name);
    b->set_tensor(tensor);
    b->set_role(role);
  }

  /// The program's file bytes, sealed as cleave-compile seals them
  /// (runtime/ProgramSeal.h) with compile fingerprint `fingerprint`.
  std::string sealed(const std::string &fingerprint = "test") const {
    return runtime::sealProgram(p.SerializeAsString(), fingerprint);
  }

  /// Writes rank-<rank>.pb and params.bin into `dir`; returns the program's
  /// path.
  std::string write(const std::string &dir) const {
    std::string path = dir + "/rank-" + std::to_string(p.mesh().rank()) + ".pb";
    writeFile(path, sealed());
    writeFile(dir + "/params.bin", paramsBin);
    return path;
  }

  static uint64_t elementSize(pb::DType dtype) {
    switch (dtype) {
    case pb::F64: case pb::I64: case pb::U64: return 8;
    case pb::F32: case pb::I32: case pb::U32: return 4;
    case pb::F16: case pb::BF16: case pb::I16: case pb::U16: return 2;
    default: return 1;
    }
  }

  pb::Program p;
  std::string paramsBin;

private:
  uint64_t end_ = 0;
};

/// The ids of tinyLanguageModel's interesting tensors.
struct TinyModel {
  ProgramBuilder b;
  int tokens, targets, embedding, weight, bias, loss, forward;
  int64_t vocab, dim, microbatchSize, microbatches, seqLen;
  std::vector<float> embeddingValues, weightValues;
};

/// loss = cross_entropy(embedding(E, tokens) @ W + b, targets), mean over
/// the microbatch's tokens. E comes from params.bin, W too, b is "zeros".
/// `globalBatch` and `firstSample` place this rank's samples.
inline TinyModel tinyLanguageModel(int64_t microbatches = 2,
                                   int64_t microbatchSize = 2,
                                   int64_t seqLen = 3, int64_t vocab = 5,
                                   int64_t dim = 4, int rank = 0,
                                   int worldSize = 1) {
  TinyModel m{ProgramBuilder(rank, worldSize)};
  m.vocab = vocab;
  m.dim = dim;
  m.microbatchSize = microbatchSize;
  m.microbatches = microbatches;
  m.seqLen = seqLen;
  ProgramBuilder &b = m.b;
  std::vector<int> world;
  for (int r = 0; r < worldSize; ++r)
    world.push_back(r);
  b.group("data", world);
  pb::Batch *batch = b.p.mutable_batch();
  batch->set_global_batch(microbatches * microbatchSize * worldSize);
  batch->set_microbatch_size(microbatchSize);
  batch->set_microbatches(microbatches);
  batch->set_seq_len(seqLen);
  batch->set_first_sample(rank * microbatches * microbatchSize);

  m.embedding = b.f32({vocab, dim}, "wte", pb::PARAMETERS);
  m.weight = b.f32({dim, vocab}, "head.weight", pb::PARAMETERS);
  m.bias = b.f32({vocab}, "head.bias", pb::PARAMETERS);
  for (int64_t i = 0; i < vocab * dim; ++i) {
    m.embeddingValues.push_back(std::sin(0.7f * float(i)) * 0.5f);
    m.weightValues.push_back(std::cos(0.3f * float(i)) * 0.5f);
  }
  b.fileParameter("wte", m.embedding, m.embeddingValues);
  b.fileParameter("head.weight", m.weight, m.weightValues);
  b.parameter("head.bias", m.bias)->set_generator("zeros");

  m.tokens = b.tensor({microbatchSize, seqLen}, pb::I64, pb::IO, "idx");
  m.targets = b.tensor({microbatchSize, seqLen}, pb::I64, pb::IO, "targets");
  b.binding(true, "idx", m.tokens, pb::TOKENS);
  b.binding(true, "targets", m.targets, pb::TARGETS);

  m.forward = b.function("forward", pb::FORWARD);
  int x = b.f32({microbatchSize, seqLen, dim}, "x");
  int logits = b.f32({microbatchSize, seqLen, vocab}, "logits");
  int biased = b.f32({microbatchSize, seqLen, vocab}, "biased");
  int flat = b.f32({microbatchSize * seqLen, vocab}, "flat");
  int flatTargets =
      b.tensor({microbatchSize * seqLen}, pb::I64, pb::ACTIVATIONS, "flat_t");
  m.loss = b.f32({}, "loss");
  b.kernel(m.forward, "embedding", {m.embedding, m.tokens}, {x});
  b.kernel(m.forward, "matmul", {x, m.weight}, {logits});
  b.free(m.forward, x);
  b.kernel(m.forward, "add", {logits, m.bias}, {biased});
  b.free(m.forward, logits);
  b.kernel(m.forward, "reshape", {biased}, {flat});
  b.free(m.forward, biased);
  b.kernel(m.forward, "reshape", {m.targets}, {flatTargets});
  pb::Kernel *ce = b.kernel(m.forward, "softmax_cross_entropy",
                            {flat, flatTargets}, {m.loss});
  (*ce->mutable_attributes())["reduction"].set_s("mean");
  b.free(m.forward, flat);
  b.free(m.forward, flatTargets);
  b.binding(false, "loss", m.loss, pb::LOSS);
  for (int64_t mb = 0; mb < microbatches; ++mb)
    b.step(m.forward, int(mb));
  b.p.mutable_memory()->set_peak_bytes(b.p.buffers(0).size_bytes());
  return m;
}

/// tinyLanguageModel's loss for samples [first, first + count) of `step`,
/// computed directly (double precision) from the token stream.
inline double tinyModelLoss(const TinyModel &m,
                            const std::vector<uint16_t> &tokens, int64_t step,
                            int64_t globalBatch, int64_t first,
                            int64_t count) {
  int64_t n = int64_t(tokens.size()), T = m.seqLen, V = m.vocab, D = m.dim;
  double total = 0;
  for (int64_t j = first; j < first + count; ++j) {
    int64_t start = ((step * globalBatch + j) * T) % n;
    for (int64_t t = 0; t < T; ++t) {
      int64_t id = tokens[(start + t) % n], target = tokens[(start + t + 1) % n];
      std::vector<double> logits(V, 0.0);
      for (int64_t v = 0; v < V; ++v)
        for (int64_t d = 0; d < D; ++d)
          logits[v] += double(m.embeddingValues[id * D + d]) *
                       double(m.weightValues[d * V + v]);
      double maxLogit = logits[0];
      for (double l : logits)
        maxLogit = std::max(maxLogit, l);
      double sum = 0;
      for (double l : logits)
        sum += std::exp(l - maxLogit);
      total += std::log(sum) + maxLogit - logits[target];
    }
  }
  return total / double(count * T);
}

} // namespace cleave::test

#endif // CLEAVE_TEST_RUNTIME_TESTPROGRAMS_H
