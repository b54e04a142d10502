//===- cleave-compile.cpp - ONNX model + spec to per-rank programs -------===//
//
// Thin: parses flags and the spec, imports the model with the spec's batch,
// and runs the pass pipeline of passes/Pipeline.cpp, which writes the
// per-rank programs. `--emit=mlir` stops after import and prints the IR.
//
//===----------------------------------------------------------------------===//

#include "frontend/DiagnosticPrinter.h"
#include "frontend/InitFrom.h"
#include "frontend/OnnxImporter.h"
#include "frontend/Spec.h"
#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "runtime/CommunicationCheck.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include "program.pb.h"

#include <fstream>
#include <limits>
#include <unistd.h>

using namespace llvm;

// --help lists these categories only; MLIR's debugging options are under
// --help-hidden, and LLVM's internal ones (linked in with libLLVM: Polly,
// matrix lowering, targets ...) are not listed at all.
static cl::OptionCategory inputCategory("Model and spec");
static cl::OptionCategory outputCategory("Output");
static cl::OptionCategory mlirCategory(
    "MLIR debugging (as in mlir-opt: --mlir-print-ir-after=PASS, "
    "--mlir-print-ir-after-all ...)");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(inputCategory));
static cl::opt<std::string>
    emit("emit",
         cl::desc("stop after import and print the IR (mlir); without it, "
                  "compile to the per-rank program in -o"),
         cl::value_desc("mlir"), cl::init(""), cl::cat(outputCategory));
static cl::opt<std::string>
    outputPath("o",
               cl::desc("the output folder (rank-<r>.pb, params.bin, "
                        "plan.json); with --emit=mlir the output file"),
               cl::value_desc("path"), cl::init(""), cl::cat(outputCategory));
static cl::opt<std::string> specPath("spec",
                                     cl::desc("the parallelism spec (JSON)"),
                                     cl::value_desc("spec.json"),
                                     cl::init(""), cl::cat(inputCategory));
static cl::list<std::string>
    setKeys("set", cl::desc("overrides a spec key: KEY=VALUE"),
            cl::value_desc("KEY=VALUE"), cl::cat(inputCategory));
static cl::opt<int64_t> batch("batch",
                              cl::desc("with --emit=mlir: binds a symbolic "
                                       "batch dimension"),
                              cl::init(0), cl::cat(inputCategory));
static cl::list<std::string>
    bindDims("bind-dim", cl::desc("binds a symbolic dimension: NAME=N"),
             cl::value_desc("NAME=N"), cl::cat(inputCategory));
static cl::opt<bool>
    elideWeights("elide-weights",
                 cl::desc("print parameters without their data, each marked "
                          "cleave.elided_data (the IR of a real model is "
                          "otherwise as large as its weights)"),
                 cl::init(false), cl::cat(outputCategory));

static cl::opt<std::string>
    ratesPath("rates",
              cl::desc("rates measured by cleave-calibrate, for the cost "
                       "model (default: the checked-in rates of the spec's "
                       "device)"),
              cl::value_desc("rates.json"), cl::init(""),
              cl::cat(inputCategory));
static cl::opt<std::string> initFrom(
    "init-from",
    cl::desc("starting weights: each parameter the file holds (by ONNX "
             "initializer name, same shape and dtype; e.g. cleave-checkpoint "
             "export or cleave-run --save-params) starts from its tensor; the "
             "others keep their initialization"),
    cl::value_desc("model.safetensors"), cl::init(""), cl::cat(inputCategory));
static cl::opt<bool> forwardOnly(
    "forward-only",
    cl::desc("compile the forward pass only (no backward, no optimizer); "
             "without it the model must return a scalar loss"),
    cl::init(false), cl::cat(inputCategory));
static cl::opt<bool>
    writeReport("report",
                cl::desc("also write OUT/report.html: the plan as a page (the "
                         "partition, memory per rank, pipeline timeline)"),
                cl::init(false), cl::cat(outputCategory));

/// Removes the programs of a compile that is refused (rank files and the
/// roles' shared programs).
static void removePrograms(StringRef folder) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(folder, ec), end;
       !ec && it != end; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if ((name.startswith("rank-") || name.startswith("role-")) &&
        name.endswith(".pb"))
      llvm::sys::fs::remove(it->path());
  }
}

/// Reads back every rank's program and proves that their collectives and
/// point-to-point operations match and cannot deadlock
/// (runtime/CommunicationCheck.h); a job that would hang is not written.
static int checkCommunication(StringRef folder, int64_t worldSize) {
  std::vector<std::string> paths;
  for (int64_t r = 0; r < worldSize; ++r) {
    SmallString<256> path(folder);
    llvm::sys::path::append(path, "rank-" + std::to_string(r) + ".pb");
    paths.push_back(path.str().str());
  }
  size_t programsRead = 0;
  cleave::runtime::Status status =
      cleave::runtime::checkCommunicationOfFiles(paths, &programsRead);
  if (status) {
    outs() << "checked: the communication of " << worldSize << " rank"
           << (worldSize == 1 ? "" : "s") << " matches and cannot deadlock";
    if (programsRead < paths.size())
      outs() << " (" << programsRead << " distinct programs, the other "
             << paths.size() - programsRead
             << " ranks' files equal to one of them up to rank and groups)";
    outs() << "\n";
    return 0;
  }
  errs() << "cleave-compile: internal error: the compiled programs would not "
            "run together, so none is kept (please report this with the "
            "spec): "
         << status.message() << "\n";
  removePrograms(folder);
  return 1;
}

/// Prints the module for --emit=mlir.
static int printModule(mlir::ModuleOp module) {
  std::string error;
  auto output = mlir::openOutputFile(outputPath.empty() ? std::string("-") : outputPath.getValue(),
                                     &error);
  if (!output) {
    errs() << "cleave-compile: " << error << "\n";
    return 1;
  }
  // Locations carry the ONNX node names, so diagnostics of any later
  // cleave-opt run on this output still name the node.
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  if (elideWeights) {
    // MLIR 16 cannot elide resource blobs when printing, so the data is
    // dropped from the printed module instead, each parameter marked.
    module->walk([&](mlir::cleave::ParameterOp param) {
      if (param.removeValueAttr())
        param->setAttr("cleave.elided_data",
                       mlir::UnitAttr::get(module.getContext()));
    });
    flags.elideLargeElementsAttrs(16);
  }
  module->print(output->os(), flags);
  output->os() << "\n";
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // --mlir-print-ir-after=PASS looks the pass up in the registry.
  mlir::cleave::registerCleavePasses();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  mlir::registerAsmPrinterCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.startswith("mlir-")) {
      option->addCategory(mlirCategory);
      option->setHiddenFlag(cl::Hidden);
    }
  cl::HideUnrelatedOptions({&inputCategory, &outputCategory, &mlirCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "Cleave compiler\n\n"
      "Every float initializer of rank >= 1 is a trained parameter, except\n"
      "those the model's `cleave.buffers` metadata lists (models/export.py\n"
      "writes it; they become constants) and those matching the spec's\n"
      "\"frozen_parameters\" (names or glob patterns, for the buffers an\n"
      "export from elsewhere turned into initializers: loaded and saved,\n"
      "never trained).\n");

  if (!emit.empty() && emit != "mlir") {
    errs() << "cleave-compile: --emit=" << emit
           << " is not known; the choices: --emit=mlir, or no --emit to "
              "compile the program\n";
    return 2;
  }
  bool programMode = emit.empty();
  if (programMode && outputPath.empty()) {
    errs() << "cleave-compile: give the output folder with -o OUT/ (or "
              "--emit=mlir to print the imported IR)\n";
    return 2;
  }
  if (batch < 0) {
    errs() << "cleave-compile: --batch must be positive, got " << batch
           << "\n";
    return 2;
  }
  if (programMode && batch > 0) {
    errs() << "cleave-compile: --batch is for --emit=mlir; the program takes "
              "its batch from the spec (--set batch_size=N)\n";
    return 2;
  }

  cleave::Spec spec;
  if (!specPath.empty() || !setKeys.empty()) {
    Expected<cleave::Spec> read =
        specPath.empty() ? cleave::parseSpec("{}", "--set", setKeys)
                         : cleave::readSpec(specPath, setKeys);
    if (!read) {
      errs() << "cleave-compile: " << toString(read.takeError()) << "\n";
      return 1;
    }
    spec = *read;
  }
  // The programs' least size is known from the spec alone: refuse before
  // reading the model, let alone writing, what cannot fit the output's file
  // system or this machine's memory.
  if (programMode) {
    SmallString<256> existing(outputPath.getValue());
    while (!existing.empty() && !llvm::sys::fs::exists(existing))
      llvm::sys::path::remove_filename(existing);
    ErrorOr<llvm::sys::fs::space_info> space =
        llvm::sys::fs::disk_space(existing.empty() ? "." : existing.str());
    cleave::HostLimits limits;
    limits.freeDiskBytes =
        space ? space->available : std::numeric_limits<uint64_t>::max();
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    limits.memoryBytes = pages > 0 && pageSize > 0
                             ? uint64_t(pages) * uint64_t(pageSize)
                             : std::numeric_limits<uint64_t>::max();
    // A Step object and its pointer in the schedule's repeated field.
    limits.scheduleEntryBytes =
        sizeof(cleave::program::Step) + sizeof(void *);
    if (Error e = cleave::checkProgramsFit(spec, limits, outputPath)) {
      errs() << "cleave-compile: " << toString(std::move(e)) << "\n";
      return 1;
    }
  }

  if (programMode && forwardOnly && spec.pipelineParallelDegree > 1) {
    // The pipeline schedule interleaves each stage's forward with its
    // backward; a forward-only schedule is not built yet.
    errs() << "cleave-compile: --forward-only compiles without a pipeline; "
              "spec key 'pipeline_parallel_degree' is "
           << spec.pipelineParallelDegree
           << ": set it to 1 (--set pipeline_parallel_degree=1), or train\n";
    return 2;
  }

  cleave::ImportOptions options;
  if (batch > 0)
    options.batchSize = batch;
  if (programMode)
    options.resolveBatch = [&](std::optional<int64_t> exported) {
      return cleave::microbatchSize(spec, exported);
    };
  options.frozen = spec.frozenParameters;
  for (const std::string &binding : bindDims) {
    auto [name, value] = StringRef(binding).split('=');
    int64_t n;
    if (name.empty() || value.getAsInteger(10, n) || n <= 0) {
      errs() << "cleave-compile: --bind-dim expects NAME=N with N > 0, got '"
             << binding << "'\n";
      return 2;
    }
    options.dims[name.str()] = n;
  }

  mlir::MLIRContext context;
  mlir::DialectRegistry registry;
  mlir::cleave::registerCleaveDialects(registry);
  context.appendDialectRegistry(registry);
  cleave::installDiagnosticPrinter(context);
  auto module = cleave::importOnnxFile(modelPath, context, options);
  if (failed(module))
    return 1;
  if (!initFrom.empty()) {
    int64_t applied = 0;
    if (failed(cleave::initParametersFrom(**module, initFrom, applied)))
      return 1;
    if (programMode)
      outs() << "init-from " << initFrom << ": " << applied << " of "
             << std::distance(
                    (**module).getOps<mlir::cleave::ParameterOp>().begin(),
                    (**module).getOps<mlir::cleave::ParameterOp>().end())
             << " parameters\n";
  }
  if (!programMode)
    return printModule(**module);

  // Spec keys accepted that change nothing (SMP's skip_tracing...): the
  // emitter lists them in plan.json's "notes".
  mlir::Builder builder(&context);
  SmallVector<mlir::Attribute> notes;
  for (const cleave::SpecNote &note : spec.notes)
    notes.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("key", builder.getStringAttr(note.key)),
         builder.getNamedAttr("value", builder.getStringAttr(note.value)),
         builder.getNamedAttr("why", builder.getStringAttr(note.why))}));
  if (!notes.empty())
    (**module)->setAttr("cleave.spec_notes", builder.getArrayAttr(notes));
  // tensor_parallel_seed: the emitter seeds the split parameters' generated
  // initialization with it.
  if (spec.tensorParallelSeed)
    (**module)->setAttr(mlir::cleave::kTensorParallelSeedAttr,
                        builder.getI64IntegerAttr(*spec.tensorParallelSeed));

  // --mlir-timing: each pass's time, and the communication check's.
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTimer = timing.getRootScope();
  mlir::PassManager pm(&context);
  mlir::applyPassManagerCLOptions(pm);
  pm.enableTiming(rootTimer);
  mlir::cleave::ProgramPipelineOptions pipeline;
  pipeline.outputDir = outputPath.getValue();
  pipeline.train = !forwardOnly;
  pipeline.microbatches = spec.microbatches;
  pipeline.dataDegree = spec.worldSize / (spec.pipelineParallelDegree *
                                          spec.tensorParallelDegree);
  pipeline.shardOptimizerState = spec.shardOptimizerState;
  pipeline.shardedDegree = spec.shardedDataParallelDegree;
  pipeline.paramPersistenceThreshold = spec.sdpParamPersistenceThreshold;
  pipeline.processesPerHost =
      spec.sdpHierarchicalAllgather ? spec.processesPerHost : 0;
  pipeline.maxLiveParameters = spec.sdpMaxLiveParameters;
  pipeline.prefetchDepth = spec.sdpPrefetchDepth;
  pipeline.reduceBucketSize = spec.sdpReduceBucketSize;
  pipeline.globalBatch = spec.batchSize.value_or(0);
  pipeline.seed = spec.seed;
  const cleave::OptimizerSpec &opt = spec.optimizer;
  pipeline.optimizer = opt.type;
  pipeline.lr = opt.lr;
  pipeline.beta1 = opt.beta1;
  pipeline.beta2 = opt.beta2;
  pipeline.eps = opt.eps;
  pipeline.weightDecay = opt.weightDecay;
  pipeline.gradClip = opt.gradClip;
  pipeline.momentum = opt.momentum;
  pipeline.mixedPrecision = spec.bf16 ? "bf16" : spec.fp16 ? "fp16" : "";
  pipeline.dynamicLossScale = spec.dynamicLossScale;
  pipeline.initScale = spec.initScale;
  pipeline.scaleWindow = spec.scaleWindow;
  pipeline.minScale = spec.minScale;
  pipeline.delayedShift = spec.delayedShift;
  pipeline.warmupSteps = opt.warmupSteps;
  pipeline.decaySteps = opt.decaySteps;
  pipeline.minLr = opt.minLr;
  pipeline.pipelineDegree = spec.pipelineParallelDegree;
  pipeline.tensorDegree = spec.tensorParallelDegree;
  pipeline.sequenceParallel = spec.sequenceParallel;
  pipeline.splitTokenReads = !spec.prescaledBatch;
  pipeline.virtualStages = spec.virtualPipelineDegree;
  pipeline.activeMicrobatches = spec.activeMicrobatches;
  pipeline.schedule = spec.pipeline;
  pipeline.splitPoints = spec.partitionPoints;
  pipeline.remat = spec.activationCheckpointing;
  pipeline.rematLayers = spec.activationCheckpointingLayers;
  pipeline.offload = spec.offloadActivations;
  pipeline.offloadHorizon = spec.activationLoadingHorizon;
  pipeline.optimize = spec.optimize;
  pipeline.memoryWeight = spec.memoryWeight;
  pipeline.backend = spec.device == "cuda" ? "h100" : "cpu";
  pipeline.ratesFile = ratesPath.getValue();
  pipeline.placement = spec.placementStrategy;
  pipeline.device = spec.device;
  pipeline.deviceMemoryGib = spec.deviceMemoryGib;
  pipeline.report = writeReport.getValue();
  mlir::cleave::buildProgramPipeline(pm, pipeline);
  if (mlir::failed(pm.run(**module)))
    return 1;
  {
    mlir::TimingScope checkTimer = rootTimer.nest("communication check");
    if (checkCommunication(outputPath, spec.worldSize))
      return 1;
  }
  if (writeReport) {
    SmallString<256> pagePath(outputPath.getValue());
    llvm::sys::path::append(pagePath, "report.html");
    outs() << "report: " << pagePath << "\n";
  }
  return 0;
}
