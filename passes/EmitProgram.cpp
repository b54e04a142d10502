//===- EmitProgram.cpp - the per-rank program from a planned module -------===//
//
// The last step of compilation: a module that cleave-memory-plan has planned
// becomes runtime/program.proto's Program, one per rank of the mesh
// (rank-<r>.pb), plus the parameters' initial bytes (params.bin) and the
// plan (plan.json). Every layout takes one path: a module that is not split
// is a pipeline of one stage. Each rank's program holds the functions of
// the stages it runs (one copy per activation slot), the optimizer, and
// cleave.schedule's order of them; RankProgram translates the functions.
// The runtime knows nothing of MLIR, so this is the only place the two
// meet.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/DistributionOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/PlanAnalysis.h"
#include "passes/RankProgram.h"
#include "passes/Report.h"
#include "runtime/ProgramSeal.h"
#include "runtime/ProgramSplice.h"
#include "runtime/SharedProgram.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <tuple>

namespace mlir::cleave {
#define GEN_PASS_DEF_EMITPROGRAM
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct EmitProgram : mlir::cleave::impl::EmitProgramBase<EmitProgram> {
  using EmitProgramBase::EmitProgramBase;

  void runOnOperation() override {
    if (succeeded(emit()) && succeeded(writeProgramFiles()))
      return;
    // Files are written as they are made: none of a failed emission stays.
    for (const ProgramFile &file : programFiles)
      llvm::sys::fs::remove(file.path);
    for (const std::string &path : sharedFiles)
      llvm::sys::fs::remove(path);
    signalPassFailure();
  }

  // The ranks' programs, written as they are made and sealed once all are
  // known: each carries the fingerprint of them all (runtime/ProgramSeal.h),
  // the hash of their SHA-256s in emission order. Only a hasher per file is
  // kept, not its bytes.
  struct ProgramFile {
    std::string path;
    ::cleave::runtime::Sha256 hasher;
  };
  std::vector<ProgramFile> programFiles;
  std::vector<std::string> programDigests;
  // The roles' shared programs (role-<k>.pb), sealed when written.
  std::vector<std::string> sharedFiles;

  /// Writes `program` as rank `rank`'s file, unsealed.
  LogicalResult writeProgram(int64_t rank, const pb::Program &program) {
    std::string bytes;
    if (!serializeProgram(program, bytes))
      return mlir::emitError(getOperation().getLoc())
             << "cannot serialize the program of rank " << rank;
    return writeBytes(rank, bytes);
  }

  /// Writes a serialized program as rank `rank`'s file, unsealed.
  LogicalResult writeBytes(int64_t rank, const std::string &bytes) {
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, "rank-" + std::to_string(rank) + ".pb");
    ::cleave::runtime::Sha256 hasher;
    hasher.update(bytes.data(), bytes.size());
    programDigests.push_back(::cleave::runtime::Sha256(hasher).hexDigest());
    std::ofstream out(path.c_str(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size());
    if (!out)
      return mlir::emitError(getOperation().getLoc())
             << "cannot write '" << path << "'";
    programFiles.push_back({path.str().str(), hasher});
    return success();
  }

  /// Seals every rank's program with the compile's fingerprint and its own
  /// checksum.
  LogicalResult writeProgramFiles() {
    std::string fingerprint =
        ::cleave::runtime::compileFingerprintOfDigests(programDigests);
    for (const ProgramFile &file : programFiles) {
      std::string trailer =
          ::cleave::runtime::sealTrailer(file.hasher, fingerprint);
      std::ofstream out(file.path, std::ios::binary | std::ios::app);
      out.write(trailer.data(), trailer.size());
      if (!out)
        return mlir::emitError(getOperation().getLoc())
               << "cannot write '" << file.path << "'";
    }
    programFiles.clear();
    programDigests.clear();
    return success();
  }

  /// A program that ranks share (role-<k>.pb, k in the order made): a
  /// pipeline stage's at data rank 0 and tensor rank 0, or a tensor rank's
  /// own where it differs from that in more than a header holds.
  struct SharedBase {
    pb::Program program;
    std::string bytes; // serialized, unsealed
    std::set<int> peers;
    std::string file, sha256; // once written
  };

  /// How the ranks at one pipeline and tensor coordinate share a base:
  /// data rank 0's header (what differs from the base: mesh, batch, peers,
  /// parameters' slices, coordinate constants), and what moves with the
  /// data coordinate: the rank, its first sample, the members of its
  /// groups along the other axes (tensor, pipeline, tied) and its peers.
  /// The data-parallel ranks run the same functions on other samples, and
  /// the tensor ranks of a stage on other slices: where there are more
  /// than two data ranks, a stage's program is written once and every rank
  /// file is a header (runtime/SharedProgram.h). Each tensor rank's
  /// program is translated at data rank 0 (the header is its difference
  /// from the base, checked byte for byte) and at data rank 1, whose
  /// difference must be data rank 0's shifted: that catches whatever else
  /// depends on the data coordinate (ZeRO's chunk of each rank, MiCS
  /// groups), and such ranks are written in full for every data rank.
  struct Share {
    int base = -1;
    pb::Program header; // at data rank 0; no shared.path nor sha256 yet
    // Groups not along the data axis: their index in the mesh and their
    // ranks at data 0.
    std::vector<std::pair<int, std::vector<int64_t>>> groups;
    bool usable = true;
  };
  std::vector<SharedBase> bases;

  /// Makes `program` (moved in) a base; returns its index.
  FailureOr<int> addBase(pb::Program &&program) {
    bases.emplace_back();
    SharedBase &base = bases.back();
    base.program = std::move(program);
    base.peers = ::cleave::runtime::sendRecvPeers(base.program);
    if (!serializeProgram(base.program, base.bytes))
      return mlir::emitError(getOperation().getLoc())
             << "cannot serialize a shared program";
    return int(bases.size() - 1);
  }

  /// The header of the base's own rank: its mesh and batch, each peer its
  /// own.
  static pb::Program ownHeader(const SharedBase &base) {
    pb::Program header;
    header.set_magic(base.program.magic());
    header.set_version(pb::VERSION_SHARED);
    header.set_model(base.program.model());
    *header.mutable_mesh() = base.program.mesh();
    if (base.program.has_batch())
      *header.mutable_batch() = base.program.batch();
    for (int peer : base.peers) {
      pb::PeerMap *entry = header.mutable_shared()->add_peers();
      entry->set_from(peer);
      entry->set_to(peer);
    }
    return header;
  }

  /// Whether `program` is the base's up to a header; if so, `header` is
  /// that header and `program` is spent, else `program` is as it was.
  static bool diffAgainst(const SharedBase &base, pb::Program &program,
                          pb::Program &header) {
    const pb::Program &b = base.program;
    if (program.functions_size() != b.functions_size() ||
        program.tensors_size() != b.tensors_size() ||
        program.parameters_size() != b.parameters_size() ||
        program.has_batch() != b.has_batch())
      return false;
    // The peer the base has where this program has each of its own.
    std::map<int, int> peerOf;
    std::vector<std::pair<pb::SendRecv *, int>> peers;
    for (int f = 0; f < b.functions_size(); ++f) {
      const pb::Function &bf = b.functions(f);
      pb::Function *pf = program.mutable_functions(f);
      if (pf->body_size() != bf.body_size())
        return false;
      for (int i = 0; i < bf.body_size(); ++i) {
        if (pf->body(i).has_send_recv() != bf.body(i).has_send_recv())
          return false;
        if (!bf.body(i).has_send_recv())
          continue;
        int from = bf.body(i).send_recv().peer();
        int to = pf->body(i).send_recv().peer();
        if (peerOf.emplace(from, to).first->second != to)
          return false;
        peers.emplace_back(pf->mutable_body(i)->mutable_send_recv(), from);
      }
    }
    std::vector<int> constants;
    for (int t = 0; t < b.tensors_size(); ++t)
      if (b.tensors(t).category() == pb::CONSTANTS &&
          program.tensors(t).category() == pb::CONSTANTS &&
          program.tensors(t).data() != b.tensors(t).data())
        constants.push_back(t);
    // Parameters whose slices start elsewhere (in as many axes and pieces:
    // anything else differing is found by the comparison below).
    std::vector<int> slices;
    for (int i = 0; i < b.parameters_size(); ++i) {
      const pb::Parameter &bp = b.parameters(i), &pp = program.parameters(i);
      if (pp.slice_start_size() != bp.slice_start_size() ||
          pp.pieces_size() != bp.pieces_size())
        return false;
      bool moved = !std::equal(pp.slice_start().begin(),
                               pp.slice_start().end(),
                               bp.slice_start().begin()) ||
                   !std::equal(pp.slice_size().begin(), pp.slice_size().end(),
                               bp.slice_size().begin(), bp.slice_size().end());
      for (int k = 0; k < bp.pieces_size(); ++k) {
        if (pp.pieces(k).start_size() != bp.pieces(k).start_size())
          return false;
        moved |= !std::equal(pp.pieces(k).start().begin(),
                             pp.pieces(k).start().end(),
                             bp.pieces(k).start().begin());
      }
      if (moved)
        slices.push_back(i);
    }

    // Move what differs into the header, the base's in its place.
    header.Clear();
    header.set_magic(program.magic());
    header.set_version(pb::VERSION_SHARED);
    header.set_model(program.model());
    pb::SharedProgram *shared = header.mutable_shared();
    header.mutable_mesh()->Swap(program.mutable_mesh());
    *program.mutable_mesh() = b.mesh();
    if (b.has_batch()) {
      header.mutable_batch()->Swap(program.mutable_batch());
      *program.mutable_batch() = b.batch();
    }
    for (auto [from, to] : peerOf) {
      pb::PeerMap *entry = shared->add_peers();
      entry->set_from(from);
      entry->set_to(to);
    }
    for (auto &[sendRecv, from] : peers) {
      int to = sendRecv->peer();
      sendRecv->set_peer(from);
      from = to;
    }
    for (int t : constants) {
      pb::ConstantData *constant = shared->add_constants();
      constant->set_tensor(t);
      constant->mutable_data()->swap(*program.mutable_tensors(t)->mutable_data());
      program.mutable_tensors(t)->set_data(b.tensors(t).data());
    }
    for (int i : slices) {
      pb::ParameterSlice *slice = shared->add_slices();
      pb::Parameter *param = program.mutable_parameters(i);
      slice->set_parameter(i);
      slice->mutable_slice_start()->Swap(param->mutable_slice_start());
      *param->mutable_slice_start() = b.parameters(i).slice_start();
      // A padded vocabulary's last tensor rank holds fewer real rows.
      if (!std::equal(param->slice_size().begin(), param->slice_size().end(),
                      b.parameters(i).slice_size().begin(),
                      b.parameters(i).slice_size().end())) {
        slice->mutable_slice_size()->Swap(param->mutable_slice_size());
        *param->mutable_slice_size() = b.parameters(i).slice_size();
      }
      for (int k = 0; k < param->pieces_size(); ++k)
        for (int a = 0; a < param->pieces(k).start_size(); ++a) {
          slice->add_pieces_start(param->pieces(k).start(a));
          param->mutable_pieces(k)->set_start(
              a, b.parameters(i).pieces(k).start(a));
        }
    }
    std::string bytes;
    if (serializeProgram(program, bytes) && bytes == base.bytes)
      return true;
    // Not the base's: put back what was moved.
    header.mutable_mesh()->Swap(program.mutable_mesh());
    if (b.has_batch())
      header.mutable_batch()->Swap(program.mutable_batch());
    for (auto &[sendRecv, to] : peers)
      sendRecv->set_peer(to);
    for (const pb::ConstantData &constant : shared->constants())
      program.mutable_tensors(constant.tensor())->set_data(constant.data());
    for (const pb::ParameterSlice &slice : shared->slices()) {
      pb::Parameter *param = program.mutable_parameters(slice.parameter());
      *param->mutable_slice_start() = slice.slice_start();
      if (slice.slice_size_size())
        *param->mutable_slice_size() = slice.slice_size();
      int at = 0;
      for (pb::Box &box : *param->mutable_pieces())
        for (int64_t &start : *box.mutable_start())
          start = slice.pieces_start(at++);
    }
    header.Clear();
    return false;
  }

  /// Finds what moves with the data coordinate in `share`'s header.
  void makeShift(Share &share) const {
    auto dataOf = [&](int64_t r) {
      return mesh.getCoordinate(r, kDataAxis);
    };
    const pb::Mesh &place = share.header.mesh();
    for (int g = 0; g < place.groups_size(); ++g) {
      const pb::Group &group = place.groups(g);
      std::set<int64_t> coordinates;
      std::vector<int64_t> ranks(group.ranks().begin(), group.ranks().end());
      for (int64_t r : ranks)
        coordinates.insert(dataOf(r));
      if (coordinates == std::set<int64_t>{0})
        share.groups.emplace_back(g, std::move(ranks));
      else if ((int64_t)coordinates.size() != dataRanks ||
               ranks.size() % dataRanks != 0)
        // Part of the data axis (MiCS): no shift gives the others'.
        share.usable = false;
    }
    for (const pb::PeerMap &entry : share.header.shared().peers())
      if (dataOf(entry.to()) != 0)
        share.usable = false;
  }

  /// `share`'s header moved to data rank `d`.
  pb::Program shiftedHeader(const Share &share, int64_t d,
                            int64_t samplesPerRank) const {
    auto move = [&](int64_t r) {
      return int(mesh.withCoordinate(r, kDataAxis, d));
    };
    pb::Program header = share.header;
    pb::Mesh *place = header.mutable_mesh();
    place->set_rank(move(place->rank()));
    place->set_data_rank(int(d));
    for (const auto &[g, ranks] : share.groups)
      for (auto [i, r] : llvm::enumerate(ranks))
        place->mutable_groups(g)->set_ranks(int(i), move(r));
    if (header.has_batch())
      header.mutable_batch()->set_first_sample(d * samplesPerRank);
    for (pb::PeerMap &entry : *header.mutable_shared()->mutable_peers())
      entry.set_to(move(entry.to()));
    return header;
  }

  /// Writes rank `rank`'s file: `share`'s header at data rank `d`, and the
  /// base's file if not yet written.
  LogicalResult writeShared(int64_t rank, const Share &share, int64_t d,
                            int64_t samplesPerRank) {
    SharedBase &base = bases[share.base];
    if (base.file.empty()) {
      // The base's file is complete when written: its seal's fingerprint
      // is empty, and the headers that name it carry its checksum (the
      // seal's last 64 bytes), so the compile's fingerprint covers it.
      std::string sealed = ::cleave::runtime::sealProgram(base.bytes, "");
      base.file = ::cleave::runtime::sharedProgramFileName(share.base);
      base.sha256 = sealed.substr(sealed.size() - 64);
      SmallString<256> path(outputDir);
      llvm::sys::path::append(path, base.file);
      std::ofstream out(path.c_str(), std::ios::binary | std::ios::trunc);
      out.write(sealed.data(), sealed.size());
      sharedFiles.push_back(path.str().str());
      if (!out)
        return mlir::emitError(getOperation().getLoc())
               << "cannot write '" << path << "'";
    }
    pb::Program header = shiftedHeader(share, d, samplesPerRank);
    header.mutable_shared()->set_path(base.file);
    header.mutable_shared()->set_sha256(base.sha256);
    return writeProgram(rank, header);
  }

  /// Writes rank `rank`'s file in full: base `base` joined with its
  /// `header` (a rank whose data rank 1 is not shared after all).
  LogicalResult writeUnshared(int64_t rank, const pb::Program &header,
                              int base) {
    pb::Program program;
    if (!::cleave::runtime::joinSharedProgram(
            header, pb::Program(bases[base].program),
            "rank " + std::to_string(rank), program))
      return mlir::emitError(getOperation().getLoc())
             << "cannot rebuild the program of rank " << rank;
    program.clear_compile_fingerprint();
    program.clear_sha256();
    return writeProgram(rank, program);
  }

  // The module is not split: its one stage is the module itself, and the
  // program keeps its functions' own names.
  bool oneStage = false;
  // The mesh (cleave-place-ranks).
  MeshAttr mesh;
  int64_t dataRanks = 1, pipelineRanks = 1;
  // Tensor parallelism: the ranks of the tensor axis run the same program
  // but for their parameters' slices; the one being emitted.
  int64_t tensorRanks = 1, tensorRank = 0;

  /// The world rank at data coordinate `d` and pipeline coordinate `p`
  /// (and the tensor coordinate being emitted).
  int64_t rankAt(int64_t d, int64_t p) const {
    if (!mesh)
      return d;
    int64_t rank = mesh.withCoordinate(mesh.withCoordinate(0, kDataAxis, d),
                                       kPipelineAxis, p);
    return tensorRanks > 1 ? mesh.withCoordinate(rank, kTensorAxis, tensorRank)
                           : rank;
  }
  // Where each parameter's bytes are in params.bin (by name).
  ParamFile paramFile;

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

  LogicalResult emit() {
    ModuleOp module = getOperation();
    if (outputDir.empty())
      return module.emitError()
             << "cleave-emit-program needs output-dir=FOLDER";
    SmallVector<ModuleOp> stageModules;
    for (auto stage : module.getOps<ModuleOp>())
      if (stage->hasAttr("cleave.stage"))
        stageModules.push_back(stage);
    // A module that is not split is the one stage of a pipeline of one.
    oneStage = stageModules.empty();
    if (oneStage) {
      if (module.getOps<func::FuncOp>().empty())
        return module.emitError() << "cleave-emit-program: the module has no "
                                     "function to run";
      stageModules.push_back(module);
    }
    return emitPipeline(module, stageModules);
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
        paramFile[param.getSymName()] = {paramsOffset, bytes->size(),
                                         ::cleave::runtime::sha256Hex(*bytes)};
        paramsOffset += bytes->size();
      }
    params.close();
    if (!params)
      return mlir::emitError(top.getLoc()) << "writing '" << paramsPath << "' failed";
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Pipelines
  //===--------------------------------------------------------------------===//

  static func::FuncOp backwardOf(func::FuncOp forward) {
    auto name = forward->getAttrOfType<FlatSymbolRefAttr>("cleave.backward");
    return name ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(forward,
                                                                      name)
                : func::FuncOp();
  }

  /// One program per rank of the data x pipeline mesh.
  LogicalResult emitPipeline(ModuleOp top, ArrayRef<ModuleOp> stages) {
    auto info = top->getAttrOfType<DictionaryAttr>("cleave.pipeline");
    auto schedule = top->getAttrOfType<ArrayAttr>("cleave.schedule");
    if (!schedule || (!oneStage && !info))
      return mlir::emitError(top.getLoc())
             << "the module has no schedule; run cleave-pipeline-schedule "
                "first";
    mesh = lookupMesh(top);
    if (!oneStage && (!mesh || !mesh.getAxisSize(kPipelineAxis)))
      return mlir::emitError(top.getLoc())
             << "the pipeline has no cleave.mesh with a \"pipeline\" axis; "
                "run cleave-place-ranks first";
    pipelineRanks = mesh ? mesh.getAxisSize(kPipelineAxis).value_or(1) : 1;
    dataRanks = mesh ? mesh.getAxisSize(kDataAxis).value_or(1) : 1;
    tensorRanks = mesh ? mesh.getAxisSize(kTensorAxis).value_or(1) : 1;
    if (mesh && mesh.getNumRanks() != dataRanks * pipelineRanks * tensorRanks)
      return mlir::emitError(top.getLoc())
             << "the emitter knows data, pipeline and tensor parallelism "
                "only, but "
                "the mesh is "
             << mesh;
    int64_t s = stages.size();
    if (s % pipelineRanks != 0 ||
        (int64_t)schedule.size() != pipelineRanks ||
        (info && intFrom(info, "ranks") != pipelineRanks))
      return mlir::emitError(top.getLoc())
             << "cleave.schedule does not match the " << s
             << " stage module(s) on " << pipelineRanks << " pipeline rank(s)";
    if (microbatches < 1)
      return mlir::emitError(top.getLoc()) << "microbatches must be at least 1";
    for (ModuleOp m : stages)
      if (!m->getAttrOfType<DictionaryAttr>("cleave.memory"))
        return m.emitError() << (oneStage ? "the module has no memory plan; "
                                            "run cleave-memory-plan first"
                                          : "stage module has no memory plan; "
                                            "run cleave-memory-plan on each "
                                            "stage");
    // The plan analysis checks the batch (and, in cleave-check-memory-fit,
    // the memory) before anything is written, and gives the microbatch's
    // shape, from whichever stages read the model inputs (none in a
    // one-stage program of a model without token ids, such as an ONNX
    // node test).
    // Passes.td's PlanLayoutOptions, in PlanLayout's order.
    PlanLayout layout{dataDegree, placement, microbatches, globalBatch,
                      backend, ratesFile};
    FailureOr<const Plan *> plan = getAnalysis<PlanAnalysis>().getPlan(layout);
    if (failed(plan))
      return failure();
    if ((*plan)->microbatchSize < 1 && !oneStage)
      return mlir::emitError(top.getLoc())
             << "no stage reads the token ids: cleave-input-roles marks them "
                "cleave.role = \"tokens\"";
    if (failed(writeParamsFile(stages)))
      return failure();

    // Files are written (and their digests taken) rank by rank in this
    // order: data, then pipeline, then tensor coordinate; with shared
    // programs, data rank 0's once data rank 1's is known.
    int64_t samplesPerRank = (*plan)->microbatchSize * microbatches;
    bool sharing = dataRanks > 2;
    // Each rank's program is made on an arena whose first block is this
    // one, reused: a program of a large model has millions of messages,
    // which are then neither allocated nor freed one by one, and the
    // block's pages are touched once, not once per rank.
    std::vector<char> arenaBlock(size_t(64) << 20);
    google::protobuf::ArenaOptions arenaOptions;
    arenaOptions.initial_block = arenaBlock.data();
    arenaOptions.initial_block_size = arenaBlock.size();
    arenaOptions.max_block_size = 1 << 22;
    std::vector<Share> shares(pipelineRanks * tensorRanks);
    for (int64_t d = 0; d < dataRanks; ++d)
      for (int64_t p = 0; p < pipelineRanks; ++p)
        for (tensorRank = 0; tensorRank < tensorRanks; ++tensorRank) {
          Share &share = shares[p * tensorRanks + tensorRank];
          int64_t rank = rankAt(d, p);
          if (sharing && d > 1 && share.usable) {
            if (failed(writeShared(rank, share, d, samplesPerRank)))
              return failure();
            continue;
          }
          google::protobuf::Arena arena(arenaOptions);
          pb::Program &program =
              *google::protobuf::Arena::CreateMessage<pb::Program>(&arena);
          if (failed(emitPipelineRank(top, stages, schedule, d, p, **plan,
                                      program)))
            return failure();
          if (sharing && d == 0) {
            // The stage's base is tensor rank 0's program.
            int stageBase = tensorRank ? shares[p * tensorRanks].base : -1;
            if (stageBase < 0 ||
                !diffAgainst(bases[stageBase], program, share.header)) {
              FailureOr<int> base = addBase(std::move(program));
              if (failed(base))
                return failure();
              share.base = *base;
              share.header = ownHeader(bases[*base]);
            } else {
              share.base = stageBase;
            }
            makeShift(share);
            if (!share.usable &&
                failed(writeUnshared(rank, share.header, share.base)))
              return failure();
            continue;
          }
          if (sharing && d == 1 && share.usable) {
            pb::Program header;
            std::string expected, emitted;
            bool diffed = diffAgainst(bases[share.base], program, header);
            if (diffed && serializeProgram(header, emitted) &&
                serializeProgram(shiftedHeader(share, 1, samplesPerRank),
                                 expected) &&
                expected == emitted) {
              if (failed(writeShared(rankAt(0, p), share, 0,
                                     samplesPerRank)) ||
                  failed(writeShared(rank, share, 1, samplesPerRank)))
                return failure();
              continue;
            }
            share.usable = false;
            if (failed(writeUnshared(rankAt(0, p), share.header, share.base)))
              return failure();
            if (diffed) {
              // `program` was taken apart into `header`.
              if (failed(writeUnshared(rank, header, share.base)))
                return failure();
              continue;
            }
          }
          if (failed(writeProgram(rank, program)))
            return failure();
        }
    return writePlanFiles(top, **plan);
  }

  /// Names the function emitted last after its stage and role ("stage 1
  /// backward slot 0"); one stage keeps its function's own name.
  std::string nameLast(pb::Program &program, int64_t stage,
                       const std::string &role) {
    pb::Function *fn = program.mutable_functions(program.functions_size() - 1);
    if (!oneStage)
      fn->set_name("stage " + std::to_string(stage) + " " + role);
    return fn->name();
  }

  LogicalResult emitPipelineRank(ModuleOp top, ArrayRef<ModuleOp> stages,
                                 ArrayAttr schedule, int64_t d, int64_t p,
                                 const Plan &planned, pb::Program &result) {
    int64_t s = stages.size();
    int rank = int(rankAt(d, p));
    pb::Program &program = result;
    RankProgram out(program, mesh, rank, paramFile, seed);
    program.set_magic("cleave-program");
    program.set_device(device);
    program.set_version(pb::VERSION_CURRENT);
    if (auto file = top.getLoc().dyn_cast<FileLineColLoc>())
      program.set_model(file.getFilename().str());
    pb::Mesh *place = program.mutable_mesh();
    place->set_rank(rank);
    place->set_world_size(int(dataRanks * pipelineRanks * tensorRanks));
    place->set_data_degree(int(dataRanks));
    place->set_pipeline_degree(int(pipelineRanks));
    place->set_tensor_degree(int(tensorRanks));
    if (tensorRanks > 1)
      place->set_tensor_rank(int(tensorRank));
    place->set_data_rank(int(d));
    place->set_pipeline_rank(int(p));
    pb::Group *data = place->add_groups();
    data->set_name("data");
    for (int64_t dd = 0; dd < dataRanks; ++dd)
      data->add_ranks(rankAt(dd, p));
    // MiCS: the sharding group (consecutive data ranks) and the ranks at
    // the same place of every group.
    for (StringRef axis : {kShardedDataAxis, kDataReplicaAxis}) {
      if (!mesh || !mesh.getAxisSize(axis) ||
          mesh.getAxisSize(kDataAxis) == mesh.getAxisSize(axis))
        continue;
      pb::Group *group = place->add_groups();
      group->set_name(axis.str());
      int64_t base = mesh.withCoordinate(rank, axis, 0);
      for (int64_t c = 0; c < *mesh.getAxisSize(axis); ++c)
        group->add_ranks(mesh.withCoordinate(base, axis, c));
    }
    if (tensorRanks > 1) {
      pb::Group *tensor = place->add_groups();
      tensor->set_name(kTensorAxis.str());
      for (int64_t c = 0; c < tensorRanks; ++c)
        tensor->add_ranks(mesh.withCoordinate(rank, kTensorAxis, c));
    }
    if (!oneStage) {
      pb::Group *pipe = place->add_groups();
      pipe->set_name("pipeline");
      for (int64_t pp = 0; pp < pipelineRanks; ++pp)
        pipe->add_ranks(rankAt(d, pp));
    }

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
        lastMicrobatchSlots(out, stages, schedule[p].cast<DenseI64ArrayAttr>());
    SmallVector<int> optimizers;
    struct Optimizer {
      func::FuncOp func;
      int buffer;
      int64_t stage;
    };
    SmallVector<Optimizer> optimizerOf, refreshFuncs;
    pb::MemoryPlan *plan = program.mutable_memory();
    // The live peaks are the rank's (its stages along its schedule), not a
    // sum over stages as the arenas are.
    if (rank < (int)planned.ranks.size()) {
      plan->set_live_peak_bytes(planned.ranks[rank].memory.livePeakBytes);
      plan->set_host_live_peak_bytes(
          planned.ranks[rank].memory.hostLivePeakBytes);
    }
    for (int64_t st = p; st < s; st += pipelineRanks) {
      ModuleOp m = stages[st];
      auto memory = m->getAttrOfType<DictionaryAttr>("cleave.memory");
      int deviceBuffer = program.buffers_size();
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
      out.setBuffer(deviceBuffer, intFrom(memory, "slot_base"),
                    intFrom(memory, "slot_bytes"));
      // Offloaded activations: a host arena of the stage's own, after its
      // device arena.
      if (int64_t hostBytes = intFrom(memory, "host_arena_bytes")) {
        out.setHostBuffer(program.buffers_size(),
                          intFrom(memory, "host_slot_bytes"));
        pb::Buffer *hostArena = program.add_buffers();
        hostArena->set_space(pb::HOST);
        hostArena->set_size_bytes(hostBytes);
        hostArena->set_alignment(intFrom(memory, "alignment"));
        plan->set_host_activations(plan->host_activations() + hostBytes);
      }
      int64_t slots = std::max<int64_t>(1, intFrom(memory, "slots"));
      if (failed(out.addParameters(m)))
        return failure();
      SmallVector<func::FuncOp> forwards, optimizerFuncs;
      for (auto func : m.getOps<func::FuncOp>()) {
        pb::FunctionKind kind = kindOf(func);
        if (kind == pb::FORWARD)
          forwards.push_back(func);
        else if (kind == pb::OPTIMIZER)
          optimizerFuncs.push_back(func);
        else if (kind == pb::REFRESH)
          refreshFuncs.push_back({func, deviceBuffer, st});
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
        out.setSlot(k);
        std::string suffix = slots > 1 ? " slot " + std::to_string(k) : "";
        functionIndex[{st, false, k}] = program.functions_size();
        if (failed(out.emitFunction(forward)))
          return failure();
        nameLast(program, st, "forward" + suffix);
        if (backward) {
          functionIndex[{st, true, k}] = program.functions_size();
          int firstTensor = program.tensors_size();
          if (failed(out.emitFunction(backward)))
            return failure();
          std::string name = nameLast(program, st, "backward" + suffix);
          func::FuncOp copy = lastMicrobatchCopy(backward);
          if (copy && lastSlots.count({st, k})) {
            FailureOr<int> last = out.emitLastMicrobatchCopy(
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
        optimizerOf.push_back({opt, deviceBuffer, st});
    }
    // The rank's optimizer, after every chunk's parameters are known: it
    // may update those of all of them (cleave-merge-chunk-optimizers).
    if (optimizerOf.size() > 1)
      return optimizerOf[1].func.emitError()
             << "pipeline rank " << p << " holds " << optimizerOf.size()
             << " optimizers; run cleave-merge-chunk-optimizers";
    for (auto [opt, buffer, st] : optimizerOf) {
      out.setBuffer(buffer, 0, 0);
      optimizers.push_back(program.functions_size());
      if (failed(out.emitFunction(opt)))
        return failure();
      nameLast(program, st, "optimizer");
    }

    auto addStep = [&](int function, int64_t mb) {
      pb::Step *step = program.add_schedule();
      step->set_function(function);
      step->set_microbatch(mb);
    };
    // Each stage's working copies (ZeRO-1's split masters), first.
    for (auto [refresh, buffer, st] : refreshFuncs) {
      out.setBuffer(buffer, 0, 0);
      addStep(program.functions_size(), -1);
      if (failed(out.emitFunction(refresh)))
        return failure();
      nameLast(program, st, "refresh");
    }
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
    batch->set_microbatch_size(planned.microbatchSize);
    batch->set_microbatches(microbatches);
    batch->set_seq_len(planned.seqLen);
    batch->set_first_sample(d * planned.microbatchSize * microbatches);
    batch->set_global_batch(planned.globalBatch);
    if (planned.readParts > 1) {
      batch->set_read_parts(planned.readParts);
      batch->set_read_part(tensorRank);
    }

    return success();
  }

  /// The (stage, slot) of each backward step of the last microbatch in a
  /// rank's schedule; numbers the gradient events their copies start.
  std::set<std::pair<int64_t, int64_t>>
  lastMicrobatchSlots(RankProgram &out, ArrayRef<ModuleOp> stages,
                      DenseI64ArrayAttr schedule) {
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
          out.numberGradientEvents(func);
    }
    return slots;
  }

  /// plan.json (and with `report`, report.html): the plan analysis of the
  /// module, the one shape of every layout.
  LogicalResult writePlanFiles(ModuleOp top, const Plan &plan) {
    llvm::json::Value json = toJSON(plan);
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
