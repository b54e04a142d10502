//===- OnnxNodeImport.cpp - imports ONNX's backend node tests ------------===//
//
// The conformance check of the frontend. It finds every test folder under
// ONNX's node test data (libonnx-testdata), reads each model's op types, and
// imports every test whose ops are all ones Cleave claims to support
// (`cleave::supportedOnnxOps()`, which already lists the ops the importer
// only evaluates at compile time: Constant, Shape, Size, ConstantOfShape,
// Range). Each import must succeed, verify, and produce results of the
// shapes and element types of the test's expected outputs; a result the
// importer folded to a constant must also hold the expected values.
//
// Cleave compiles static shapes, so operands that ONNX defines as shapes,
// axes or bounds must be known at compile time. The node tests feed many of
// them as graph inputs. The rule: a graph input that such an operand (see
// `shapeOperands`) is computed from is bound to its value from
// test_data_set_0 through ImportOptions::constantInputs, whatever its type;
// every other input stays a function argument. "Computed from" follows
// producers back through the graph, but not through Shape and Size, which
// read only the static type of their input.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "frontend/OnnxModel.h"
#include "frontend/OnnxShapes.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"
#include "program.pb.h"
#include "runtime/Executor.h"
#include "runtime/ProgramLoader.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>

using namespace llvm;

static cl::opt<std::string>
    dataDir(cl::Positional, cl::desc("<node test folder>"),
            cl::init("/usr/share/libonnx-testdata/data/node"));
static cl::opt<std::string>
    filter("filter", cl::desc("only tests whose name contains this"),
           cl::init(""));
static cl::opt<bool> verbose("v", cl::desc("print every claimed test"),
                             cl::init(false));
static cl::opt<bool>
    runMode("run",
            cl::desc("also compile each imported test to a program, run it "
                     "on the CPU backend and compare every output with the "
                     "expected one"),
            cl::init(false));

/// Operand positions that ONNX defines as shapes, axes, bounds or other
/// values that fix a result's shape (or, for Dropout, its mode), by op.
static const std::map<std::string, std::vector<int>> &shapeOperands() {
  static const std::map<std::string, std::vector<int>> table = {
      {"ConstantOfShape", {0}}, {"Dropout", {1, 2}},   {"Expand", {1}},
      {"Pad", {1, 3}},          {"Tile", {1}},         {"CumSum", {1}},
      {"Range", {0, 1, 2}},     {"ReduceMax", {1}},    {"ReduceMean", {1}},
      {"ReduceMin", {1}},       {"ReduceSum", {1}},    {"Reshape", {1}},
      {"Slice", {1, 2, 3, 4}},  {"Split", {1}},        {"Squeeze", {1}},
      {"Trilu", {1}},           {"Unsqueeze", {1}}};
  return table;
}

/// Why a claimed test is out of scope for Cleave, or "" when it is not.
/// Rules over the model, never a list of names: a test is excluded only when
/// no correct importer for a static-shape, tensor-only compiler of opsets
/// 13 and later could pass it.
static std::string outOfScope(const onnx::ModelProto &model) {
  for (const auto &opset : model.opset_import())
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") &&
        opset.version() < 13)
      return formatv("written for opset {0}; Cleave reads opset 13 and later",
                     opset.version());
  const onnx::GraphProto &graph = model.graph();
  auto notTensor = [](const onnx::ValueInfoProto &v) {
    return v.has_type() && !v.type().has_tensor_type();
  };
  auto isString = [](const onnx::ValueInfoProto &v) {
    return v.type().has_tensor_type() &&
           v.type().tensor_type().elem_type() == onnx::TensorProto::STRING;
  };
  for (const auto *list : {&graph.input(), &graph.output()})
    for (const auto &v : *list) {
      if (notTensor(v))
        return "'" + v.name() + "' is a sequence or optional, not a tensor";
      if (isString(v))
        return "'" + v.name() + "' is a string tensor";
    }
  for (const auto &node : graph.node()) {
    for (const auto &attr : node.attribute())
      if (attr.name() == "to" && attr.i() == onnx::TensorProto::STRING)
        return "casts to a string tensor";
  }
  return "";
}

namespace {

struct TestResult {
  std::string name;
  std::set<std::string> ops;
  bool claimed = false;
  std::string excludedWhy;
  bool passed = false;
  std::string diagnostics;
};

/// Reads a TensorProto file of the test data.
Expected<cleave::HostTensor> readTensorFile(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError(buffer.getError(),
                             path + ": " + buffer.getError().message());
  onnx::TensorProto proto;
  if (!proto.ParseFromArray((*buffer)->getBufferStart(),
                            (*buffer)->getBufferSize()))
    return createStringError(inconvertibleErrorCode(),
                             path + ": not a TensorProto");
  return cleave::decodeTensor(proto, sys::path::parent_path(path));
}

std::string tensorFile(StringRef testDir, StringRef kind, int index) {
  SmallString<256> p(testDir);
  sys::path::append(p, "test_data_set_0",
                    formatv("{0}_{1}.pb", kind, index).str());
  return std::string(p);
}

/// Compares a folded constant result with the expected output, within the
/// tolerance of ONNX's own backend test runner (rtol 1e-3, atol 1e-7);
/// returns a message on mismatch.
std::string compareConstant(mlir::DenseElementsAttr attr,
                            const cleave::HostTensor &expected) {
  int64_t n = expected.numElements();
  if (attr.getNumElements() != n)
    return formatv("has {0} elements, expected {1}", attr.getNumElements(), n);
  auto at = [&](int64_t i) -> double {
    mlir::Type element = attr.getElementType();
    int64_t k = attr.isSplat() ? 0 : i;
    if (element.isa<mlir::FloatType>())
      return APFloat(*(attr.getValues<APFloat>().begin() + k))
          .convertToDouble();
    APInt v = *(attr.getValues<APInt>().begin() + k);
    return element.isInteger(1) || element.isUnsignedInteger()
               ? (double)v.getZExtValue()
               : (double)v.getSExtValue();
  };
  for (int64_t i = 0; i < n; ++i) {
    double got = at(i);
    double want = expected.isFloating() ? expected.getDouble(i)
                                        : (double)expected.getInt(i);
    bool same = got == want || (std::isnan(got) && std::isnan(want)) ||
                std::fabs(got - want) <= 1e-7 + 1e-3 * std::fabs(want);
    if (!same)
      return formatv("element {0} is {1}, expected {2}", i, got, want);
  }
  return "";
}


namespace rt = cleave::runtime;
namespace pb = cleave::program;

/// Element `i` of `t` stored into runtime memory of element type `dtype`;
/// integers exactly (the runtime's storeElement goes through a double).
void storeElement(char *base, pb::DType dtype, int64_t i,
                  const cleave::HostTensor &t) {
  auto type = static_cast<rt::DType>(dtype);
  bool floating = dtype == pb::F32 || dtype == pb::F64 || dtype == pb::F16 ||
                  dtype == pb::BF16;
  if (floating || dtype == pb::BOOL)
    return rt::storeElement(base, type, i,
                            floating ? t.getDouble(i)
                                     : double(t.getInt(i) != 0));
  int64_t v = t.isFloating() ? (int64_t)t.getDouble(i) : t.getInt(i);
  size_t n = rt::dtypeSize(type);
  std::memcpy(base + n * i, &v, n); // little-endian: the low bytes
}

/// Compiles the imported module to a program in a fresh folder, runs its
/// forward function once on the CPU backend with the test's inputs, and
/// compares every output with the expected one (ONNX's tolerance). Returns
/// a message on failure.
std::string compileAndRun(mlir::ModuleOp module, StringRef testDir,
                          const onnx::GraphProto &graph) {
  SmallString<128> dir;
  if (sys::fs::createUniqueDirectory("cleave-node-run", dir))
    return "cannot create a temporary folder";
  auto cleanup = llvm::make_scope_exit([&] { sys::fs::remove_directories(dir); });
  mlir::PassManager pm(module.getContext());
  pm.addPass(mlir::cleave::createMemoryPlan());
  pm.addPass(mlir::cleave::createPipelineSchedule());
  mlir::cleave::EmitProgramOptions emit;
  emit.outputDir = dir.str().str();
  pm.addPass(mlir::cleave::createEmitProgram(emit));
  if (failed(pm.run(module)))
    return "compiling to a program failed";

  // Run it with the runtime cleave-run uses. The node tests feed their
  // inputs from files, not a token stream: every input binding is made
  // OTHER and filled here after initialize().
  SmallString<128> programPath(dir);
  sys::path::append(programPath, "rank-0.pb");
  pb::Program program;
  rt::Status status = rt::loadProgram(programPath.str().str(), program);
  if (!status.isOk())
    return "cannot read back the program: " + status.message();
  // (Validated by loadProgram; OTHER asks less of a binding than TOKENS.)
  for (pb::Binding &b : *program.mutable_inputs())
    b.set_role(pb::OTHER);
  rt::Communicator world;
  rt::RunOptions options;
  options.forwardOnly = true;
  rt::Runtime runtime(program, dir.str().str(), world, options);
  status = runtime.initialize();
  if (!status.isOk())
    return "initialize: " + status.message();
  auto dataOf = [&](int id) {
    return static_cast<char *>(runtime.tensor(id).data);
  };

  // Inputs by graph input name; their data file is input_<k>.pb with k the
  // position among the graph inputs that are not initializers.
  StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  StringMap<int> inputIndex;
  int k = 0;
  for (const auto &input : graph.input())
    if (!initializers.contains(input.name()))
      inputIndex[input.name()] = k++;
  std::set<int> read; // tensors some kernel reads
  for (const pb::Instruction &inst : program.functions(0).body())
    if (inst.has_kernel())
      read.insert(inst.kernel().inputs().begin(), inst.kernel().inputs().end());
  for (const pb::Binding &b : program.outputs())
    read.insert(b.tensor());
  for (const pb::Binding &b : program.inputs()) {
    // CastLike's `like` is read for its type only; ONNX 1.12's data for it
    // does not even have the declared shape.
    if (!read.count(b.tensor()))
      continue;
    auto it = inputIndex.find(b.name());
    if (it == inputIndex.end())
      return "program input '" + b.name() + "' is not a graph input";
    auto value = readTensorFile(tensorFile(testDir, "input", it->second));
    if (!value)
      return "cannot read input '" + b.name() + "': " +
             toString(value.takeError());
    const pb::Tensor &t = program.tensors(b.tensor());
    if (value->numElements() != runtime.tensor(b.tensor()).numElements())
      return formatv("input '{0}' has {1} elements in the test data, but "
                     "the program's tensor has {2}",
                     b.name(), value->numElements(),
                     runtime.tensor(b.tensor()).numElements())
          .str();
    // ONNX 1.12's test data stores bfloat16 as its uint16 bits.
    bool bits = t.dtype() == pb::BF16 && value->dtype() == cleave::DType::U16;
    for (int64_t i = 0; i < value->numElements(); ++i)
      storeElement(dataOf(b.tensor()), bits ? pb::U16 : t.dtype(), i, *value);
  }
  rt::StepResult result;
  status = runtime.runStep(0, /*data=*/nullptr, result);
  if (!status.isOk())
    return status.message();
  for (auto [i, b] : llvm::enumerate(program.outputs())) {
    auto expected = readTensorFile(tensorFile(testDir, "output", i));
    if (!expected)
      return "cannot read output " + std::to_string(i);
    const pb::Tensor &t = program.tensors(b.tensor());
    const char *base = dataOf(b.tensor());
    bool bits = t.dtype() == pb::BF16 &&
                expected->dtype() == cleave::DType::U16;
    for (int64_t e = 0; e < expected->numElements(); ++e) {
      double got = rt::loadElement(
          base, static_cast<rt::DType>(bits ? pb::U16 : t.dtype()), e);
      double want = expected->isFloating() ? expected->getDouble(e)
                                           : (double)expected->getInt(e);
      bool same = got == want || (std::isnan(got) && std::isnan(want)) ||
                  std::fabs(got - want) <= 1e-7 + 1e-3 * std::fabs(want);
      if (!same)
        return formatv("output {0} ('{1}') element {2} is {3}, expected {4}",
                       i, b.name(), e, got, want)
            .str();
    }
  }
  return "";
}

TestResult runTest(StringRef testDir) {
  TestResult r;
  r.name = sys::path::filename(testDir).str();
  SmallString<256> modelPath(testDir);
  sys::path::append(modelPath, "model.onnx");
  auto model = cleave::readOnnxModel(modelPath);
  if (!model) {
    // Unreadable test data is a failure of the frontend's reader.
    r.claimed = true;
    r.ops.insert("<unreadable>");
    r.diagnostics = (modelPath + ": " + toString(model.takeError())).str();
    return r;
  }
  const onnx::GraphProto &graph = (*model)->graph();

  const auto &supported = cleave::supportedOnnxOps();
  r.claimed = true;
  for (const auto &node : graph.node()) {
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    r.ops.insert(defaultDomain ? node.op_type()
                               : node.domain() + "." + node.op_type());
    if (!defaultDomain || !std::binary_search(supported.begin(),
                                              supported.end(), node.op_type()))
      r.claimed = false;
  }
  if (!r.claimed)
    return r;
  r.excludedWhy = outOfScope(**model);
  if (!r.excludedWhy.empty())
    return r;

  std::string diagText;
  raw_string_ostream diagOs(diagText);
  auto fail = [&](const Twine &message) {
    diagOs << message << "\n";
    r.diagnostics = diagOs.str();
    return r;
  };

  // Bind the graph inputs that feed shape-like operands.
  StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  StringMap<const onnx::NodeProto *> producer;
  for (const auto &node : graph.node())
    for (const auto &output : node.output())
      producer[output] = &node;
  std::vector<std::string> work;
  for (const auto &node : graph.node()) {
    auto positions = shapeOperands().find(node.op_type());
    if (positions == shapeOperands().end())
      continue;
    for (int i : positions->second)
      if (i < node.input_size() && !node.input(i).empty())
        work.push_back(node.input(i));
  }
  StringSet<> shapeLike;
  while (!work.empty()) {
    std::string name = work.back();
    work.pop_back();
    if (!shapeLike.insert(name).second)
      continue;
    const onnx::NodeProto *node = producer.lookup(name);
    if (!node || node->op_type() == "Shape" || node->op_type() == "Size")
      continue;
    for (const auto &input : node->input())
      if (!input.empty())
        work.push_back(input);
  }
  cleave::ImportOptions options;
  int inputIndex = 0;
  for (const auto &input : graph.input()) {
    if (initializers.contains(input.name()))
      continue;
    int k = inputIndex++;
    if (!shapeLike.contains(input.name()))
      continue;
    auto value = readTensorFile(tensorFile(testDir, "input", k));
    if (!value)
      return fail("cannot read input " + Twine(k) + " ('" + input.name() +
                  "'): " + toString(value.takeError()));
    options.constantInputs[input.name()] = std::move(*value);
  }
  // Dropout in training mode with a nonzero ratio draws a random mask
  // (docs/dropout.md), so the test has no fixed expected output: it is
  // imported and verified, not run; with ratio 0 it is also run.
  for (const auto &node : graph.node()) {
    if (node.op_type() != "Dropout" || node.input_size() < 3)
      continue;
    auto at = [&](int i) -> const cleave::HostTensor * {
      auto it = options.constantInputs.find(node.input(i));
      return it == options.constantInputs.end() ? nullptr : &it->second;
    };
    const cleave::HostTensor *training = at(2), *ratio = at(1);
    bool isTraining = training && training->getInt(0) != 0;
    double p = ratio ? ratio->getDouble(0) : 0.5;
    if (isTraining && p != 0 && runMode) {
      r.excludedWhy = "Dropout in training mode is random";
      return r;
    }
  }

  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  mlir::DialectRegistry registry;
  mlir::cleave::registerCleaveDialects(registry);
  context.appendDialectRegistry(registry);
  mlir::ScopedDiagnosticHandler collect(&context, [&](mlir::Diagnostic &d) {
    diagOs << d.getLocation() << ": " << d << "\n";
    for (const mlir::Diagnostic &note : d.getNotes())
      diagOs << "  note: " << note << "\n";
    return mlir::success();
  });
  auto module = cleave::importOnnxFile(modelPath, context, options);
  if (failed(module))
    return fail("import failed");
  if (failed(mlir::verify(**module)))
    return fail("the imported module does not verify");

  auto func = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");
  if (!func)
    return fail("no @forward function");
  auto ret = cast<mlir::func::ReturnOp>(func.getBody().back().getTerminator());
  if ((int)ret.getNumOperands() != graph.output_size())
    return fail(formatv("@forward returns {0} values for {1} graph outputs",
                        ret.getNumOperands(), graph.output_size()));
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    auto expected = readTensorFile(tensorFile(testDir, "output", i));
    if (!expected)
      return fail("cannot read output " + Twine(i) + ": " +
                  toString(expected.takeError()));
    auto type = result.getType().cast<mlir::RankedTensorType>();
    std::string what = "output " + std::to_string(i) + " ('" +
                       graph.output(i).name() + "')";
    // The element type the model declares; the data files of ONNX 1.12
    // store bfloat16 outputs as uint16.
    cleave::DType declared = expected->dtype();
    const auto &outputType = graph.output(i).type();
    if (outputType.has_tensor_type() && outputType.tensor_type().elem_type())
      declared =
          static_cast<cleave::DType>(outputType.tensor_type().elem_type());
    if (type.getShape() != expected->shape() ||
        cleave::dtypeOf(type.getElementType()) != declared) {
      std::string s;
      raw_string_ostream os(s);
      os << what << " has type " << type << ", expected "
         << cleave::shapeToString(expected->shape()) << " of "
         << cleave::dtypeName(declared);
      return fail(os.str());
    }
    if (declared != expected->dtype())
      continue;
    if (auto constant = result.getDefiningOp<mlir::cleave::ConstantOp>()) {
      auto attr = constant.getValue().dyn_cast<mlir::DenseElementsAttr>();
      if (!attr)
        continue;
      std::string mismatch = compareConstant(attr, *expected);
      if (!mismatch.empty())
        return fail(what + " was folded to a constant whose " + mismatch);
    }
  }
  if (runMode) {
    std::string failure = compileAndRun(**module, testDir, graph);
    if (!failure.empty())
      return fail(failure);
  }
  r.passed = true;
  return r;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Imports every ONNX node test whose ops Cleave supports and checks the "
      "result.\n");

  // Find the tests: every folder with a model.onnx.
  std::vector<std::string> testDirs;
  std::error_code ec;
  for (sys::fs::directory_iterator it(dataDir, ec), end; it != end && !ec;
       it.increment(ec)) {
    SmallString<256> model(it->path());
    sys::path::append(model, "model.onnx");
    if (sys::fs::exists(model) &&
        StringRef(sys::path::filename(it->path())).contains(filter))
      testDirs.push_back(it->path());
  }
  if (ec || testDirs.empty()) {
    errs() << "cleave-onnx-node-import: no ONNX node tests under '" << dataDir
           << "'" << (ec ? ": " + ec.message() : std::string()) << "\n";
    // 77 tells ctest to report a skip: the test data is not installed.
    return 77;
  }
  llvm::sort(testDirs);

  struct OpCount {
    int claimed = 0, passed = 0, excluded = 0;
  };
  std::map<std::string, OpCount> perOp;
  std::vector<TestResult> failures, excluded;
  int claimed = 0, passed = 0, skipped = 0;
  for (const std::string &dir : testDirs) {
    TestResult r = runTest(dir);
    if (!r.claimed) {
      ++skipped;
      continue;
    }
    for (const std::string &op : r.ops) {
      OpCount &c = perOp[op];
      if (!r.excludedWhy.empty()) {
        ++c.excluded;
        continue;
      }
      ++c.claimed;
      c.passed += r.passed;
    }
    if (!r.excludedWhy.empty()) {
      excluded.push_back(r);
      continue;
    }
    ++claimed;
    passed += r.passed;
    if (verbose)
      outs() << (r.passed ? "PASS " : "FAIL ") << r.name << "\n";
    if (!r.passed)
      failures.push_back(std::move(r));
  }

  outs() << formatv("{0,-28} {1,8} {2,8} {3,9}\n", "op", "claimed",
                    runMode ? "passed" : "imported", "excluded");
  for (const auto &[op, c] : perOp)
    outs() << formatv("{0,-28} {1,8} {2,8} {3,9}\n", op, c.claimed, c.passed,
                      c.excluded ? std::to_string(c.excluded) : "");
  outs() << formatv("\n{0} tests found; {1} claimed, {2} {6}, {3} failed, {4} excluded as out of scope; {5} "
                    "skipped (they use ops Cleave does not support)\n",
                    testDirs.size(), claimed + excluded.size(), passed,
                    failures.size(), excluded.size(), skipped,
                    runMode ? "imported, ran on the CPU backend and matched "
                              "the expected outputs"
                            : "imported and verified");
  for (const TestResult &r : excluded)
    outs() << "excluded " << r.name << ": " << r.excludedWhy << "\n";
  for (const TestResult &r : failures) {
    outs() << "\nFAILED " << r.name << " (ops:";
    for (const std::string &op : r.ops)
      outs() << " " << op;
    outs() << ")\n" << r.diagnostics;
  }
  return failures.empty() ? 0 : 1;
}
