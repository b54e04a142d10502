//===- EmitProgram.cpp - the per-rank program from a planned module -------===//
//
// The last step of compilation: a module that cleave-memory-plan has planned
// becomes runtime/program.proto's Program (rank-<r>.pb) plus the parameters'
// initial bytes (params.bin). Everything the runtime needs is spelled out:
// tensor offsets, kernels with their attributes, frees after last uses, the
// schedule and the bindings of inputs and the loss. The runtime knows
// nothing of MLIR, so this is the only place the two meet.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Layout.h"
#include "passes/NodeName.h"
#include "passes/Passes.h"
#include "passes/PlanAnalysis.h"
#include "passes/Report.h"
#include "runtime/ProgramSeal.h"

#include "program.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <map>
#include <set>
#include <tuple>

namespace mlir::cleave {
#define GEN_PASS_DEF_EMITPROGRAM
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;
namespace pb = ::cleave::program;

namespace {

/// `program`'s bytes with deterministic serialization: protobuf writes a
/// map (an instruction's attributes) in hash order otherwise, so two
/// identical compiles gave different bytes.
bool serializeProgram(const pb::Program &program, std::string &bytes) {
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  return program.SerializeToCodedStream(&coded);
}

FailureOr<pb::DType> dtypeOf(Type element, Operation *where) {
  if (element.isF32()) return pb::F32;
  if (element.isF16()) return pb::F16;
  if (element.isBF16()) return pb::BF16;
  if (element.isF64()) return pb::F64;
  if (element.isInteger(1)) return pb::BOOL;
  if (auto i = element.dyn_cast<IntegerType>()) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8: return u ? pb::U8 : pb::I8;
    case 16: return u ? pb::U16 : pb::I16;
    case 32: return u ? pb::U32 : pb::I32;
    case 64: return u ? pb::U64 : pb::I64;
    }
  }
  where->emitError() << "the runtime has no element type for " << element;
  return failure();
}

/// The bytes of a constant or parameter value as the runtime stores them:
/// row-major, little-endian, i1 as one byte per element.
FailureOr<std::string> bytesOf(ElementsAttr value, Operation *where) {
  auto type = value.getType().cast<RankedTensorType>();
  int64_t n = type.getNumElements();
  Type element = type.getElementType();
  if (auto resource = value.dyn_cast<DenseResourceElementsAttr>()) {
    const AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return where->emitError() << "the data of resource '"
                                << resource.getRawHandle().getKey()
                                << "' is missing";
    ArrayRef<char> data = blob->getData();
    if ((int64_t)data.size() != tensorBytes(type))
      return where->emitError() << "resource holds " << data.size()
                                << " bytes, but " << type << " needs "
                                << tensorBytes(type);
    return std::string(data.data(), data.size());
  }
  auto dense = value.dyn_cast<DenseElementsAttr>();
  if (!dense)
    return where->emitError() << "cannot emit a value of attribute kind "
                              << value;
  std::string out;
  if (element.isInteger(1)) {
    out.reserve(n);
    for (bool v : dense.getValues<bool>())
      out.push_back(v ? 1 : 0);
    return out;
  }
  if (dense.isSplat()) {
    ArrayRef<char> raw = dense.getRawData();
    std::string one(raw.data(), raw.size());
    out.reserve(one.size() * n);
    for (int64_t i = 0; i < n; ++i)
      out += one;
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  return std::string(raw.data(), raw.size());
}

/// An op attribute as the runtime's Attribute; failure for a kind the
/// runtime cannot read.
LogicalResult convertAttribute(Attribute attr, pb::Attribute &out) {
  if (auto i = attr.dyn_cast<IntegerAttr>()) {
    out.set_i(i.getType().isInteger(1) ? (int64_t)i.getValue().getBoolValue()
                                       : i.getValue().getSExtValue());
  } else if (auto f = attr.dyn_cast<FloatAttr>()) {
    out.set_f(f.getValueAsDouble());
  } else if (auto b = attr.dyn_cast<BoolAttr>()) {
    out.set_i(b.getValue());
  } else if (attr.isa<UnitAttr>()) {
    out.set_i(1);
  } else if (auto s = attr.dyn_cast<StringAttr>()) {
    out.set_s(s.getValue().str());
  } else if (auto a = attr.dyn_cast<DenseI64ArrayAttr>()) {
    auto *ints = out.mutable_ints();
    for (int64_t v : a.asArrayRef())
      ints->add_values(v);
  } else if (auto r = attr.dyn_cast<LossReductionAttr>()) {
    out.set_s(stringifyLossReduction(r.getValue()).str());
  } else {
    return failure();
  }
  return success();
}

int64_t intFrom(DictionaryAttr dict, StringRef key) {
  if (auto attr = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr())
    return attr.getInt();
  return 0;
}

pb::FunctionKind kindOf(func::FuncOp func) {
  auto kind = func->getAttrOfType<StringAttr>("cleave.kind");
  if (kind && kind.getValue() == "backward")
    return pb::BACKWARD;
  if (kind && kind.getValue() == "optimizer")
    return pb::OPTIMIZER;
  return pb::FORWARD;
}

struct EmitProgram : mlir::cleave::impl::EmitProgramBase<EmitProgram> {
  using EmitProgramBase::EmitProgramBase;

  void runOnOperation() override {
    if (failed(emit()) || failed(writeProgramFiles()))
      signalPassFailure();
  }

  // The programs, kept until all are known: each carries the fingerprint
  // of them all (runtime/ProgramSeal.h).
  std::vector<std::pair<std::string, std::string>> programFiles;

  /// Keeps `program`'s bytes for `path`.
  bool writeProgram(const pb::Program &program, StringRef path) {
    std::string bytes;
    if (!serializeProgram(program, bytes))
      return false;
    programFiles.emplace_back(path.str(), std::move(bytes));
    return true;
  }

  /// Writes every rank's program, sealed with the compile's fingerprint and
  /// its own checksum.
  LogicalResult writeProgramFiles() {
    std::vector<std::string> all;
    for (const auto &file : programFiles)
      all.push_back(file.second);
    std::string fingerprint = ::cleave::runtime::compileFingerprint(all);
    for (const auto &[path, bytes] : programFiles) {
      std::string sealed = ::cleave::runtime::sealProgram(bytes, fingerprint);
      std::ofstream out(path, std::ios::binary);
      out.write(sealed.data(), sealed.size());
      if (!out)
        return mlir::emitError(getOperation().getLoc())
               << "cannot write '" << path << "'";
    }
    programFiles.clear();
    return success();
  }

  pb::Program program;
  llvm::DenseMap<Value, int> tensorOf;
  llvm::StringMap<int> paramTensor, gradTensor;
  llvm::DenseSet<int> activationTensors;
  int64_t microbatchSize = 0, seqLen = 0;

  // Pipeline emission: the buffer (one per stage held), the slot whose
  // copy of the per-microbatch values is being emitted.
  bool pipelined = false;
  int currentBuffer = 0;
  int64_t slotBase = 0, slotBytes = 0, currentSlot = 0;
  // The mesh (cleave-place-ranks) and the rank whose program this is.
  MeshAttr mesh;
  int64_t dataRanks = 1, pipelineRanks = 1;
  int64_t currentRank = 0;

  /// The world rank at data coordinate `d` and pipeline coordinate `p`.
  int64_t rankAt(int64_t d, int64_t p) const {
    if (!mesh)
      return d;
    return mesh.withCoordinate(mesh.withCoordinate(0, kDataAxis, d),
                               kPipelineAxis, p);
  }
  // Where each parameter's bytes are in params.bin (by name).
  llvm::StringMap<std::pair<uint64_t, uint64_t>> paramFile;
  llvm::StringMap<std::string> paramDigest; // their SHA-256s

  FailureOr<int> addTensor(Type type, int64_t offset, pb::Category category,
                           StringRef name, Operation *where) {
    auto tensor = type.dyn_cast<RankedTensorType>();
    if (!tensor || !tensor.hasStaticShape())
      return where->emitError() << "cannot emit " << type
                                << ": not a static tensor";
    auto dtype = dtypeOf(tensor.getElementType(), where);
    if (failed(dtype))
      return failure();
    if (offset >= slotBase && offset < slotBase + slotBytes)
      offset += currentSlot * slotBytes;
    if (replayNext >= 0)
      return replayTensor(tensor, offset, *dtype, category, name, where);
    pb::Tensor *t = program.add_tensors();
    t->set_buffer(currentBuffer);
    t->set_offset(offset);
    for (int64_t d : tensor.getShape())
      t->add_shape(d);
    t->set_dtype(*dtype);
    t->set_category(category);
    t->set_name(name.str());
    if (category == pb::ACTIVATIONS)
      activationTensors.insert(program.tensors_size() - 1);
    return program.tensors_size() - 1;
  }

  //===--------------------------------------------------------------------===//
  // The last microbatch's backward (cleave-overlap-gradients)
  //===--------------------------------------------------------------------===//

  // While a last-microbatch copy is emitted: the next of its original's
  // tensors, which it uses instead of adding its own, and the end of them.
  int replayNext = -1, replayEnd = -1;
  // Program-wide ids of the started gradient all-reduces, by the IR's
  // event (unique on a rank), in the order the rank's schedule starts them.
  std::map<int64_t, int> gradientEvents;

  /// The copy of `backward` that the step of the last microbatch runs, or
  /// null.
  static func::FuncOp lastMicrobatchCopy(func::FuncOp backward) {
    auto name = backward ? backward->getAttrOfType<FlatSymbolRefAttr>(
                               kLastMicrobatchAttr)
                         : FlatSymbolRefAttr();
    return name ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(backward,
                                                                      name)
                : func::FuncOp();
  }

  /// Numbers the events that `copy` starts, after those already numbered:
  /// called in the order the rank's schedule runs them.
  void numberGradientEvents(func::FuncOp copy) {
    copy.walk([&](AllReduceGradsStartOp start) {
      int id = int(gradientEvents.size()) + 1;
      gradientEvents.try_emplace(int64_t(start.getEvent()), id);
    });
  }

  FailureOr<int> programEvent(Operation *op, int64_t event) {
    auto it = gradientEvents.find(event);
    if (it == gradientEvents.end())
      return op->emitError() << "event " << event << " is not started by a "
                                "copy of a backward that this rank's "
                                "schedule runs for the last microbatch";
    return it->second;
  }

  /// The tensor a last-microbatch copy asks for: its original's next.
  FailureOr<int> replayTensor(RankedTensorType type, int64_t offset,
                              pb::DType dtype, pb::Category category,
                              StringRef name, Operation *where) {
    if (replayNext < replayEnd) {
      const pb::Tensor &t = program.tensors(replayNext);
      if (t.buffer() == currentBuffer && int64_t(t.offset()) == offset &&
          t.dtype() == dtype && t.category() == category && t.name() == name &&
          llvm::equal(t.shape(), type.getShape()))
        return replayNext++;
    }
    return where->emitError()
           << "the last-microbatch copy of a backward differs from it at "
           << type << " (offset " << offset
           << "); run cleave-overlap-gradients after cleave-memory-plan";
  }

  /// Emits `copy`, the last-microbatch copy of a function whose emission
  /// added the tensors [tensors.first, tensors.second), as function `name`
  /// at the program's end. It runs in its original's storage: it uses those
  /// tensors, in order, and binds no inputs or outputs of its own.
  FailureOr<int> emitLastMicrobatchCopy(func::FuncOp copy,
                                        std::pair<int, int> tensors,
                                        const std::string &name) {
    int inputs = program.inputs_size(), outputs = program.outputs_size();
    replayNext = tensors.first;
    replayEnd = tensors.second;
    LogicalResult emitted = emitFunction(copy);
    bool complete = replayNext == replayEnd;
    replayNext = replayEnd = -1;
    if (failed(emitted))
      return failure();
    if (!complete)
      return copy.emitError() << "the last-microbatch copy of a backward has "
                                 "fewer values than it; run "
                                 "cleave-overlap-gradients after "
                                 "cleave-memory-plan";
    program.mutable_inputs()->DeleteSubrange(inputs,
                                             program.inputs_size() - inputs);
    program.mutable_outputs()->DeleteSubrange(outputs,
                                              program.outputs_size() - outputs);
    int index = program.functions_size() - 1;
    program.mutable_functions(index)->set_name(name);
    return index;
  }

  /// The step's global batch: the option's, which must be the data ranks'
  /// microbatches of `mbSize` samples, or that product. Checked before
  /// anything is written.
  FailureOr<int64_t> globalBatchOf(Location loc, int64_t mbSize) {
    int64_t perRank = mbSize * microbatches;
    int64_t global = globalBatch ? globalBatch : perRank * dataRanks;
    if (global != perRank * dataRanks)
      return mlir::emitError(loc)
             << "global batch " << global << " is not " << dataRanks
             << " data-parallel rank(s) x "
             << static_cast<int64_t>(microbatches) << " microbatches of "
             << mbSize << " samples";
    return global;
  }

  LogicalResult emit() {
    ModuleOp module = getOperation();
    if (outputDir.empty())
      return module.emitError()
             << "cleave-emit-program needs output-dir=FOLDER";
    SmallVector<ModuleOp> stageModules;
    for (auto stage : module.getOps<ModuleOp>())
      if (stage->hasAttr("cleave.stage"))
        stageModules.push_back(stage);
    if (!stageModules.empty())
      return emitPipeline(module, stageModules);
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.empty())
      return module.emitError() << "cleave-emit-program: the module has no "
                                   "function to run";
    auto memory = module->getAttrOfType<DictionaryAttr>("cleave.memory");
    if (!memory)
      return module.emitError()
             << "the module has no memory plan; run cleave-memory-plan first";
    if (microbatches < 1)
      return module.emitError() << "microbatches must be at least 1";
    mesh = lookupMesh(module);
    dataRanks = mesh ? mesh.getAxisSize(kDataAxis).value_or(1) : 1;
    if (mesh && mesh.getNumRanks() != dataRanks)
      return module.emitError()
             << "a one-stage program is data parallel only, but the mesh is "
             << mesh;

    program.set_magic("cleave-program");
    program.set_device(device);
    program.set_version(pb::VERSION_CURRENT);
    if (auto file = module.getLoc().dyn_cast<FileLineColLoc>())
      program.set_model(file.getFilename().str());

    pb::Mesh *mesh = program.mutable_mesh();
    mesh->set_rank(0);
    mesh->set_world_size(1);
    mesh->set_data_degree(1);
    mesh->set_pipeline_degree(1);
    mesh->set_tensor_degree(1);
    pb::Group *data = mesh->add_groups();
    data->set_name("data");
    data->add_ranks(0);

    pb::Buffer *arena = program.add_buffers();
    arena->set_space(pb::DEVICE);
    arena->set_size_bytes(intFrom(memory, "arena_bytes"));
    arena->set_alignment(intFrom(memory, "alignment"));

    pb::MemoryPlan *plan = program.mutable_memory();
    plan->set_peak_bytes(intFrom(memory, "peak_bytes"));
    plan->set_parameters(intFrom(memory, "parameters"));
    plan->set_gradients(intFrom(memory, "gradients"));
    plan->set_optimizer_state(intFrom(memory, "optimizer_state"));
    plan->set_activations(intFrom(memory, "activations"));
    plan->set_workspace(intFrom(memory, "workspace"));
    plan->set_constants(intFrom(memory, "constants"));
    plan->set_io(intFrom(memory, "io"));

    if (auto scaling =
            module->getAttrOfType<DictionaryAttr>("cleave.loss_scaling")) {
      pb::LossScaling *ls = program.mutable_loss_scaling();
      ls->set_enabled(true);
      auto real = [&](StringRef key) {
        auto f = scaling.getAs<FloatAttr>(key);
        return f ? f.getValueAsDouble() : 0.0;
      };
      ls->set_initial_scale(real("initial_scale"));
      ls->set_scale_window(intFrom(scaling, "scale_window"));
      ls->set_min_scale(real("min_scale"));
      ls->set_delayed_shift(intFrom(scaling, "delayed_shift"));
    }
    FailureOr<int64_t> global =
        globalBatchOf(module.getLoc(), microbatchShape({module}).first);
    if (failed(global))
      return failure();
    if (failed(emitParameters(module)))
      return failure();
    for (func::FuncOp func : funcs)
      if (kindOf(func) == pb::FORWARD)
        if (func::FuncOp copy = lastMicrobatchCopy(backwardOf(func)))
          numberGradientEvents(copy);
    llvm::DenseMap<Operation *, int> functionIndex;
    llvm::DenseMap<Operation *, std::pair<int, int>> tensorsOf;
    for (func::FuncOp func : funcs) {
      if (func->hasAttr(kLastMicrobatchOfAttr))
        continue; // emitted below, for the last microbatch's step
      functionIndex[func] = program.functions_size();
      int firstTensor = program.tensors_size();
      if (failed(emitFunction(func)))
        return failure();
      tensorsOf[func] = {firstTensor, program.tensors_size()};
    }

    pb::Batch *batch = program.mutable_batch();
    batch->set_microbatch_size(microbatchSize);
    batch->set_microbatches(microbatches);
    batch->set_seq_len(seqLen);
    batch->set_first_sample(0);
    int64_t perRank = microbatchSize * microbatches;
    batch->set_global_batch(*global);

    // The schedule: each microbatch's forward and its backward, then the
    // optimizer once per step.
    auto addStep = [&](int function, int64_t mb) {
      pb::Step *step = program.add_schedule();
      step->set_function(function);
      step->set_microbatch(mb);
    };
    for (int64_t mb = 0; mb < microbatches; ++mb)
      for (func::FuncOp func : funcs) {
        if (kindOf(func) != pb::FORWARD)
          continue;
        addStep(functionIndex[func], mb);
        if (func::FuncOp backward = backwardOf(func)) {
          int index = functionIndex[backward];
          func::FuncOp copy = lastMicrobatchCopy(backward);
          if (copy && mb == microbatches - 1) {
            FailureOr<int> last = emitLastMicrobatchCopy(
                copy, tensorsOf[backward],
                program.functions(index).name() + " (last microbatch)");
            if (failed(last))
              return failure();
            index = *last;
          }
          addStep(index, mb);
        }
      }
    for (func::FuncOp func : funcs)
      if (kindOf(func) == pb::OPTIMIZER)
        addStep(functionIndex[func], -1);

    // One program per data-parallel rank: the same functions, its own
    // place in the mesh and its own slice of each step's samples.
    pb::Mesh *m = program.mutable_mesh();
    m->set_world_size(dataRanks);
    m->set_data_degree(dataRanks);
    m->mutable_groups(0)->clear_ranks();
    for (int64_t d = 0; d < dataRanks; ++d)
      m->mutable_groups(0)->add_ranks(rankAt(d, 0));
    for (int64_t d = 0; d < dataRanks; ++d) {
      int64_t r = rankAt(d, 0);
      m->set_rank(r);
      m->set_data_rank(d);
      batch->set_first_sample(d * perRank);
      SmallString<256> programPath(outputDir);
      llvm::sys::path::append(programPath, "rank-" + std::to_string(r) + ".pb");
      if (!writeProgram(program, programPath))
        return module.emitError() << "cannot write '" << programPath << "'";
    }
    return writePlanFiles(module);
  }

  /// Parameters (data in params.bin), their gradient buffers.
  LogicalResult emitParameters(ModuleOp module) {
    if (failed(writeParamsFile({module})))
      return failure();
    return addParameters(module);
  }

  /// params.bin: the initial bytes of every parameter with data, once per
  /// name (a tied parameter held by two stages is written once).
  LogicalResult writeParamsFile(ArrayRef<ModuleOp> modules) {
    ModuleOp top = getOperation();
    SmallString<256> paramsPath(outputDir);
    llvm::sys::path::append(paramsPath, "params.bin");
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return mlir::emitError(top.getLoc()) << "cannot create '" << outputDir
                             << "': " << ec.message();
    std::ofstream params(paramsPath.c_str(), std::ios::binary);
    if (!params)
      return mlir::emitError(top.getLoc()) << "cannot write '" << paramsPath << "'";
    uint64_t paramsOffset = 0;
    for (ModuleOp module : modules)
      for (auto param : module.getOps<ParameterOp>()) {
        auto value = param.getValueAttr();
        if (!value || paramFile.count(param.getSymName()))
          continue;
        auto bytes = bytesOf(value, param);
        if (failed(bytes))
          return failure();
        params.write(bytes->data(), bytes->size());
        paramFile[param.getSymName()] = {paramsOffset, bytes->size()};
        paramDigest[param.getSymName()] = ::cleave::runtime::sha256Hex(*bytes);
        paramsOffset += bytes->size();
      }
    params.close();
    if (!params)
      return mlir::emitError(top.getLoc()) << "writing '" << paramsPath << "' failed";
    return success();
  }

  /// The module's parameters (and gradient buffers) as tensors of the
  /// current buffer, with where their initial values come from.
  LogicalResult addParameters(ModuleOp module) {
    for (auto param : module.getOps<ParameterOp>()) {
      auto offset = param->getAttrOfType<IntegerAttr>("cleave.offset");
      if (!offset)
        return param.emitError() << "parameter has no planned offset";
      auto id = addTensor(param.getType(), offset.getInt(), pb::PARAMETERS,
                          param.getSymName(), param);
      if (failed(id))
        return failure();
      paramTensor[param.getSymName()] = *id;
      if (auto grad = param->getAttrOfType<IntegerAttr>("cleave.grad_offset")) {
        auto g = addTensor(param.getType(), grad.getInt(), pb::GRADIENTS,
                           (param.getSymName() + ".grad").str(), param);
        if (failed(g))
          return failure();
        gradTensor[param.getSymName()] = *g;
      }
      pb::Parameter *p = program.add_parameters();
      p->set_name(param.getSymName().str());
      p->set_tensor(*id);
      for (int64_t d : param.getType().cast<RankedTensorType>().getShape()) {
        p->add_full_shape(d);
        p->add_slice_start(0);
        p->add_slice_size(d);
      }
      p->set_seed(seed);
      if (auto it = paramFile.find(param.getSymName()); it != paramFile.end()) {
        pb::FileData *file = p->mutable_file();
        file->set_path("params.bin");
        file->set_offset(it->second.first);
        file->set_size_bytes(it->second.second);
        file->set_sha256(paramDigest.lookup(param.getSymName()));
      } else if (auto init = param.getInitAttr()) {
        p->set_generator(init.getValue().str());
      } else {
        return param.emitError()
               << "parameter '" << param.getSymName()
               << "' has neither data nor an initializer (init = "
                  "\"normal:STD\", \"zeros\" or \"ones\")";
      }
    }
    return success();
  }

  /// A forward function's arguments: the step's inputs. The first two
  /// integer [batch, seq] arguments are the token ids and the targets.
  LogicalResult bindInput(func::FuncOp func, BlockArgument arg) {
    auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "cleave.offset");
    if (!offset)
      return func.emitError() << "argument " << arg.getArgNumber()
                              << " has no planned offset";
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  "cleave.onnx_name");
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  "cleave.role");
    std::string argName =
        name ? name.str()
             : (role ? role.str() : "arg" + std::to_string(arg.getArgNumber()));
    auto id = addTensor(arg.getType(), offset.getInt(), pb::IO, argName, func);
    if (failed(id))
      return failure();
    tensorOf[arg] = *id;
    pb::Binding *binding = program.add_inputs();
    binding->set_name(argName);
    binding->set_tensor(*id);
    auto type = arg.getType().cast<RankedTensorType>();
    if (role && role.getValue() == "loss_scale") {
      if (type.getRank() != 0 || !type.getElementType().isF32())
        return func.emitError() << "the loss scale argument must be tensor<f32>";
      binding->set_role(pb::LOSS_SCALE);
      return success();
    }
    if (role && (role.getValue() == "tokens" || role.getValue() == "targets")) {
      // The model's inputs, named by cleave-input-roles.
      binding->set_role(role.getValue() == "tokens" ? pb::TOKENS : pb::TARGETS);
      microbatchSize = type.getDimSize(0);
      seqLen = type.getDimSize(1);
      return success();
    }
    if (role && role.getValue() == "step") {
      if (type.getRank() != 0 || !type.getElementType().isInteger(64))
        return func.emitError() << "the step argument must be tensor<i64>";
      binding->set_role(pb::STEP);
      return success();
    }
    // Token ids and targets are marked by cleave-input-roles; any other
    // input is the user's.
    binding->set_role(pb::OTHER);
    return success();
  }

  /// The op's attributes, without the plan's and the symbol it updates.
  LogicalResult addAttributes(Operation &op, pb::Kernel *kernel) {
    for (NamedAttribute attr : op.getAttrs()) {
      StringRef key = attr.getName().getValue();
      if (key == "operand_segment_sizes" || key.startswith("cleave.") ||
          attr.getValue().isa<SymbolRefAttr>())
        continue;
      pb::Attribute converted;
      if (failed(convertAttribute(attr.getValue(), converted)))
        return op.emitError() << "attribute '" << key
                              << "' has a kind the runtime cannot read: "
                              << attr.getValue();
      (*kernel->mutable_attributes())[key.str()] = converted;
    }
    return success();
  }

  LogicalResult emitFunction(func::FuncOp func) {
    pb::FunctionKind kind = kindOf(func);
    pb::Function *fn = program.add_functions();
    fn->set_name(func.getName().str());
    fn->set_kind(kind);
    if (func.isExternal())
      return func.emitError() << "cannot emit a function without a body";
    Block &body = func.getBody().front();
    // Stage boundaries are cleave.send and cleave.recv ops by now.
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kBoundaryAttr) ||
          func.getArgAttr(i, "cleave.grad_of_result"))
        return func.emitError()
               << "argument " << i << " is a pipeline stage boundary; run "
                  "cleave-stage-transfers to make it a cleave.recv";
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (func.getResultAttr(i, kBoundaryAttr) ||
          func.getResultAttr(i, "cleave.grad_of_arg"))
        return func.emitError()
               << "result " << i << " is a pipeline stage boundary; run "
                  "cleave-stage-transfers to make it a cleave.send";

    // What the function receives first, in order: the runtime posts these
    // before binding the step's inputs.
    Block::iterator rest = body.begin();
    for (; rest != body.end() && isa<RecvOp>(*rest); ++rest)
      if (failed(emitRecv(cast<RecvOp>(*rest), fn)))
        return failure();

    llvm::DenseSet<Value> freeable;
    auto forwardName = func->getAttrOfType<FlatSymbolRefAttr>("cleave.forward");
    for (BlockArgument arg : body.getArguments()) {
      auto from = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "cleave.saved_from");
      if (!from) {
        if (failed(bindInput(func, arg)))
          return failure();
        continue;
      }
      auto forward =
          forwardName ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                            func, forwardName)
                      : func::FuncOp();
      if (!forward || forward.isExternal() ||
          from.getInt() >= forward.getBody().front().getTerminator()->getNumOperands())
        return func.emitError() << "argument " << arg.getArgNumber()
                                << " names no forward result";
      Value source = forward.getBody().front().getTerminator()->getOperand(
          from.getInt());
      auto it = tensorOf.find(source);
      if (it == tensorOf.end())
        return func.emitError() << "the forward function " << forwardName
                                << " must come before its backward";
      int id = it->second; // tensorOf[arg] may rehash and move `it`
      tensorOf[arg] = id;
      if (activationTensors.contains(id))
        freeable.insert(arg);
    }

    llvm::DenseMap<Value, Operation *> lastUser;
    for (Operation &op : body)
      for (Value operand : op.getOperands())
        lastUser[operand] = &op;
    for (Value arg : freeable)
      if (!lastUser.count(arg))
        fn->add_body()->mutable_free()->set_tensor(tensorOf.lookup(arg));

    for (Operation &op : llvm::make_range(rest, body.end())) {
      if (auto recv = dyn_cast<RecvOp>(op)) {
        if (failed(emitRecv(recv, fn)))
          return failure();
        continue;
      }
      if (auto send = dyn_cast<SendOp>(op)) {
        // No free after a send: the sent tensor stays in its slot until the
        // receiver has it (the runtime's send does not wait).
        pb::SendRecv *r = fn->add_body()->mutable_send_recv();
        r->set_send(true);
        r->set_peer(peerRank(send.getAxis(), send.getPeer()));
        r->set_tensor(tensorOf.lookup(send.getInput()));
        r->set_tag(send.getTag());
        continue;
      }
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [index, v] : llvm::enumerate(ret.getOperands())) {
          if (func.getResultAttr(index, "cleave.saved"))
            continue;
          pb::Binding *binding = program.add_outputs();
          binding->set_tensor(tensorOf.lookup(v));
          auto name =
              func.getResultAttrOfType<StringAttr>(index, "cleave.onnx_name");
          binding->set_name(name ? name.str() : "result");
          auto type = v.getType().cast<RankedTensorType>();
          bool loss = type.getRank() == 0 &&
                      type.getElementType().isa<FloatType>();
          binding->set_role(loss ? pb::LOSS : pb::OTHER);
        }
        continue;
      }
      if (auto get = dyn_cast<GetParamOp>(op)) {
        auto it = paramTensor.find(get.getName());
        if (it == paramTensor.end())
          return get.emitError() << "no parameter @" << get.getName();
        tensorOf[get.getResult()] = it->second;
        continue;
      }
      if (auto get = dyn_cast<GetGradOp>(op)) {
        auto it = gradTensor.find(get.getName());
        if (it == gradTensor.end())
          return get.emitError() << "parameter @" << get.getName()
                                 << " has no planned gradient";
        tensorOf[get.getResult()] = it->second;
        continue;
      }
      std::string name = onnxNodeName(op.getLoc());
      if (auto acc = dyn_cast<AccumulateGradOp>(op)) {
        auto it = gradTensor.find(acc.getName());
        if (it == gradTensor.end())
          return acc.emitError() << "parameter @" << acc.getName()
                                 << " has no planned gradient";
        pb::Kernel *kernel = fn->add_body()->mutable_kernel();
        kernel->set_op("accumulate_grad");
        kernel->set_location(name);
        kernel->add_inputs(tensorOf.lookup(acc.getGrad()));
        kernel->add_outputs(it->second);
        addFrees(op, fn, freeable, lastUser);
        continue;
      }
      if (auto reduce = dyn_cast<AllReduceGradsOp>(op)) {
        std::optional<ArrayRef<int64_t>> members;
        if (auto m = reduce.getMembers())
          members = *m;
        if (failed(emitBucket(fn->add_body()->mutable_collective(),
                              reduce.getParams(), reduce.getGroup(), members,
                              reduce.getReduce(), &op)))
          return failure();
        continue;
      }
      if (auto start = dyn_cast<AllReduceGradsStartOp>(op)) {
        FailureOr<int> event = programEvent(&op, start.getEvent());
        pb::Instruction inst;
        if (failed(event) ||
            failed(emitBucket(inst.mutable_collective(), start.getParams(),
                              start.getGroup(), std::nullopt,
                              start.getReduce(), &op)))
          return failure();
        inst.mutable_collective()->set_event(*event);
        // Right after the kernel before it, ahead of that kernel's frees:
        // the reduction starts as soon as its gradients are final.
        int at = fn->body_size();
        while (at > 0 && fn->body(at - 1).has_free())
          --at;
        *fn->add_body() = std::move(inst);
        for (int i = fn->body_size() - 1; i > at; --i)
          fn->mutable_body()->SwapElements(i, i - 1);
        continue;
      }
      if (auto wait = dyn_cast<WaitGradsOp>(op)) {
        FailureOr<int> event = programEvent(&op, wait.getEvent());
        if (failed(event))
          return failure();
        pb::Event *e = fn->add_body()->mutable_event();
        e->set_id(*event);
        e->set_wait(true);
        continue;
      }
      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
        if (!offsets || offsets.size() != 1)
          return op.emitError() << "op has no planned offsets; run "
                                   "cleave-memory-plan first";
        auto id = addTensor(reduce.getType(), offsets[0], pb::ACTIVATIONS,
                            name, &op);
        if (failed(id))
          return failure();
        FailureOr<int> group = groupIndex(reduce.getGroup(), std::nullopt, &op);
        if (failed(group))
          return failure();
        pb::Collective *c = fn->add_body()->mutable_collective();
        c->set_kind(pb::ALL_REDUCE);
        c->set_group(*group);
        c->set_reduce(reduce.getReduce() == "sum"    ? pb::SUM
                      : reduce.getReduce() == "mean" ? pb::MEAN
                                                     : pb::MAX);
        c->add_inputs(tensorOf.lookup(reduce.getInput()));
        c->add_outputs(*id);
        tensorOf[reduce.getResult()] = *id;
        freeable.insert(reduce.getResult());
        addFrees(op, fn, freeable, lastUser);
        continue;
      }
      if (isa<AdamWOp, SgdOp>(op)) {
        if (failed(emitUpdate(op, fn)))
          return failure();
        addFrees(op, fn, freeable, lastUser);
        continue;
      }
      auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
      if (!offsets || (int64_t)offsets.size() != op.getNumResults())
        return op.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto id = addTensor(constant.getType(), offsets[0], pb::CONSTANTS,
                            name, &op);
        if (failed(id))
          return failure();
        auto bytes = bytesOf(constant.getValue().cast<ElementsAttr>(), &op);
        if (failed(bytes))
          return failure();
        program.mutable_tensors(*id)->set_data(std::move(*bytes));
        tensorOf[constant.getResult()] = *id;
        continue;
      }
      if (!isa<CleaveDialect>(op.getDialect()))
        return op.emitError() << "op '" << op.getName()
                              << "' has no runtime kernel";

      // An operand whose space a result takes over (the fused loss writes
      // the logits' gradient over the logits) is dead before the kernel.
      if (isa<SoftmaxCrossEntropyFusedOp>(op))
        for (Value v : op.getOperands())
          if (freeable.contains(v) && lastUser.lookup(v) == &op &&
              llvm::is_contained(offsets.asArrayRef(),
                                 program.tensors(tensorOf.lookup(v)).offset())) {
            fn->add_body()->mutable_free()->set_tensor(tensorOf.lookup(v));
            freeable.erase(v);
          }

      pb::Kernel *kernel = fn->add_body()->mutable_kernel();
      kernel->set_op(op.getName().stripDialect().str());
      kernel->set_location(name);
      auto segments =
          op.getAttrOfType<DenseI32ArrayAttr>("operand_segment_sizes");
      unsigned operand = 0;
      if (segments) {
        // Optional operands that are absent are -1, so operand positions
        // stay those of the op's definition.
        for (int32_t size : segments.asArrayRef()) {
          if (size == 0)
            kernel->add_inputs(-1);
          for (int32_t k = 0; k < size; ++k)
            kernel->add_inputs(tensorOf.lookup(op.getOperand(operand++)));
        }
      } else {
        for (Value v : op.getOperands())
          kernel->add_inputs(tensorOf.lookup(v));
        if (isa<AttentionOp>(op) && op.getNumOperands() == 3)
          kernel->add_inputs(-1); // no mask
      }
      if (failed(addAttributes(op, kernel)))
        return failure();
      for (auto [result, offset] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
        auto id = addTensor(result.getType(), offset, pb::ACTIVATIONS, name,
                            &op);
        if (failed(id))
          return failure();
        tensorOf[result] = *id;
        kernel->add_outputs(*id);
        freeable.insert(result);
      }
      addFrees(op, fn, freeable, lastUser);
    }
    return success();
  }

  /// A bucket's gradient all-reduce (cleave.all_reduce_grads and its start)
  /// into `c`: in place on the parameters' gradient tensors.
  LogicalResult emitBucket(pb::Collective *c, ArrayAttr params,
                           StringRef groupName,
                           std::optional<ArrayRef<int64_t>> members,
                           StringRef reduce, Operation *op) {
    c->set_kind(pb::ALL_REDUCE);
    FailureOr<int> group = groupIndex(groupName, members, op);
    if (failed(group))
      return failure();
    c->set_group(*group);
    c->set_reduce(reduce == "sum" ? pb::SUM : pb::MEAN);
    for (Attribute name : params) {
      auto it = gradTensor.find(name.cast<FlatSymbolRefAttr>().getValue());
      if (it == gradTensor.end())
        return op->emitError() << "parameter " << name
                               << " has no planned gradient";
      c->add_inputs(it->second);
      c->add_outputs(it->second);
    }
    return success();
  }

  /// Free what `op` read last, and its results nobody reads.
  void addFrees(Operation &op, pb::Function *fn,
                const llvm::DenseSet<Value> &freeable,
                llvm::DenseMap<Value, Operation *> &lastUser) {
    llvm::SmallPtrSet<Value, 4> done;
    for (Value v : op.getOperands())
      if (freeable.contains(v) && lastUser.lookup(v) == &op &&
          done.insert(v).second)
        fn->add_body()->mutable_free()->set_tensor(tensorOf.lookup(v));
    for (Value result : op.getResults())
      if (!lastUser.count(result))
        fn->add_body()->mutable_free()->set_tensor(tensorOf.lookup(result));
  }

  /// An optimizer update: inputs (grad, step, sum of squares or -1),
  /// outputs (the parameter, then its state tensors), all updated in place.
  LogicalResult emitUpdate(Operation &op, pb::Function *fn) {
    auto symbol = op.getAttrOfType<FlatSymbolRefAttr>("name");
    auto param = paramTensor.find(symbol.getValue());
    if (param == paramTensor.end())
      return op.emitError() << "no parameter " << symbol;
    pb::Kernel *kernel = fn->add_body()->mutable_kernel();
    kernel->set_op(op.getName().stripDialect().str());
    kernel->set_location(onnxNodeName(op.getLoc()));
    kernel->add_inputs(tensorOf.lookup(op.getOperand(0)));
    kernel->add_inputs(tensorOf.lookup(op.getOperand(1)));
    kernel->add_inputs(op.getNumOperands() > 2
                           ? tensorOf.lookup(op.getOperand(2))
                           : -1);
    kernel->add_outputs(param->second);
    auto states = op.getAttrOfType<DenseI64ArrayAttr>("cleave.state_offsets");
    const char *names[] = {".exp_avg", ".exp_avg_sq"};
    int64_t k = 0;
    for (int64_t offset : states ? states.asArrayRef() : ArrayRef<int64_t>{}) {
      std::string stateName =
          symbol.getValue().str() +
          (isa<SgdOp>(op) ? ".momentum_buffer" : names[std::min<int64_t>(k, 1)]);
      auto id = addTensor(op.getOperand(0).getType(), offset,
                          pb::OPTIMIZER_STATE, stateName, &op);
      if (failed(id))
        return failure();
      kernel->add_outputs(*id);
      ++k;
    }
    return addAttributes(op, kernel);
  }

  //===--------------------------------------------------------------------===//
  // Pipelines
  //===--------------------------------------------------------------------===//

  /// The world rank at coordinate `peer` of mesh axis `axis`, this rank's
  /// other coordinates.
  int peerRank(StringRef axis, int64_t peer) const {
    return int(mesh ? mesh.withCoordinate(currentRank, axis, peer) : peer);
  }

  /// A receive: its tensor in the planned (slot) offset, then the runtime's
  /// blocking receive into it.
  LogicalResult emitRecv(RecvOp recv, pb::Function *fn) {
    auto offsets = recv->getAttrOfType<DenseI64ArrayAttr>("cleave.offsets");
    if (!offsets || offsets.size() != 1)
      return recv.emitError() << "op has no planned offsets; run "
                                 "cleave-memory-plan first";
    bool gradient =
        recv.getResult().getParentBlock()->getParentOp()->hasAttr(
            "cleave.forward");
    auto id = addTensor(recv.getType(), offsets[0], pb::ACTIVATIONS,
                        gradient ? "received gradient" : "received activation",
                        recv);
    if (failed(id))
      return failure();
    tensorOf[recv.getResult()] = *id;
    pb::SendRecv *r = fn->add_body()->mutable_send_recv();
    r->set_send(false);
    r->set_peer(peerRank(recv.getAxis(), recv.getPeer()));
    r->set_tensor(*id);
    r->set_tag(recv.getTag());
    return success();
  }

  /// The program's group for a collective over mesh axis `axis`, among the
  /// ranks at coordinates `members` of it when given (all otherwise).
  FailureOr<int> groupIndex(StringRef axis, std::optional<ArrayRef<int64_t>> members,
                            Operation *where) {
    std::string name = axis.str();
    if (members) {
      name = "tied";
      for (auto [i, m] : llvm::enumerate(*members))
        name += (i ? "," : ":") + std::to_string(m);
    }
    pb::Mesh *programMesh = program.mutable_mesh();
    for (int g = 0; g < programMesh->groups_size(); ++g)
      if (programMesh->groups(g).name() == name)
        return g;
    if (!members)
      return where->emitError() << "no mesh group named '" << axis << "'";
    if (!mesh || !mesh.getAxisSize(axis))
      return where->emitError() << "mesh axis '" << axis << "' is not in the "
                                << "mesh";
    pb::Group *group = programMesh->add_groups();
    group->set_name(name);
    for (int64_t m : *members)
      group->add_ranks(peerRank(axis, m));
    return programMesh->groups_size() - 1;
  }

  static func::FuncOp backwardOf(func::FuncOp forward) {
    auto name = forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward");
    return name ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(forward,
                                                                      name)
                : func::FuncOp();
  }

  /// One program per rank of the data x pipeline mesh.
  LogicalResult emitPipeline(ModuleOp top, ArrayRef<ModuleOp> stages) {
    pipelined = true;
    auto info = top->getAttrOfType<DictionaryAttr>("cleave.pipeline");
    auto schedule = top->getAttrOfType<ArrayAttr>("cleave.schedule");
    if (!info || !schedule)
      return mlir::emitError(top.getLoc()) << "the pipeline has no schedule; run "
                                "cleave-pipeline-schedule first";
    mesh = lookupMesh(top);
    if (!mesh || !mesh.getAxisSize(kPipelineAxis))
      return mlir::emitError(top.getLoc())
             << "the pipeline has no cleave.mesh with a \"pipeline\" axis; "
                "run cleave-place-ranks first";
    pipelineRanks = *mesh.getAxisSize(kPipelineAxis);
    dataRanks = mesh.getAxisSize(kDataAxis).value_or(1);
    if (mesh.getNumRanks() != dataRanks * pipelineRanks)
      return mlir::emitError(top.getLoc())
             << "the emitter knows data and pipeline parallelism only, but "
                "the mesh is "
             << mesh;
    int64_t s = stages.size();
    if (pipelineRanks < 2 || s % pipelineRanks != 0 ||
        (int64_t)schedule.size() != pipelineRanks ||
        intFrom(info, "ranks") != pipelineRanks)
      return mlir::emitError(top.getLoc()) << "cleave.pipeline and cleave.schedule do not "
                                "match the " << s << " stage modules";
    if (microbatches < 1)
      return mlir::emitError(top.getLoc()) << "microbatches must be at least 1";
    for (ModuleOp m : stages)
      if (!m->getAttrOfType<DictionaryAttr>("cleave.memory"))
        return m.emitError() << "stage module has no memory plan; run "
                                "cleave-memory-plan on each stage";
    // The microbatch's shape, from whichever stages read the model inputs.
    auto [mbSize, seq] = microbatchShape(stages);
    if (mbSize < 1)
      return mlir::emitError(top.getLoc())
             << "no stage reads the token ids: cleave-input-roles marks them "
                "cleave.role = \"tokens\"";
    FailureOr<int64_t> global = globalBatchOf(top.getLoc(), mbSize);
    if (failed(global))
      return failure();
    if (failed(writeParamsFile(stages)))
      return failure();

    for (int64_t d = 0; d < dataRanks; ++d)
      for (int64_t p = 0; p < pipelineRanks; ++p) {
        if (failed(emitPipelineRank(top, stages, schedule, d, p, mbSize, seq,
                                    *global)))
          return failure();
      }
    return writePlanFiles(top);
  }

  LogicalResult emitPipelineRank(ModuleOp top, ArrayRef<ModuleOp> stages,
                                 ArrayAttr schedule, int64_t d, int64_t p,
                                 int64_t mbSize, int64_t seq, int64_t global) {
    program.Clear();
    tensorOf.clear();
    paramTensor.clear();
    gradTensor.clear();
    activationTensors.clear();
    int64_t s = stages.size();
    int rank = int(rankAt(d, p));
    currentRank = rank;
    program.set_magic("cleave-program");
    program.set_device(device);
    program.set_version(pb::VERSION_CURRENT);
    if (auto file = top.getLoc().dyn_cast<FileLineColLoc>())
      program.set_model(file.getFilename().str());
    pb::Mesh *mesh = program.mutable_mesh();
    mesh->set_rank(rank);
    mesh->set_world_size(int(dataRanks * pipelineRanks));
    mesh->set_data_degree(int(dataRanks));
    mesh->set_pipeline_degree(int(pipelineRanks));
    mesh->set_tensor_degree(1);
    mesh->set_data_rank(int(d));
    mesh->set_pipeline_rank(int(p));
    pb::Group *data = mesh->add_groups();
    data->set_name("data");
    for (int64_t dd = 0; dd < dataRanks; ++dd)
      data->add_ranks(rankAt(dd, p));
    pb::Group *pipe = mesh->add_groups();
    pipe->set_name("pipeline");
    for (int64_t pp = 0; pp < pipelineRanks; ++pp)
      pipe->add_ranks(rankAt(d, pp));

    if (auto scaling = top->getAttrOfType<DictionaryAttr>("cleave.loss_scaling")) {
      pb::LossScaling *ls = program.mutable_loss_scaling();
      ls->set_enabled(true);
      auto real = [&](StringRef key) {
        auto f = scaling.getAs<FloatAttr>(key);
        return f ? f.getValueAsDouble() : 0.0;
      };
      ls->set_initial_scale(real("initial_scale"));
      ls->set_scale_window(intFrom(scaling, "scale_window"));
      ls->set_min_scale(real("min_scale"));
      ls->set_delayed_shift(intFrom(scaling, "delayed_shift"));
    }

    std::map<std::tuple<int64_t, bool, int64_t>, int> functionIndex;
    // The copies of backwards that the last microbatch's steps run, by
    // (stage, slot); appended after every other function, in schedule order.
    std::map<std::pair<int64_t, int64_t>, pb::Function> lastMicrobatch;
    std::set<std::pair<int64_t, int64_t>> lastSlots =
        lastMicrobatchSlots(stages, schedule[p].cast<DenseI64ArrayAttr>());
    SmallVector<int> optimizers;
    struct Optimizer {
      func::FuncOp func;
      int buffer;
      int64_t stage;
    };
    SmallVector<Optimizer> optimizerOf;
    pb::MemoryPlan *plan = program.mutable_memory();
    int chunk = 0;
    for (int64_t st = p; st < s; st += pipelineRanks, ++chunk) {
      ModuleOp m = stages[st];
      auto memory = m->getAttrOfType<DictionaryAttr>("cleave.memory");
      currentBuffer = chunk;
      pb::Buffer *arena = program.add_buffers();
      arena->set_space(pb::DEVICE);
      arena->set_size_bytes(intFrom(memory, "arena_bytes"));
      arena->set_alignment(intFrom(memory, "alignment"));
      plan->set_peak_bytes(plan->peak_bytes() + intFrom(memory, "peak_bytes"));
      plan->set_parameters(plan->parameters() + intFrom(memory, "parameters"));
      plan->set_gradients(plan->gradients() + intFrom(memory, "gradients"));
      plan->set_optimizer_state(plan->optimizer_state() +
                                intFrom(memory, "optimizer_state"));
      plan->set_activations(plan->activations() + intFrom(memory, "activations"));
      plan->set_workspace(plan->workspace() + intFrom(memory, "workspace"));
      plan->set_constants(plan->constants() + intFrom(memory, "constants"));
      plan->set_io(plan->io() + intFrom(memory, "io"));
      slotBase = intFrom(memory, "slot_base");
      slotBytes = intFrom(memory, "slot_bytes");
      int64_t slots = std::max<int64_t>(1, intFrom(memory, "slots"));
      currentSlot = 0;
      if (failed(addParameters(m)))
        return failure();
      SmallVector<func::FuncOp> forwards, optimizerFuncs;
      for (auto func : m.getOps<func::FuncOp>()) {
        pb::FunctionKind kind = kindOf(func);
        if (kind == pb::FORWARD)
          forwards.push_back(func);
        else if (kind == pb::OPTIMIZER)
          optimizerFuncs.push_back(func);
      }
      if (forwards.size() != 1)
        return m.emitError() << "a stage module needs one forward function";
      func::FuncOp forward = forwards.front();
      auto backwardName = forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward");
      func::FuncOp backward =
          backwardName ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                             forward, backwardName)
                       : func::FuncOp();
      for (int64_t k = 0; k < slots; ++k) {
        currentSlot = k;
        tensorOf.clear();
        std::string suffix = slots > 1 ? " slot " + std::to_string(k) : "";
        functionIndex[{st, false, k}] = program.functions_size();
        if (failed(emitFunction(forward)))
          return failure();
        program.mutable_functions(program.functions_size() - 1)
            ->set_name("stage " + std::to_string(st) + " forward" + suffix);
        if (backward) {
          functionIndex[{st, true, k}] = program.functions_size();
          int firstTensor = program.tensors_size();
          if (failed(emitFunction(backward)))
            return failure();
          std::string name = "stage " + std::to_string(st) + " backward" + suffix;
          program.mutable_functions(program.functions_size() - 1)
              ->set_name(name);
          func::FuncOp copy = lastMicrobatchCopy(backward);
          if (copy && lastSlots.count({st, k})) {
            FailureOr<int> last = emitLastMicrobatchCopy(
                copy, {firstTensor, program.tensors_size()},
                name + " (last microbatch)");
            if (failed(last))
              return failure();
            lastMicrobatch[{st, k}] = std::move(*program.mutable_functions(*last));
            program.mutable_functions()->RemoveLast();
          }
        }
      }
      for (func::FuncOp opt : optimizerFuncs)
        optimizerOf.push_back({opt, chunk, st});
    }
    // The rank's optimizer, after every chunk's parameters are known: it
    // may update those of all of them (cleave-merge-chunk-optimizers).
    if (optimizerOf.size() > 1)
      return optimizerOf[1].func.emitError()
             << "pipeline rank " << p << " holds " << optimizerOf.size()
             << " optimizers; run cleave-merge-chunk-optimizers";
    for (auto [opt, buffer, st] : optimizerOf) {
      currentBuffer = buffer;
      currentSlot = 0;
      tensorOf.clear();
      optimizers.push_back(program.functions_size());
      if (failed(emitFunction(opt)))
        return failure();
      program.mutable_functions(program.functions_size() - 1)
          ->set_name("stage " + std::to_string(st) + " optimizer");
    }

    auto addStep = [&](int function, int64_t mb) {
      pb::Step *step = program.add_schedule();
      step->set_function(function);
      step->set_microbatch(mb);
    };
    ArrayRef<int64_t> actions =
        schedule[p].cast<DenseI64ArrayAttr>().asArrayRef();
    for (size_t a = 0; a + 3 < actions.size(); a += 4) {
      auto it = functionIndex.find({actions[a], actions[a + 1] != 0,
                                    actions[a + 3]});
      if (it == functionIndex.end())
        return mlir::emitError(top.getLoc()) << "the schedule of pipeline rank " << p
                               << " names stage " << actions[a]
                               << " (slot " << actions[a + 3]
                               << "), which the rank does not hold";
      int function = it->second;
      auto last = lastMicrobatch.find({actions[a], actions[a + 3]});
      if (actions[a + 1] && actions[a + 2] == microbatches - 1 &&
          last != lastMicrobatch.end()) {
        function = program.functions_size();
        *program.add_functions() = std::move(last->second);
        lastMicrobatch.erase(last);
      }
      addStep(function, actions[a + 2]);
    }
    for (int f : optimizers)
      addStep(f, -1);

    pb::Batch *batch = program.mutable_batch();
    batch->set_microbatch_size(mbSize);
    batch->set_microbatches(microbatches);
    batch->set_seq_len(seq);
    batch->set_first_sample(d * mbSize * microbatches);
    batch->set_global_batch(global);

    SmallString<256> programPath(outputDir);
    llvm::sys::path::append(programPath,
                            "rank-" + std::to_string(rank) + ".pb");
    if (!writeProgram(program, programPath))
      return mlir::emitError(top.getLoc()) << "cannot write '" << programPath << "'";
    return success();
  }

  /// The (stage, slot) of each backward step of the last microbatch in a
  /// rank's schedule; numbers the gradient events their copies start.
  std::set<std::pair<int64_t, int64_t>>
  lastMicrobatchSlots(ArrayRef<ModuleOp> stages, DenseI64ArrayAttr schedule) {
    gradientEvents.clear();
    std::set<std::pair<int64_t, int64_t>> slots;
    ArrayRef<int64_t> actions = schedule.asArrayRef();
    for (size_t a = 0; a + 3 < actions.size(); a += 4) {
      int64_t st = actions[a];
      if (!actions[a + 1] || actions[a + 2] != microbatches - 1 || st < 0 ||
          st >= (int64_t)stages.size())
        continue;
      slots.insert({st, actions[a + 3]});
      for (auto func : ModuleOp(stages[st]).getOps<func::FuncOp>())
        if (func->hasAttr(kLastMicrobatchOfAttr))
          numberGradientEvents(func);
    }
    return slots;
  }

  /// plan.json (and with `report`, report.html): the plan analysis of the
  /// module, the one shape of every layout.
  LogicalResult writePlanFiles(ModuleOp top) {
    // Passes.td's PlanLayoutOptions, in PlanLayout's order.
    PlanLayout layout{dataDegree, placement, microbatches, globalBatch,
                      backend, ratesFile};
    FailureOr<const Plan *> plan = getAnalysis<PlanAnalysis>().getPlan(layout);
    if (failed(plan))
      return failure();
    llvm::json::Value json = toJSON(**plan);
    auto write = [&](StringRef name, llvm::function_ref<void(raw_ostream &)> body)
        -> LogicalResult {
      SmallString<256> path(outputDir);
      llvm::sys::path::append(path, name);
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      if (ec)
        return mlir::emitError(top.getLoc())
               << "cannot write '" << path << "': " << ec.message();
      body(os);
      return success();
    };
    if (failed(write("plan.json", [&](raw_ostream &os) {
          os << llvm::formatv("{0:2}", json) << "\n";
        })))
      return failure();
    if (!report)
      return success();
    llvm::Expected<std::string> page =
        ::cleave::renderReport(*json.getAsObject());
    if (!page)
      return mlir::emitError(top.getLoc()) << llvm::toString(page.takeError());
    return write("report.html", [&](raw_ostream &os) { os << *page; });
  }
};

} // namespace
