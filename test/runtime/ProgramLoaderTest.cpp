//===- ProgramLoaderTest.cpp - the loader refuses every bad program -------===//
//
// A valid program loads; each way a file or a field can be wrong gives an
// error that names the file and the field. Every strict prefix of a valid
// file and random bytes are refused without a crash.
//
//===----------------------------------------------------------------------===//

#include "TestPrograms.h"
#include "runtime/ProgramLoader.h"
#include "runtime/ProgramSeal.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace cleave::runtime;
using namespace cleave::test;

namespace {

/// Loads `b`'s program from a fresh folder; the error text, or "" if it
/// loaded.
std::string loadError(const ProgramBuilder &b) {
  TempDir dir;
  b.write(dir.path());
  // rank-0.pb whatever mesh.rank says, so every message starts alike.
  std::string path = dir.file("rank-0.pb");
  writeFile(path, b.sealed());
  pb::Program program;
  Status status = loadProgram(path, program);
  if (status)
    return "";
  // Messages name files by path; tests compare them without the folder.
  std::string message = status.message(), folder = dir.path() + "/";
  for (size_t at; (at = message.find(folder)) != std::string::npos;)
    message.erase(at, folder.size());
  return message;
}

TEST(ProgramLoader, TinyModelLoads) {
  TinyModel m = tinyLanguageModel();
  EXPECT_EQ(loadError(m.b), "");
}

TEST(ProgramLoader, MissingFile) {
  pb::Program program;
  Status status = loadProgram("/nonexistent/rank-0.pb", program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "/nonexistent/rank-0.pb: cannot open the program: No such file or "
            "directory");
}

TEST(ProgramLoader, Folder) {
  TempDir dir;
  pb::Program program;
  Status status = loadProgram(dir.path(), program);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("a folder, not a program file"),
            std::string::npos)
      << status.message();
}

TEST(ProgramLoader, EmptyFile) {
  pb::Program program;
  Status status = parseProgram("", "rank-0.pb", program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(), "rank-0.pb: the program file is empty");
}

TEST(ProgramLoader, TruncatedFileNamesTheByte) {
  std::string bytes = tinyLanguageModel().b.p.SerializeAsString();
  pb::Program program;
  Status status =
      parseProgram(bytes.substr(0, bytes.size() / 2), "rank-0.pb", program);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("rank-0.pb: truncated or not a cleave "
                                  "program: field "),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("but the file ends at byte " +
                                  std::to_string(bytes.size() / 2)),
            std::string::npos)
      << status.message();
}

TEST(ProgramLoader, EveryPrefixIsRefused) {
  TinyModel m = tinyLanguageModel();
  std::string bytes = m.b.p.SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    pb::Program program;
    Status status = parseProgram(bytes.substr(0, n), "p", program);
    if (status)
      status = validateProgram(program, "p", "/nonexistent");
    EXPECT_FALSE(status) << "a prefix of " << n << " of " << bytes.size()
                         << " bytes was accepted";
  }
}

TEST(ProgramLoader, MissingMemoryPlanMeansTruncated) {
  TinyModel m = tinyLanguageModel();
  m.b.p.clear_memory();
  EXPECT_EQ(loadError(m.b),
            "rank-0.pb: the program has no memory plan (field 'memory', the "
            "last one written): the file is truncated or was not written by "
            "cleave-compile");
}

TEST(ProgramLoader, RandomBytesAreRefused) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(1 + rng() % 300, '\0');
    for (char &c : bytes)
      c = char(rng());
    pb::Program program;
    Status status = parseProgram(bytes, "noise.pb", program);
    if (status)
      status = validateProgram(program, "noise.pb", "/nonexistent");
    ASSERT_FALSE(status) << "trial " << trial;
    EXPECT_EQ(status.message().rfind("noise.pb: ", 0), 0u) << status.message();
  }
}

TEST(ProgramLoader, CorruptedBytesNeverCrash) {
  // Flip bytes of a valid file: whatever loads must have passed validation;
  // nothing may crash (run under ASan in the asan build).
  std::string good = tinyLanguageModel().b.p.SerializeAsString();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes = good;
    for (int k = 0; k < 3; ++k)
      bytes[rng() % bytes.size()] = char(rng());
    pb::Program program;
    Status status = parseProgram(bytes, "p", program);
    if (status)
      (void)validateProgram(program, "p", "/nonexistent");
  }
}

TEST(ProgramLoader, ForeignProtobuf) {
  // A valid protobuf that is not a program: a Tensor message.
  pb::Tensor tensor;
  tensor.set_name("not a program");
  tensor.add_shape(3);
  pb::Program program;
  Status status =
      parseProgram(tensor.SerializeAsString(), "model.onnx", program);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("model.onnx: not a cleave program"),
            std::string::npos)
      << status.message();
}

TEST(ProgramLoader, InvalidUtf8SaysSo) {
  TinyModel m = tinyLanguageModel();
  m.b.p.mutable_tensors(5)->set_name("x\xff\xfe");
  pb::Program program;
  Status status = parseProgram(m.b.p.SerializeAsString(), "p.pb", program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message().rfind(
                "p.pb: not a cleave program: the protobuf data does not parse "
                "as a Program (String field 'cleave.program.Tensor.name' "
                "contains invalid UTF-8 data",
                0),
            0u)
      << status.message();
}

TEST(ProgramLoader, WrongMagic) {
  TinyModel m = tinyLanguageModel();
  m.b.p.set_magic("onnx-model");
  EXPECT_EQ(loadError(m.b), "rank-0.pb: not a cleave program: magic is "
                            "'onnx-model', expected 'cleave-program'");
}

TEST(ProgramLoader, WrongVersion) {
  TinyModel m = tinyLanguageModel();
  m.b.p.set_version(pb::Version(7));
  EXPECT_EQ(loadError(m.b),
            "rank-0.pb: program version 7, but this cleave-run reads versions "
            "1 to 3 only: compile the model again with the cleave-compile of this "
            "release");
  m.b.p.set_version(pb::VERSION_UNSPECIFIED);
  EXPECT_NE(loadError(m.b).find("program version 0"), std::string::npos);
}

/// head.weight [4, 5] as boxes [0, 0]+[4, 2] and [0, 5]+[4, 3] of a
/// [4, 10] tensor, concatenated along axis 1, in a version-2 program (a
/// generator, since params.bin holds only [4, 5]).
pb::Parameter *withPieces(TinyModel &m) {
  m.b.p.set_version(pb::VERSION_PIECES);
  pb::Parameter *p = m.b.p.mutable_parameters(1);
  p->set_full_shape(1, 10);
  p->set_generator("normal:0.02");
  p->set_pieces_axis(1);
  for (auto [start, size] : {std::pair<int64_t, int64_t>{0, 2}, {5, 3}}) {
    pb::Box *box = p->add_pieces();
    box->add_start(0);
    box->add_start(start);
    box->add_size(4);
    box->add_size(size);
  }
  return p;
}

struct BadField {
  const char *name;
  std::function<void(TinyModel &)> mutate;
  const char *expected; // the message after "rank-0.pb: "
};

class ProgramLoaderField : public ::testing::TestWithParam<BadField> {};

TEST_P(ProgramLoaderField, IsRefusedWithItsName) {
  TinyModel m = tinyLanguageModel();
  GetParam().mutate(m);
  EXPECT_EQ(loadError(m.b), std::string("rank-0.pb: ") + GetParam().expected);
}

pb::Kernel *kernelAt(TinyModel &m, int index) {
  return m.b.p.mutable_functions(0)->mutable_body(index)->mutable_kernel();
}

const BadField kBadFields[] = {
    {"KernelInputOutOfRange",
     [](TinyModel &m) { kernelAt(m, 1)->set_inputs(1, 999); },
     "functions[0].body[1].kernel 'matmul' (/matmul): input 1 is tensor 999, "
     "but the program has 11 tensors"},
    {"KernelOutputAbsent",
     [](TinyModel &m) { kernelAt(m, 0)->set_outputs(0, -1); },
     "functions[0].body[0].kernel 'embedding' (/embedding): output 0 is "
     "tensor -1, but the program has 11 tensors"},
    {"UnknownOp",
     [](TinyModel &m) { kernelAt(m, 0)->set_op("frobnicate"); },
     "functions[0].body[0].kernel 'frobnicate' (/embedding): unknown op: it "
     "is not in the runtime's op table, so no backend has a kernel for it"},
    {"KernelWithoutOutputs",
     [](TinyModel &m) { kernelAt(m, 0)->clear_outputs(); },
     "functions[0].body[0].kernel 'embedding' (/embedding): has no outputs"},
    {"AttributeWithoutValue",
     [](TinyModel &m) {
       (*kernelAt(m, 8)->mutable_attributes())["reduction"].Clear();
     },
     "functions[0].body[8].kernel 'softmax_cross_entropy' "
     "(/softmax_cross_entropy): attribute 'reduction' has no value"},
    {"InstructionOfNoKind",
     [](TinyModel &m) { m.b.p.mutable_functions(0)->add_body(); },
     "functions[0].body[11]: an instruction of no kind (kernel, collective, "
     "send_recv, copy, event or free)"},
    {"FreeOutOfRange",
     [](TinyModel &m) { m.b.free(0, 11); },
     "functions[0].body[11].free: the tensor is tensor 11, but the program "
     "has 11 tensors"},
    {"FreeOfParameter",
     [](TinyModel &m) { m.b.free(0, m.embedding); },
     "functions[0].body[11].free: tensor 0 'wte' is a parameter, which lives "
     "for the whole run"},
    {"TensorBufferOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_tensors(4)->set_buffer(1); },
     "tensors[4] 'targets': buffer 1, but the program has 1 buffers"},
    {"TensorPastBuffer",
     [](TinyModel &m) { m.b.p.mutable_tensors(2)->set_offset(4096); },
     "tensors[2] 'head.bias': bytes [4096, 4116) of buffer 0 are outside its "
     "1088 bytes"},
    {"TensorMisaligned",
     [](TinyModel &m) { m.b.p.mutable_tensors(2)->set_offset(65); },
     "tensors[2] 'head.bias': offset 65 is not a multiple of buffer 0's "
     "alignment 64"},
    {"TensorUnknownDType",
     [](TinyModel &m) { m.b.p.mutable_tensors(5)->set_dtype(pb::DType(42)); },
     "tensors[5] 'x': unknown element type 42"},
    {"TensorUnspecifiedDType",
     [](TinyModel &m) {
       m.b.p.mutable_tensors(5)->set_dtype(pb::DTYPE_UNSPECIFIED);
     },
     "tensors[5] 'x': unknown element type 0"},
    {"TensorNegativeDimension",
     [](TinyModel &m) { m.b.p.mutable_tensors(5)->set_shape(1, -3); },
     "tensors[5] 'x': dimension 1 of shape [2, -3, 4] is negative"},
    {"TensorTooLarge",
     [](TinyModel &m) {
       m.b.p.mutable_tensors(5)->set_shape(0, int64_t(1) << 40);
       m.b.p.mutable_tensors(5)->set_shape(1, int64_t(1) << 40);
     },
     "tensors[5] 'x': shape [1099511627776, 1099511627776, 4] is too large"},
    {"ConstantDataSize",
     [](TinyModel &m) {
       int c = m.b.constant({2}, {1.0f, 2.0f}, "two");
       m.b.p.mutable_tensors(c)->mutable_data()->pop_back();
     },
     "tensors[11] 'two': a constant of 8 bytes, but its data holds 7"},
    {"DataOnANonConstant",
     [](TinyModel &m) { m.b.p.mutable_tensors(5)->set_data("abcd"); },
     "tensors[5] 'x': has data, but only constants carry data"},
    {"BadAlignment",
     [](TinyModel &m) { m.b.p.mutable_buffers(0)->set_alignment(48); },
     "buffers[0]: alignment 48 is not a power of two up to 2^30"},
    {"ZeroAlignment",
     [](TinyModel &m) { m.b.p.mutable_buffers(0)->set_alignment(0); },
     "buffers[0]: alignment 0 is not a power of two up to 2^30"},
    {"WorldSizeZero",
     [](TinyModel &m) { m.b.p.mutable_mesh()->set_world_size(0); },
     "mesh.world_size: is 0, expected at least 1"},
    {"RankOutsideWorld",
     [](TinyModel &m) { m.b.p.mutable_mesh()->set_rank(1); },
     "mesh.rank: is 1, outside [0, 1)"},
    {"DegreesDisagree",
     [](TinyModel &m) { m.b.p.mutable_mesh()->set_tensor_degree(2); },
     "mesh: data_degree 1 x pipeline_degree 1 x tensor_degree 2 = 2, but "
     "world_size is 1"},
    {"GroupWithoutThisRank",
     [](TinyModel &m) {
       m.b.p.mutable_mesh()->mutable_groups(0)->set_ranks(0, 3);
     },
     "mesh.groups[0] 'data': holds rank 3, outside [0, 1)"},
    {"DuplicateGroup",
     [](TinyModel &m) { m.b.group("data", {0}); },
     "mesh.groups[1] 'data': a second group of this name"},
    {"ScheduleFunctionOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_schedule(1)->set_function(4); },
     "schedule[1]: function 4, but the program has 1 functions"},
    {"ScheduleMicrobatchOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_schedule(1)->set_microbatch(2); },
     "schedule[1]: microbatch 2, but a step has 2 microbatches (-1: once per "
     "step)"},
    {"EmptySchedule",
     [](TinyModel &m) { m.b.p.clear_schedule(); },
     "schedule: is empty: the program runs nothing"},
    {"BatchBeyondGlobal",
     [](TinyModel &m) { m.b.p.mutable_batch()->set_first_sample(1); },
     "batch: samples [1, 5) of this rank (2 microbatches of 2) are not within "
     "the global batch of 4"},
    {"ParameterTensorOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_tensor(77); },
     "parameters[1] 'head.weight': its slice is tensor 77, but the program "
     "has 11 tensors"},
    {"ParameterOfActivation",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_tensor(5); },
     "parameters[1] 'head.weight': tensor 5 has category ACTIVATIONS, "
     "expected PARAMETERS"},
    {"ParameterSliceShape",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_slice_size(1, 2); },
     "parameters[1] 'head.weight': slice_size [4, 2] differs from the shape "
     "of tensor 1, [4, 5] (only a slice of fewer rows, the rest padding, "
     "may)"},
    // A padded vocabulary's slice has fewer rows than its tensor, never
    // more.
    {"ParameterSliceMoreRows",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(1)->set_full_shape(0, 5);
       m.b.p.mutable_parameters(1)->set_slice_size(0, 5);
     },
     "parameters[1] 'head.weight': slice_size [5, 5] differs from the shape "
     "of tensor 1, [4, 5] (only a slice of fewer rows, the rest padding, "
     "may)"},
    // ZeRO-1's split masters: a working copy belongs to a master chunk.
    {"WorkingCopyOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_working_tensor(77); },
     "parameters[1] 'head.weight': its working copy is tensor 77, but the "
     "program has 11 tensors"},
    {"WorkingCopyWithoutMasterChunk",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_working_tensor(5); },
     "parameters[1] 'head.weight': has a working copy (working_tensor 5), so "
     "its tensor must be an F32 master chunk with flat_range and "
     "state_range"},
    {"ParameterSliceOutside",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(1)->set_slice_start(0, 1);
     },
     "parameters[1] 'head.weight': the slice from [1, 0] of size [4, 5] is "
     "not within full_shape [4, 5] (dimension 0)"},
    {"ParameterRanksDisagree",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->add_full_shape(1); },
     "parameters[1] 'head.weight': full_shape [4, 5, 1] has 3 dimensions, "
     "slice_start 2 and slice_size 2"},
    {"ParameterFileSize",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(0)->mutable_file()->set_size_bytes(12);
     },
     "parameters[0] 'wte': its file data is 12 bytes, but the full tensor "
     "f32[5, 4] is 80"},
    {"ParameterFilePastEnd",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(1)->mutable_file()->set_offset(100);
     },
     "parameters[1] 'head.weight': bytes [100, 180) of params.bin are past "
     "its end (160 bytes): the parameter file is truncated or not this "
     "program's"},
    {"ParameterUnknownGenerator",
     [](TinyModel &m) { m.b.p.mutable_parameters(2)->set_generator("xavier"); },
     "parameters[2] 'head.bias': unknown generator 'xavier' (expected zeros, "
     "ones or normal:STD)"},
    {"ParameterBadStd",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(2)->set_generator("normal:-1");
     },
     "parameters[2] 'head.bias': generator 'normal:-1': the standard "
     "deviation is not a non-negative number"},
    {"ParameterWithoutInit",
     [](TinyModel &m) { m.b.p.mutable_parameters(2)->clear_init(); },
     "parameters[2] 'head.bias': has no init (file data or a generator)"},
    {"ParameterTwice",
     [](TinyModel &m) {
       m.b.parameter("again", m.bias)->set_generator("ones");
     },
     "parameters[3] 'again': tensor 2 is parameters[2] already"},
    {"ParameterMissing",
     [](TinyModel &m) { m.b.p.mutable_parameters()->RemoveLast(); },
     "tensors[2] 'head.bias': a PARAMETERS tensor that no parameter "
     "initializes"},
    {"TokensNotInteger",
     [](TinyModel &m) { m.b.p.mutable_tensors(m.tokens)->set_dtype(pb::F32); },
     "inputs[0] 'idx': TOKENS is tensor 3 (f32[2, 3]), expected an i32, i64, "
     "u16, u32 or u64 tensor of shape [microbatch_size / read_parts, "
     "seq_len] = [2, 3]"},
    {"TargetsWrongShape",
     [](TinyModel &m) { m.b.p.mutable_batch()->set_seq_len(4); },
     "inputs[0] 'idx': TOKENS is tensor 3 (i64[2, 3]), expected an i32, i64, "
     "u16, u32 or u64 tensor of shape [microbatch_size / read_parts, "
     "seq_len] = [2, 4]"},
    // prescaled_batch false: the rank reads its part of each microbatch.
    {"TokensNotThePart",
     [](TinyModel &m) { m.b.p.mutable_batch()->set_read_parts(2); },
     "inputs[0] 'idx': TOKENS is tensor 3 (i64[2, 3]), expected an i32, i64, "
     "u16, u32 or u64 tensor of shape [microbatch_size / read_parts, "
     "seq_len] = [1, 3]"},
    {"ReadPartsNotDividing",
     [](TinyModel &m) { m.b.p.mutable_batch()->set_read_parts(3); },
     "batch.read_parts: is 3, which does not divide the microbatch of 2 "
     "samples into equal parts"},
    {"ReadPartOutOfRange",
     [](TinyModel &m) {
       m.b.p.mutable_batch()->set_read_parts(2);
       m.b.p.mutable_batch()->set_read_part(2);
     },
     "batch.read_part: is 2, not a part of the 2 a microbatch is read in"},
    {"LossNotScalar",
     [](TinyModel &m) { m.b.p.mutable_outputs(0)->set_tensor(5); },
     "outputs[0] 'loss': LOSS is tensor 5 (f32[2, 3, 4]), expected a "
     "floating-point scalar"},
    {"LossAmongInputs",
     [](TinyModel &m) { m.b.binding(true, "l", m.loss, pb::LOSS); },
     "inputs[2] 'l': a LOSS binding among the inputs"},
    {"StepNotI64",
     [](TinyModel &m) {
       int step = m.b.tensor({}, pb::I32, pb::IO, "step");
       m.b.binding(true, "step", step, pb::STEP);
     },
     "inputs[2] 'step': STEP is tensor 11 (i32[]), expected an i64 scalar "
     "(the runtime writes the step's 1-based number)"},
    {"StepNotScalar",
     [](TinyModel &m) {
       int step = m.b.tensor({1}, pb::I64, pb::IO, "step");
       m.b.binding(true, "step", step, pb::STEP);
     },
     "inputs[2] 'step': STEP is tensor 11 (i64[1]), expected an i64 scalar "
     "(the runtime writes the step's 1-based number)"},
    {"StepAmongOutputs",
     [](TinyModel &m) {
       int step = m.b.tensor({}, pb::I64, pb::IO, "step");
       m.b.binding(false, "step", step, pb::STEP);
     },
     "outputs[1] 'step': a STEP binding among the outputs"},
    {"StepConstant",
     [](TinyModel &m) {
       int step = m.b.tensor({}, pb::I64, pb::CONSTANTS, "step");
       m.b.p.mutable_tensors(step)->set_data(std::string(8, '\0'));
       m.b.binding(true, "step", step, pb::STEP);
     },
     "inputs[2] 'step': STEP is tensor 11 'step', a constant, which nothing "
     "may write"},
    {"BindingOutOfRange",
     [](TinyModel &m) { m.b.p.mutable_outputs(0)->set_tensor(-2); },
     "outputs[0] 'loss': the binding is tensor -2, but the program has 11 "
     "tensors"},
    {"CollectiveGroupOutOfRange",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_group(3);
       c->add_inputs(m.loss);
       c->add_outputs(m.loss);
     },
     "functions[0].body[11].collective ALL_REDUCE: group 3, but the mesh has "
     "1 groups"},
    {"CollectiveSizesDisagree",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_kind(pb::ALL_GATHER);
       c->add_inputs(m.loss);
       c->add_outputs(m.bias);
     },
     "functions[0].body[11].collective ALL_GATHER: input 0 is tensor 10 "
     "(f32[]) and output 0 is tensor 2 (f32[5]), which do not fit over 1 "
     "ranks"},
    {"CollectiveMeanOfIntegers",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_reduce(pb::MEAN);
       c->add_inputs(m.tokens);
       c->add_outputs(m.tokens);
     },
     "functions[0].body[11].collective ALL_REDUCE: a MEAN of tensor 3 (i64[2, "
     "3]): mean is for floating-point tensors only"},
    {"StartedBroadcastIsRefused",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_kind(pb::BROADCAST);
       c->set_event(1);
       c->add_inputs(m.loss);
       c->add_outputs(m.loss);
     },
     "functions[0].body[11].collective BROADCAST: only an ALL_REDUCE, a "
     "REDUCE_SCATTER or an ALL_GATHER can be started without waiting (event "
     "1)"},
    {"StartedReduceNotInPlace",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_event(2);
       c->add_inputs(m.bias);
       c->add_outputs(m.loss);
     },
     "functions[0].body[11].collective ALL_REDUCE: a started all-reduce works "
     "in place, but input 0 is tensor 2 and output 0 is 10"},
    {"NegativeCollectiveEvent",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_event(-1);
       c->add_inputs(m.loss);
       c->add_outputs(m.loss);
     },
     "functions[0].body[11].collective ALL_REDUCE: negative event -1"},
    {"BroadcastRoot",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_collective();
       c->set_kind(pb::BROADCAST);
       c->set_root(1);
       c->add_inputs(m.loss);
       c->add_outputs(m.loss);
     },
     "functions[0].body[11].collective BROADCAST: root 1 is not a rank of "
     "group 0 (1 ranks)"},
    {"SendToSelf",
     [](TinyModel &m) {
       auto *s = m.b.p.mutable_functions(0)->add_body()->mutable_send_recv();
       s->set_send(true);
       s->set_peer(0);
       s->set_tensor(m.loss);
     },
     "functions[0].body[11].send: peer 0 is not another rank of the world of "
     "1"},
    {"CopySizesDisagree",
     [](TinyModel &m) {
       auto *c = m.b.p.mutable_functions(0)->add_body()->mutable_copy();
       c->set_source(m.loss);
       c->set_destination(m.bias);
     },
     "functions[0].body[11].copy: the source tensor 10 (f32[]) and the "
     "destination tensor 2 (f32[5]) differ in size"},
    {"WriteToConstant",
     [](TinyModel &m) {
       int c = m.b.constant({}, {1.0f}, "one");
       auto *copy = m.b.p.mutable_functions(0)->add_body()->mutable_copy();
       copy->set_source(m.loss);
       copy->set_destination(c);
     },
     "functions[0].body[11].copy: the destination is tensor 11 'one', a "
     "constant, which nothing may write"},
    // Activation offload: host tensors are only a copy's.
    {"KernelReadsHostTensor",
     [](TinyModel &m) {
       pb::Buffer *host = m.b.p.add_buffers();
       *host = m.b.p.buffers(0);
       host->set_space(pb::HOST);
       m.b.p.mutable_tensors(m.embedding)->set_buffer(1);
     },
     "functions[0].body[0]: reads or writes tensor 0 (f32[5, 4]) 'wte' of "
     "HOST buffer 1; only a copy moves host tensors"},
    // ZeRO-1 state ranges (Parameter.state_range): inside the slice, and
    // every state tensor of the parameter flat and long enough for it.
    {"StateRangeNegativeStart",
     [](TinyModel &m) {
       auto *range = m.b.p.mutable_parameters(2)->mutable_state_range();
       range->set_start(-1);
       range->set_size(2);
     },
     "parameters[2] 'head.bias': state_range start -1 size 2 is not within "
     "its slice's 5 elements (slice_size [5]): start and size must be >= 0 "
     "and start + size at most the slice's element count"},
    {"StateRangeNegativeSize",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(2)->mutable_state_range()->set_size(-3);
     },
     "parameters[2] 'head.bias': state_range start 0 size -3 is not within "
     "its slice's 5 elements (slice_size [5]): start and size must be >= 0 "
     "and start + size at most the slice's element count"},
    {"StateRangePastTheSlice",
     [](TinyModel &m) {
       auto *range = m.b.p.mutable_parameters(2)->mutable_state_range();
       range->set_start(4);
       range->set_size(2);
     },
     "parameters[2] 'head.bias': state_range start 4 size 2 is not within "
     "its slice's 5 elements (slice_size [5]): start and size must be >= 0 "
     "and start + size at most the slice's element count"},
    {"StateTensorNotFlat",
     [](TinyModel &m) {
       m.b.f32({3, 1}, "head.bias.exp_avg", pb::OPTIMIZER_STATE);
       auto *range = m.b.p.mutable_parameters(2)->mutable_state_range();
       range->set_start(3);
       range->set_size(2);
     },
     "parameters[2] 'head.bias': state_range size 2, but its optimizer state "
     "tensor 11 'head.bias.exp_avg' is [3, 1]: expected one dimension of at "
     "least 2 elements"},
    {"StateTensorTooShort",
     [](TinyModel &m) {
       m.b.f32({3}, "head.bias.exp_avg", pb::OPTIMIZER_STATE);
       m.b.f32({2}, "head.bias.momentum_buffer", pb::OPTIMIZER_STATE);
       m.b.p.mutable_parameters(2)->mutable_state_range()->set_size(3);
     },
     "parameters[2] 'head.bias': state_range size 3, but its optimizer state "
     "tensor 12 'head.bias.momentum_buffer' is [2]: expected one dimension "
     "of at least 3 elements"},
    // Sharded data parallelism (Parameter.flat_range): the range lies in
    // the slice, the tensor is a flat chunk that holds it, and the slice
    // is the whole parameter.
    {"FlatRangePastTheSlice",
     [](TinyModel &m) {
       auto *range = m.b.p.mutable_parameters(2)->mutable_flat_range();
       range->set_start(4);
       range->set_size(2);
     },
     "parameters[2] 'head.bias': flat_range start 4 size 2 is not within its "
     "slice's 5 elements (slice_size [5])"},
    {"FlatRangeTensorNotFlat",
     [](TinyModel &m) {
       m.b.p.mutable_parameters(1)->mutable_flat_range()->set_size(4);
     },
     "parameters[1] 'head.weight': flat_range size 4, but its tensor 1 is "
     "[4, 5]: expected one dimension of at least 4 elements"},
    // Tensor parallelism with a blocked sharding (Parameter.pieces):
    // head.weight [4, 5] held as two boxes of a [4, 10] tensor along axis 1
    // (withPieces below); each case breaks one thing of it.
    {"PiecesInAVersion1Program",
     [](TinyModel &m) {
       withPieces(m);
       m.b.p.set_version(pb::VERSION_CURRENT);
     },
     "parameters[1] 'head.weight': has pieces (boxes), which need program "
     "version 2, but the program is version 1"},
    {"PiecesAxisOutside",
     [](TinyModel &m) { withPieces(m)->set_pieces_axis(2); },
     "parameters[1] 'head.weight': pieces_axis 2 is not an axis of "
     "full_shape [4, 10]"},
    {"PiecesAxisWithoutPieces",
     [](TinyModel &m) { m.b.p.mutable_parameters(1)->set_pieces_axis(1); },
     "parameters[1] 'head.weight': pieces_axis 1 without pieces"},
    {"BoxOutsideTheTensor",
     [](TinyModel &m) {
       withPieces(m)->mutable_pieces(1)->set_start(1, 8);
     },
     "parameters[1] 'head.weight': box 1 (from [0, 8] of size [4, 3]) is not "
     "within full_shape [4, 10] (dimension 1)"},
    {"BoxOfTheWrongRank",
     [](TinyModel &m) {
       withPieces(m)->mutable_pieces(0)->add_size(1);
     },
     "parameters[1] 'head.weight': box 0 (from [0, 0] of size [4, 2, 1]) has "
     "not the 2 dimensions of full_shape [4, 10]"},
    {"BoxesOverlap",
     [](TinyModel &m) {
       withPieces(m)->mutable_pieces(1)->set_start(1, 1);
     },
     "parameters[1] 'head.weight': box 1 (from [0, 1] of size [4, 3]) "
     "overlaps box 0 (from [0, 0] of size [4, 2]): a rank holds each element "
     "once"},
    {"BoxesDoNotMakeTheSlice",
     [](TinyModel &m) {
       withPieces(m)->mutable_pieces(1)->set_size(1, 2);
     },
     "parameters[1] 'head.weight': its boxes concatenated along axis 1 have "
     "4 elements there, but slice_size [4, 5] has 5"},
    {"BoxOffTheSliceAcrossTheAxis",
     [](TinyModel &m) {
       withPieces(m)->mutable_pieces(0)->set_size(0, 3);
     },
     "parameters[1] 'head.weight': box 0 (from [0, 0] of size [3, 2]) differs "
     "from slice_size [4, 5] in dimension 0, which is not pieces_axis 1: "
     "boxes are concatenated along that axis"},
    {"SliceStartNotTheFirstBox",
     [](TinyModel &m) {
       withPieces(m)->set_slice_start(1, 5);
     },
     "parameters[1] 'head.weight': slice_start [0, 5] is not its first box's "
     "start [0, 0]"},
};

INSTANTIATE_TEST_SUITE_P(
    , ProgramLoaderField, ::testing::ValuesIn(kBadFields),
    [](const ::testing::TestParamInfo<BadField> &info) {
      return std::string(info.param.name);
    });

TEST(ProgramLoader, PiecesLoad) {
  TinyModel m = tinyLanguageModel();
  withPieces(m);
  EXPECT_EQ(loadError(m.b), "");
  // A flat chunk (ZeRO-3) of the concatenated boxes.
  TinyModel z = tinyLanguageModel();
  pb::Parameter *p = withPieces(z);
  z.b.p.mutable_tensors(p->tensor())->clear_shape();
  z.b.p.mutable_tensors(p->tensor())->add_shape(10);
  p->mutable_flat_range()->set_start(10);
  p->mutable_flat_range()->set_size(10);
  EXPECT_EQ(loadError(z.b), "");
}

TEST(ProgramLoader, StateRangesWithTheirPaddingLoad) {
  // head.bias (5 elements) over a data degree of 2: chunks of 3, the second
  // rank's range [3, 5) and a padding element; the third of 4 ranks (chunks
  // of 2) holds only padding.
  TinyModel m = tinyLanguageModel();
  m.b.f32({3}, "head.bias.exp_avg", pb::OPTIMIZER_STATE);
  m.b.f32({3}, "head.bias.exp_avg_sq", pb::OPTIMIZER_STATE);
  auto *range = m.b.p.mutable_parameters(2)->mutable_state_range();
  range->set_start(3);
  range->set_size(2);
  EXPECT_EQ(loadError(m.b), "");
  range->set_start(5);
  range->set_size(0);
  EXPECT_EQ(loadError(m.b), "");
}

TEST(ProgramLoader, EveryChangedByteOfAProgramFileIsRefused) {
  // The seal (ProgramSeal.h): whichever byte changes, the file is refused,
  // with a message that starts with its path; never loaded, never a crash.
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  std::string good = m.b.sealed();
  size_t mismatches = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bytes = good;
    bytes[at] = char(bytes[at] ^ 0x10);
    writeFile(path, bytes);
    pb::Program program;
    Status status = loadProgram(path, program);
    ASSERT_FALSE(status) << "byte " << at << " of " << good.size()
                         << " changed, yet the program loaded";
    EXPECT_EQ(status.message().rfind(path + ": ", 0), 0u) << status.message();
    mismatches += status.message().find("checksum mismatch") !=
                  std::string::npos;
  }
  // Most changes still parse: the checksum is what refuses them.
  EXPECT_GT(mismatches, good.size() / 2);
}

TEST(ProgramLoader, AChangedByteIsAChecksumMismatch) {
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  std::string bytes = m.b.sealed();
  // Inside a tensor's name: still a well-formed program.
  size_t at = bytes.find("head.weight");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'H';
  writeFile(path, bytes);
  pb::Program program;
  Status status = loadProgram(path, program);
  ASSERT_FALSE(status);
  std::string body = std::to_string(bytes.size() - 67); // the sha256 field
  EXPECT_EQ(status.message().rfind(path + ": checksum mismatch: bytes [0, " +
                                       body + ") have SHA-256 ",
                                   0),
            0u)
      << status.message();
  EXPECT_NE(status.message().find(
                "the file changed after cleave-compile wrote it"),
            std::string::npos);
}

TEST(ProgramLoader, AnUnsealedProgramIsRefused) {
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  writeFile(path, m.b.p.SerializeAsString());
  pb::Program program;
  Status status = loadProgram(path, program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            path + ": the file does not end with its checksum (field "
                   "'sha256'): it is truncated, was changed, or was written "
                   "by an older cleave-compile; copy the compile's output "
                   "again or recompile");
}

TEST(ProgramLoader, AChangedParameterByteNamesFileRangeAndParameter) {
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  pb::Program program;
  ASSERT_TRUE(loadProgram(path, program));
  EXPECT_TRUE(verifyParameterData(program, path, dir.path()));
  // head.weight is bytes [80, 160) of params.bin (ShortParameterFile).
  std::string params = m.b.paramsBin;
  params[100] = char(params[100] ^ 1);
  writeFile(dir.file("params.bin"), params);
  Status status = verifyParameterData(program, path, dir.path());
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message().rfind(
                dir.file("params.bin") +
                    ": checksum mismatch in bytes [80, 160), the initial "
                    "value of parameter 'head.weight' (" +
                    path + ", parameters[1]): their SHA-256 is ",
                0),
            0u)
      << status.message();
}

TEST(ProgramSeal, TheFingerprintDependsOnEveryRankInOrder) {
  std::string a = tinyLanguageModel().b.p.SerializeAsString();
  TinyModel other = tinyLanguageModel();
  other.b.p.mutable_batch()->set_first_sample(1);
  std::string b = other.b.p.SerializeAsString();
  ASSERT_NE(a, b);
  EXPECT_EQ(compileFingerprint({a, b}), compileFingerprint({a, b}));
  EXPECT_NE(compileFingerprint({a, b}), compileFingerprint({b, a}));
  EXPECT_NE(compileFingerprint({a, b}), compileFingerprint({a, a}));
  EXPECT_EQ(compileFingerprint({a}).size(), 64u);
  // The fingerprint travels in the program: protobuf reads it back.
  pb::Program program;
  ASSERT_TRUE(program.ParseFromString(sealProgram(a, compileFingerprint({a}))));
  EXPECT_EQ(program.compile_fingerprint(), compileFingerprint({a}));
  EXPECT_EQ(program.sha256().size(), 64u);
}

TEST(ProgramLoader, MissingParameterFile) {
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  std::remove(dir.file("params.bin").c_str());
  pb::Program program;
  Status status = loadProgram(path, program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            path + ": parameters[0] 'wte': cannot open its data file " +
                dir.file("params.bin") + ": No such file or directory");
}

TEST(ProgramLoader, ShortParameterFile) {
  TinyModel m = tinyLanguageModel();
  TempDir dir;
  std::string path = m.b.write(dir.path());
  writeFile(dir.file("params.bin"), m.b.paramsBin.substr(0, 100));
  pb::Program program;
  Status status = loadProgram(path, program);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            path + ": parameters[1] 'head.weight': bytes [80, 160) of " +
                dir.file("params.bin") +
                " are past its end (100 bytes): the parameter file is "
                "truncated or not this program's");
}

} // namespace
