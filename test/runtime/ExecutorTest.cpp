//===- ExecutorTest.cpp - programs run through the Runtime ----------------===//
//
// Small programs built in C++ (TestPrograms.h) run on one rank without MPI:
// losses against a direct computation, the batch rule, parameter loading
// and generation (slices equal slices of the full init), gradients zeroed
// per step, forward-only, live-byte accounting, errors that name the step
// and the instruction, and gathering the parameters for --save-params.
//
//===----------------------------------------------------------------------===//

#include "TestPrograms.h"
#include "runtime/Executor.h"
#include "runtime/ProgramLoader.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

/// A written, loaded program and a runtime for it on a one-rank world.
struct Loaded {
  TempDir dir;
  pb::Program program;
  Communicator comm;
  std::unique_ptr<Runtime> runtime;

  Status load(const ProgramBuilder &b, RunOptions options = {},
              std::unique_ptr<Backend> backend = nullptr) {
    std::string path = b.write(dir.path());
    CLEAVE_CHECK(loadProgram(path, program));
    runtime = std::make_unique<Runtime>(program, dir.path(), comm, options,
                                        std::move(backend));
    return runtime->initialize();
  }
};

std::vector<float> floats(const TensorRef &t) {
  const float *p = t.as<float>();
  return std::vector<float>(p, p + t.numElements());
}

std::vector<uint16_t> testTokens(int n, int vocab) {
  std::vector<uint16_t> tokens(n);
  for (int i = 0; i < n; ++i)
    tokens[i] = uint16_t((i * 7 + i / 3) % vocab);
  return tokens;
}

TEST(Executor, TinyModelLossEqualsDirectComputation) {
  TinyModel m = tinyLanguageModel(/*microbatches=*/2, /*microbatchSize=*/2);
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  std::vector<uint16_t> tokens = testTokens(29, int(m.vocab));
  TokenData data = TokenData::fromTokens(tokens);
  for (int64_t step = 0; step < 4; ++step) {
    StepResult r;
    Status status = l.runtime->runStep(step, &data, r);
    ASSERT_TRUE(status) << status.message();
    ASSERT_TRUE(r.hasLoss);
    double expected = tinyModelLoss(m, tokens, step, 4, 0, 4);
    EXPECT_NEAR(r.loss, expected, 1e-5 * expected) << "step " << step;
    EXPECT_GT(r.seconds, 0);
    // Two matmuls of [2*3, 4] x [4, 5] per step.
    EXPECT_EQ(r.flops, 2 * (2.0 * 2 * 3 * 5 * 4));
  }
}

// The staged backend's memory faults when touched outside its calls, and a
// program on it computes what it computes on the CPU backend, bit for bit
// (readTensor goes through the backend).
TEST(Executor, StagedBackendMatchesTheCpuAndGuardsItsMemory) {
  TinyModel m = tinyLanguageModel(/*microbatches=*/2, /*microbatchSize=*/2);
  Loaded cpu, staged;
  ASSERT_TRUE(cpu.load(m.b));
  ASSERT_TRUE(staged.load(m.b, {}, makeStagedCpuBackend()));
  EXPECT_STREQ(staged.runtime->backend().name(), "cpu-staged");
  EXPECT_FALSE(staged.runtime->backend().hostMemory());
  std::vector<uint16_t> tokens = testTokens(29, int(m.vocab));
  TokenData data = TokenData::fromTokens(tokens);
  for (int64_t step = 0; step < 3; ++step) {
    StepResult a, b;
    ASSERT_TRUE(cpu.runtime->runStep(step, &data, a));
    ASSERT_TRUE(staged.runtime->runStep(step, &data, b));
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
  }
  for (int id = 0; id < cpu.program.tensors_size(); ++id) {
    std::vector<char> x, y;
    ASSERT_TRUE(cpu.runtime->readTensor(id, x));
    ASSERT_TRUE(staged.runtime->readTensor(id, y));
    EXPECT_EQ(x, y) << "tensor " << cpu.program.tensors(id).name();
  }
  const volatile char *memory =
      static_cast<const char *>(staged.runtime->tensor(0).data);
  EXPECT_DEATH((void)*memory, "");
}

TEST(Executor, MicrobatchesReadTheirOwnSamples) {
  // The last microbatch's ids are in the tokens tensor after a step:
  // samples 2 and 3 of step 1 with B = 4, T = 3 start at 18 and 21.
  TinyModel m = tinyLanguageModel(2, 2);
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  std::vector<uint16_t> tokens = testTokens(40, 5);
  TokenData data = TokenData::fromTokens(tokens);
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(1, &data, r));
  const int64_t *ids = l.runtime->tensor(m.tokens).as<int64_t>();
  const int64_t *targets = l.runtime->tensor(m.targets).as<int64_t>();
  for (int i = 0; i < 2; ++i)
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(ids[i * 3 + t], tokens[18 + 3 * i + t]);
      EXPECT_EQ(targets[i * 3 + t], tokens[19 + 3 * i + t]);
    }
}

TEST(Executor, DataRankTakesItsSlice) {
  // A rank whose samples are 4..7 of a global batch of 8 (as data rank 1
  // of 2 would be) averages the loss over those samples.
  TinyModel m = tinyLanguageModel(2, 2);
  m.b.p.mutable_batch()->set_global_batch(8);
  m.b.p.mutable_batch()->set_first_sample(4);
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  std::vector<uint16_t> tokens = testTokens(50, 5);
  TokenData data = TokenData::fromTokens(tokens);
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(2, &data, r));
  double expected = tinyModelLoss(m, tokens, 2, 8, 4, 4);
  EXPECT_NEAR(r.loss, expected, 1e-5 * expected);
}

TEST(Executor, NoTokenData) {
  TinyModel m = tinyLanguageModel();
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  StepResult r;
  Status status = l.runtime->runStep(0, nullptr, r);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "step 0, schedule[0] (functions[0] 'forward', microbatch 0): "
            "functions[0] 'forward' reads token ids, but no token data was "
            "given");
}

TEST(Executor, KernelErrorNamesStepAndInstruction) {
  TinyModel m = tinyLanguageModel();
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  // A token id past the vocabulary: the embedding refuses it.
  TokenData data = TokenData::fromTokens({1, 2, 9, 3, 4, 0, 1, 2, 3});
  StepResult r;
  Status status = l.runtime->runStep(0, &data, r);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message().rfind(
                "step 0, schedule[0] (functions[0] 'forward', microbatch 0): "
                "functions[0].body[0].kernel 'embedding' (/embedding): "
                "embedding: ",
                0),
            0u)
      << status.message();
}

TEST(Executor, ParametersFromFileAndGenerators) {
  TinyModel m = tinyLanguageModel();
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  EXPECT_EQ(floats(l.runtime->tensor(m.embedding)), m.embeddingValues);
  EXPECT_EQ(floats(l.runtime->tensor(m.weight)), m.weightValues);
  EXPECT_EQ(floats(l.runtime->tensor(m.bias)), std::vector<float>(5, 0.0f));
}

TEST(Executor, FileSliceIsTheSliceOfTheFullTensor) {
  ProgramBuilder b;
  b.p.mutable_batch()->set_microbatches(1);
  int fn = b.function("forward", pb::FORWARD);
  b.step(fn, 0);
  std::vector<float> full(4 * 5);
  for (int i = 0; i < 20; ++i)
    full[i] = float(i);
  int w = b.f32({2, 3}, "w", pb::PARAMETERS);
  pb::Parameter *param = b.fileParameter("w", w, full);
  param->clear_full_shape();
  param->add_full_shape(4);
  param->add_full_shape(5);
  param->set_slice_start(0, 1);
  param->set_slice_start(1, 2);
  Loaded l;
  Status status = l.load(b, {true});
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(floats(l.runtime->tensor(w)),
            (std::vector<float>{7, 8, 9, 12, 13, 14}));
}

TEST(Executor, GeneratedSliceIsTheSliceOfTheFullInit) {
  // delayed_parameter_initialization: a rank's shard equals its slice of
  // the full tensor's init, whatever the layout.
  ProgramBuilder b;
  b.p.mutable_batch()->set_microbatches(1);
  int fn = b.function("forward", pb::FORWARD);
  b.step(fn, 0);
  int full = b.f32({4, 6}, "full", pb::PARAMETERS);
  int slice = b.f32({4, 3}, "slice", pb::PARAMETERS);
  int ones = b.tensor({3}, pb::I32, pb::PARAMETERS, "ones");
  b.parameter("w", full)->set_generator("normal:0.5");
  pb::Parameter *shard = b.parameter("w-shard", slice);
  shard->set_generator("normal:0.5");
  shard->set_name("w"); // same name, so the same stream
  shard->set_full_shape(1, 6);
  shard->set_slice_start(1, 3);
  b.parameter("ones", ones)->set_generator("ones");
  // Two parameters may not share a name; a second program holds the shard.
  ProgramBuilder c = b;
  b.p.mutable_parameters()->DeleteSubrange(1, 1);
  b.p.mutable_tensors(slice)->set_category(pb::ACTIVATIONS);
  c.p.mutable_parameters()->DeleteSubrange(0, 1);
  c.p.mutable_tensors(full)->set_category(pb::ACTIVATIONS);

  Loaded whole, part;
  ASSERT_TRUE(whole.load(b));
  ASSERT_TRUE(part.load(c));
  std::vector<float> f = floats(whole.runtime->tensor(full));
  std::vector<float> s = floats(part.runtime->tensor(slice));
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(s[r * 3 + k], f[r * 6 + 3 + k]);
  EXPECT_NE(f[0], f[1]);
  const int32_t *o = whole.runtime->tensor(ones).as<int32_t>();
  EXPECT_EQ(o[0] + o[1] + o[2], 3);
}

TEST(Executor, NormalGeneratorStatistics) {
  double sum = 0, squares = 0;
  const int n = 200000;
  for (int k = 0; k < n; ++k) {
    double v = generatedNormal(1234, "h.0.attn.weight", k);
    sum += v;
    squares += v * v;
  }
  double mean = sum / n, var = squares / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
  EXPECT_NE(generatedNormal(1, "a", 0), generatedNormal(1, "b", 0));
  EXPECT_NE(generatedNormal(1, "a", 0), generatedNormal(2, "a", 0));
  EXPECT_EQ(generatedNormal(1, "a", 5), generatedNormal(1, "a", 5));
}

/// w <- w - lr * sum over microbatches of c, the "gradient" of loss =
/// sum(w * c): a program with forward, backward and optimizer functions.
struct TrainingProgram {
  ProgramBuilder b;
  int w, grad, loss, forward, backward, optimizer;
};

TrainingProgram trainingProgram() {
  TrainingProgram t;
  ProgramBuilder &b = t.b;
  b.group("data", {0});
  b.p.mutable_batch()->set_microbatches(2);
  t.w = b.f32({3}, "w", pb::PARAMETERS);
  b.parameter("w", t.w)->set_generator("ones");
  int c = b.constant({3}, {1.0f, 2.0f, 3.0f}, "c");
  int lr = b.constant({}, {0.25f}, "lr");
  t.grad = b.f32({3}, "w.grad", pb::GRADIENTS);
  t.loss = b.f32({}, "loss");
  int y = b.f32({3}, "y");
  int update = b.f32({3}, "update", pb::WORKSPACE);
  b.binding(false, "loss", t.loss, pb::LOSS);

  t.forward = b.function("forward", pb::FORWARD);
  b.kernel(t.forward, "mul", {t.w, c}, {y});
  auto *sum = b.kernel(t.forward, "reduce_sum", {y}, {t.loss});
  (*sum->mutable_attributes())["axes"].mutable_ints()->add_values(0);
  (*sum->mutable_attributes())["keepdims"].set_i(0);
  b.free(t.forward, y);

  t.backward = b.function("backward", pb::BACKWARD);
  b.kernel(t.backward, "add", {t.grad, c}, {t.grad});

  t.optimizer = b.function("adamw", pb::OPTIMIZER);
  b.kernel(t.optimizer, "mul", {t.grad, lr}, {update});
  b.kernel(t.optimizer, "sub", {t.w, update}, {t.w});
  b.free(t.optimizer, update);

  b.step(t.forward, 0);
  b.step(t.backward, 0);
  b.step(t.forward, 1);
  b.step(t.backward, 1);
  b.step(t.optimizer, -1);
  return t;
}

TEST(Executor, GradientsAreZeroedEachStep) {
  TrainingProgram t = trainingProgram();
  Loaded l;
  Status status = l.load(t.b);
  ASSERT_TRUE(status) << status.message();
  EXPECT_TRUE(l.runtime->hasBackward());
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(0, nullptr, r));
  EXPECT_FLOAT_EQ(r.loss, 6.0f); // sum(1 * c), both microbatches
  // grad = 2c, w = 1 - 0.25 * 2c.
  EXPECT_EQ(floats(l.runtime->tensor(t.grad)), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(floats(l.runtime->tensor(t.w)),
            (std::vector<float>{0.5f, 0.0f, -0.5f}));
  ASSERT_TRUE(l.runtime->runStep(1, nullptr, r));
  EXPECT_FLOAT_EQ(r.loss, 0.5f + 0.0f - 1.5f);
  // Zeroed at the step's start, so again 2c (not 4c).
  EXPECT_EQ(floats(l.runtime->tensor(t.grad)), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(floats(l.runtime->tensor(t.w)),
            (std::vector<float>{0.0f, -1.0f, -2.0f}));
}

TEST(Executor, ForwardOnlySkipsBackwardAndOptimizer) {
  TrainingProgram t = trainingProgram();
  Loaded l;
  ASSERT_TRUE(l.load(t.b, {/*forwardOnly=*/true}));
  StepResult r;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(l.runtime->runStep(step, nullptr, r));
    EXPECT_FLOAT_EQ(r.loss, 6.0f);
  }
  EXPECT_EQ(floats(l.runtime->tensor(t.w)), (std::vector<float>{1, 1, 1}));
}

TEST(Executor, LiveBytesFollowWritesAndFrees) {
  ProgramBuilder b;
  b.p.mutable_batch()->set_microbatches(1);
  int w = b.f32({16}, "w", pb::PARAMETERS); // 64 bytes, always live
  b.parameter("w", w)->set_generator("ones");
  b.constant({4}, {1, 2, 3, 4}, "c"); // 16 bytes, always live
  int a = b.f32({16}, "a");                   // 64
  int d = b.f32({32}, "d");                   // 128
  int e = b.f32({16}, "e");                   // 64
  int fn = b.function("forward", pb::FORWARD);
  b.kernel(fn, "add", {w, w}, {a});          // live 64+16+64 = 144
  auto *concat = b.kernel(fn, "concat", {a, a}, {d}); // 272: the peak
  (*concat->mutable_attributes())["axis"].set_i(0);
  b.free(fn, a);                             // 208
  b.free(fn, d);                             // 80
  b.kernel(fn, "neg", {w}, {e});             // 144
  auto *ev = b.p.mutable_functions(fn)->add_body()->mutable_event();
  ev->set_id(1);
  b.step(fn, 0);
  Loaded l;
  Status status = l.load(b, {true});
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(l.runtime->liveBytes(), 80u);
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(0, nullptr, r));
  EXPECT_FALSE(r.hasLoss);
  EXPECT_EQ(r.peakBytes, 272u);
  EXPECT_EQ(l.runtime->liveBytes(), 144u);
  EXPECT_GT(r.rssPeakBytes, 0u);
  EXPECT_EQ(floats(l.runtime->tensor(e)), std::vector<float>(16, -1.0f));
}

TEST(Executor, CopyAndSingleRankCollectives) {
  ProgramBuilder b;
  int g = b.group("data", {0});
  b.p.mutable_batch()->set_microbatches(1);
  int src = b.constant({4}, {1, 2, 3, 4}, "src");
  int copied = b.f32({4}, "copied");
  int reduced = b.f32({4}, "reduced");
  int gathered = b.f32({4}, "gathered");
  int fn = b.function("forward", pb::FORWARD);
  auto *copy = b.p.mutable_functions(fn)->add_body()->mutable_copy();
  copy->set_source(src);
  copy->set_destination(copied);
  for (auto [kind, out] : {std::pair{pb::ALL_REDUCE, reduced},
                           std::pair{pb::ALL_GATHER, gathered}}) {
    auto *c = b.p.mutable_functions(fn)->add_body()->mutable_collective();
    c->set_kind(kind);
    c->set_group(g);
    c->set_reduce(pb::MEAN);
    c->add_inputs(copied);
    c->add_outputs(out);
  }
  b.step(fn, 0);
  Loaded l;
  Status status = l.load(b, {true});
  ASSERT_TRUE(status) << status.message();
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(0, nullptr, r));
  std::vector<float> expected = {1, 2, 3, 4};
  EXPECT_EQ(floats(l.runtime->tensor(copied)), expected);
  EXPECT_EQ(floats(l.runtime->tensor(reduced)), expected);
  EXPECT_EQ(floats(l.runtime->tensor(gathered)), expected);
}

// A started all-gather (ZeRO-3 prefetch) completes at its event's wait,
// with a kernel between the two; its result is read after the wait.
TEST(Executor, StartedAllGatherCompletesAtItsWait) {
  ProgramBuilder b;
  int g = b.group("data", {0});
  b.p.mutable_batch()->set_microbatches(1);
  int src = b.constant({4}, {1, 2, 3, 4}, "src");
  int gathered = b.f32({4}, "gathered");
  int between = b.f32({4}, "between");
  int doubled = b.f32({4}, "doubled");
  int fn = b.function("forward", pb::FORWARD);
  auto *c = b.p.mutable_functions(fn)->add_body()->mutable_collective();
  c->set_kind(pb::ALL_GATHER);
  c->set_group(g);
  c->set_event(1);
  c->add_inputs(src);
  c->add_outputs(gathered);
  b.kernel(fn, "neg", {src}, {between});
  auto *wait = b.p.mutable_functions(fn)->add_body()->mutable_event();
  wait->set_id(1);
  wait->set_wait(true);
  b.kernel(fn, "add", {gathered, gathered}, {doubled});
  b.step(fn, 0);
  Loaded l;
  Status status = l.load(b, {true});
  ASSERT_TRUE(status) << status.message();
  StepResult r;
  ASSERT_TRUE(l.runtime->runStep(0, nullptr, r));
  EXPECT_EQ(floats(l.runtime->tensor(gathered)),
            (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(floats(l.runtime->tensor(between)),
            (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(floats(l.runtime->tensor(doubled)),
            (std::vector<float>{2, 4, 6, 8}));
}

TEST(Executor, GatherParametersOfOneRank) {
  TinyModel m = tinyLanguageModel();
  Loaded l;
  ASSERT_TRUE(l.load(m.b));
  std::vector<NamedTensor> full;
  ASSERT_TRUE(l.runtime->gatherParameters(full));
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[0].name, "head.bias");
  EXPECT_EQ(full[1].name, "head.weight");
  EXPECT_EQ(full[1].shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(full[1].bytes, bytesOf(m.weightValues));
  EXPECT_EQ(full[2].name, "wte");
  ASSERT_TRUE(l.runtime->saveParameters(l.dir.file("p.safetensors")));
}

TEST(Executor, GatherRefusesAnUncoveredParameter) {
  // One rank holding half a tensor cannot save the whole of it.
  ProgramBuilder b;
  b.p.mutable_batch()->set_microbatches(1);
  int fn = b.function("forward", pb::FORWARD);
  b.step(fn, 0);
  int w = b.f32({2}, "w", pb::PARAMETERS);
  pb::Parameter *param = b.parameter("w", w);
  param->set_generator("ones");
  param->set_full_shape(0, 4);
  Loaded l;
  ASSERT_TRUE(l.load(b, {true}));
  std::vector<NamedTensor> full;
  Status status = l.runtime->gatherParameters(full);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "parameter 'w': part of it is held by no rank");
}

TEST(Executor, KernelFlops) {
  std::vector<TensorRef> in = {TensorRef{nullptr, {8, 16}, DType::F32},
                               TensorRef{nullptr, {16, 32}, DType::F32}};
  std::vector<TensorRef> out = {TensorRef{nullptr, {8, 32}, DType::F32}};
  EXPECT_EQ(kernelFlops("matmul", {}, in, out), 2.0 * 8 * 32 * 16);
  EXPECT_EQ(kernelFlops("add", {}, in, out), 0);
  // lhs stored [K, M] = [16, 8], rhs [N, K] = [32, 16].
  AttrValue yes;
  yes.i = 1;
  std::vector<TensorRef> transposed = {
      TensorRef{nullptr, {16, 8}, DType::F32},
      TensorRef{nullptr, {32, 16}, DType::F32}};
  EXPECT_EQ(kernelFlops("matmul",
                        {{"transpose_lhs", yes}, {"transpose_rhs", yes}},
                        transposed, out),
            2.0 * 8 * 32 * 16);
  // A batched product: [3, 8, 16] x [16, 32].
  std::vector<TensorRef> batched = {TensorRef{nullptr, {3, 8, 16}, DType::F32},
                                    in[1]};
  std::vector<TensorRef> batchedOut = {
      TensorRef{nullptr, {3, 8, 32}, DType::F32}};
  EXPECT_EQ(kernelFlops("matmul", {}, batched, batchedOut),
            2.0 * 3 * 8 * 32 * 16);

  std::vector<TensorRef> qkv = {TensorRef{nullptr, {2, 4, 10, 8}, DType::F32},
                                TensorRef{nullptr, {2, 4, 12, 8}, DType::F32},
                                TensorRef{nullptr, {2, 4, 12, 8}, DType::F32}};
  EXPECT_EQ(kernelFlops("attention", {}, qkv, out), 4.0 * 2 * 4 * 10 * 8 * 12);
  // attention_grad(dy, q, k, v): five products, 2.5 times the forward.
  std::vector<TensorRef> grad = {qkv[0], qkv[0], qkv[1], qkv[2]};
  EXPECT_EQ(kernelFlops("attention_grad", {}, grad, qkv),
            10.0 * 2 * 4 * 10 * 8 * 12);
}

/// One parameter trained by sgd: backward accumulates the constant
/// gradient c into w.grad; the optimizer reads the step count from a STEP
/// input, so a warmup schedule shows which step the runtime gave it.
struct SgdProgram {
  ProgramBuilder b;
  int w, grad, step;
};

SgdProgram sgdProgram() {
  SgdProgram t;
  ProgramBuilder &b = t.b;
  b.group("data", {0});
  b.p.mutable_batch()->set_microbatches(2);
  t.w = b.f32({3}, "w", pb::PARAMETERS);
  b.parameter("w", t.w)->set_generator("ones");
  int c = b.constant({3}, {1.0f, 2.0f, 3.0f}, "c");
  t.grad = b.f32({3}, "w.grad", pb::GRADIENTS);
  t.step = b.tensor({}, pb::I64, pb::IO, "step");
  b.binding(true, "step", t.step, pb::STEP);

  int forward = b.function("forward", pb::FORWARD);
  int scratch = b.f32({3}, "scratch");
  b.kernel(forward, "neg", {c}, {scratch});
  int backward = b.function("backward", pb::BACKWARD);
  b.kernel(backward, "accumulate_grad", {c}, {t.grad});
  int optimizer = b.function("sgd", pb::OPTIMIZER);
  pb::Kernel *sgd = b.kernel(optimizer, "sgd", {t.grad, t.step, -1}, {t.w});
  (*sgd->mutable_attributes())["lr"].set_f(0.5);
  (*sgd->mutable_attributes())["warmup_steps"].set_i(4);

  for (int mb = 0; mb < 2; ++mb) {
    b.step(forward, mb);
    b.step(backward, mb);
  }
  b.step(optimizer, -1);
  return t;
}

TEST(Executor, StepInputCountsTheOptimizerSteps) {
  SgdProgram t = sgdProgram();
  Loaded l;
  Status status = l.load(t.b);
  ASSERT_TRUE(status) << status.message();
  // Two microbatches: grad = 2c each step (zeroed at the step's start).
  // Step s (from 0) runs with STEP = s + 1 and lr 0.5 * (s + 1) / 4, so
  // w = 1 - 2c * 0.125 * (1 + 2 + ... + (s + 1)).
  std::vector<float> w = {1, 1, 1};
  const float c[] = {1, 2, 3};
  for (int64_t step = 0; step < 3; ++step) {
    StepResult r;
    status = l.runtime->runStep(step, nullptr, r);
    ASSERT_TRUE(status) << status.message();
    EXPECT_EQ(*l.runtime->tensor(t.step).as<int64_t>(), step + 1);
    EXPECT_EQ(floats(l.runtime->tensor(t.grad)),
              (std::vector<float>{2, 4, 6}));
    for (int i = 0; i < 3; ++i)
      w[i] -= float(0.5 * double(step + 1) / 4) * (2 * c[i]);
    EXPECT_EQ(floats(l.runtime->tensor(t.w)), w) << "step " << step;
  }

  // --forward-only runs neither the backward nor the optimizer.
  Loaded forward;
  ASSERT_TRUE(forward.load(t.b, {/*forwardOnly=*/true}));
  StepResult r;
  ASSERT_TRUE(forward.runtime->runStep(0, nullptr, r));
  EXPECT_EQ(floats(forward.runtime->tensor(t.w)),
            (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(floats(forward.runtime->tensor(t.grad)),
            (std::vector<float>{0, 0, 0}));
}

} // namespace
