//===- DistributionAttrs.cpp - mesh, sharding and the attribute verifier --===//
//
// The syntax and checks of `#cleave.mesh` and `#cleave.sharding`, the
// checks that tie a sharding to a type and the module's mesh (one place,
// taking an emit-error callback, as openxla/shardy's verifiers.cc), and
// the dialect's verifier of discardable `cleave.*` attributes.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// #cleave.mesh
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseAxis) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<MeshAttr>(parser.getContext(),
                                     ArrayRef<StringAttr>(names),
                                     ArrayRef<int64_t>(sizes));
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(llvm::zip(getAxisNames(), getAxisSizes()), printer,
                        [&](auto axis) {
                          printer << std::get<0>(axis) << "="
                                  << std::get<1>(axis);
                        });
  printer << "]>";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axisNames,
                               ArrayRef<int64_t> axisSizes) {
  if (axisNames.size() != axisSizes.size())
    return emitError() << "a mesh needs one size per axis";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(axisNames, axisSizes)) {
    if (name.getValue().empty())
      return emitError() << "a mesh axis needs a name";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis \"" << name.getValue()
                         << "\" is declared twice";
    if (size < 1)
      return emitError() << "mesh axis \"" << name.getValue()
                         << "\" must have at least 1 rank, got " << size;
  }
  // The split data axis of MiCS: the two halves adjacent, replica first,
  // so that together they are one axis "data".
  auto position = [&](StringRef axis) -> int64_t {
    for (auto [i, name] : llvm::enumerate(axisNames))
      if (name.getValue() == axis)
        return int64_t(i);
    return -1;
  };
  int64_t replica = position(kDataReplicaAxis);
  if (replica >= 0 && (position(kDataAxis) >= 0 ||
                       position(kShardedDataAxis) != replica + 1))
    return emitError() << "mesh axis \"" << kDataReplicaAxis
                       << "\" splits the data axis: it is followed by \""
                       << kShardedDataAxis << "\" and the mesh has no \""
                       << kDataAxis << "\"";
  return success();
}

/// The size of an axis the mesh declares, or nullopt.
static std::optional<int64_t> declaredSize(MeshAttr mesh, StringRef axis) {
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
    if (name.getValue() == axis)
      return size;
  return std::nullopt;
}

/// A mesh split for MiCS has "data_replica" and "sharded_data" side by
/// side and no "data": "data" is then the two together, replica major, so
/// that every pass that splits the batch over "data" or averages over it
/// still means all data-parallel ranks.
static bool dataIsSplit(MeshAttr mesh) {
  return !declaredSize(mesh, kDataAxis) &&
         declaredSize(mesh, kDataReplicaAxis) &&
         declaredSize(mesh, kShardedDataAxis);
}

std::optional<int64_t> MeshAttr::getAxisSize(StringRef axis) const {
  if (axis == kDataAxis && dataIsSplit(*this))
    return *declaredSize(*this, kDataReplicaAxis) *
           *declaredSize(*this, kShardedDataAxis);
  return declaredSize(*this, axis);
}

int64_t MeshAttr::getNumRanks() const {
  int64_t n = 1;
  for (int64_t size : getAxisSizes())
    n *= size;
  return n;
}

/// The number of ranks between two neighbours on `axis`: the product of the
/// sizes of the axes after it (the first axis varies slowest).
static int64_t strideOf(MeshAttr mesh, StringRef axis) {
  if (axis == kDataAxis && dataIsSplit(mesh))
    axis = kShardedDataAxis;
  int64_t stride = 1;
  for (size_t i = mesh.getAxisNames().size(); i-- > 0;) {
    if (mesh.getAxisNames()[i].getValue() == axis)
      return stride;
    stride *= mesh.getAxisSizes()[i];
  }
  return 0;
}

int64_t MeshAttr::getCoordinate(int64_t rank, StringRef axis) const {
  std::optional<int64_t> size = getAxisSize(axis);
  return size ? rank / strideOf(*this, axis) % *size : 0;
}

int64_t MeshAttr::withCoordinate(int64_t rank, StringRef axis,
                                 int64_t coordinate) const {
  return rank + (coordinate - getCoordinate(rank, axis)) * strideOf(*this, axis);
}

//===----------------------------------------------------------------------===//
// #cleave.sharding
//===----------------------------------------------------------------------===//

static ParseResult parseAxisList(AsmParser &parser,
                                 AsmParser::Delimiter delimiter,
                                 SmallVectorImpl<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(delimiter, [&]() -> ParseResult {
    std::string axis;
    if (parser.parseString(&axis))
      return failure();
    axes.push_back(parser.getBuilder().getStringAttr(axis));
    return success();
  });
}

/// One entry of a dimension's axes: `"tensor"` or `"tensor":(2)4`.
static ParseResult parseAxisRef(AsmParser &parser,
                                SmallVectorImpl<Attribute> &axes) {
  std::string axis;
  if (parser.parseString(&axis))
    return failure();
  AxisRef ref{axis};
  std::string name = axis;
  if (succeeded(parser.parseOptionalColon())) {
    if (parser.parseLParen() || parser.parseInteger(ref.preSize) ||
        parser.parseRParen() || parser.parseInteger(ref.size))
      return failure();
    if (ref.size < 1 || ref.preSize < 1)
      return parser.emitError(parser.getCurrentLocation(),
                              "a sub-axis has a pre-size and a size of at "
                              "least 1");
  }
  ref.name = name;
  axes.push_back(
      ShardingAttr::getAxisRefAttr(parser.getContext(), ref));
  return success();
}

Attribute ShardingAttr::getAxisRefAttr(MLIRContext *ctx, const AxisRef &ref) {
  Builder b(ctx);
  if (ref.isWhole())
    return b.getStringAttr(ref.name);
  return b.getArrayAttr({b.getStringAttr(ref.name),
                         b.getI64IntegerAttr(ref.preSize),
                         b.getI64IntegerAttr(ref.size)});
}

/// The AxisRef an element of a dimension's axes stands for, or nullopt
/// when it is neither a name nor [name, pre-size, size].
static std::optional<AxisRef> axisRefOf(Attribute a) {
  if (auto name = a.dyn_cast<StringAttr>())
    return AxisRef{name.getValue()};
  auto parts = a.dyn_cast<ArrayAttr>();
  if (!parts || parts.size() != 3)
    return std::nullopt;
  auto name = parts[0].dyn_cast<StringAttr>();
  auto pre = parts[1].dyn_cast<IntegerAttr>();
  auto size = parts[2].dyn_cast<IntegerAttr>();
  if (!name || !pre || !size)
    return std::nullopt;
  return AxisRef{name.getValue(), pre.getInt(), size.getInt()};
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SmallVector<ArrayAttr> dims;
  SmallVector<StringAttr> partial;
  SmallVector<int64_t> blocks;
  auto parseDim = [&]() -> ParseResult {
    int64_t n = 1;
    OptionalParseResult count = parser.parseOptionalInteger(n);
    if (count.has_value() &&
        (failed(*count) || parser.parseKeyword("blocks")))
      return failure();
    blocks.push_back(n);
    SmallVector<Attribute> axes;
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&] {
          return parseAxisRef(parser, axes);
        }))
      return failure();
    dims.push_back(parser.getBuilder().getArrayAttr(axes));
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return {};
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("partial") || parser.parseEqual() ||
       parseAxisList(parser, AsmParser::Delimiter::Square, partial)))
    return {};
  if (parser.parseGreater())
    return {};
  if (llvm::all_of(blocks, [](int64_t n) { return n == 1; }))
    blocks.clear();
  return parser.getChecked<ShardingAttr>(
      parser.getContext(), ArrayRef<ArrayAttr>(dims),
      ArrayRef<StringAttr>(partial), ArrayRef<int64_t>(blocks));
}

static void printAxes(AsmPrinter &printer, ArrayRef<StringAttr> axes) {
  llvm::interleaveComma(axes, printer, [&](StringAttr a) { printer << a; });
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(llvm::seq<unsigned>(0, getDims().size()), printer,
                        [&](unsigned d) {
                          if (getDimBlocks(d) != 1)
                            printer << getDimBlocks(d) << " blocks ";
                          printer << "{";
                          llvm::interleaveComma(
                              getDimAxisRefs(d), printer, [&](AxisRef ref) {
                                printer << "\"" << ref.name << "\"";
                                if (!ref.isWhole())
                                  printer << ":(" << ref.preSize << ")"
                                          << ref.size;
                              });
                          printer << "}";
                        });
  printer << "]";
  if (!getPartial().empty()) {
    printer << ", partial = [";
    printAxes(printer, getPartial());
    printer << "]";
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<ArrayAttr> dims,
                                   ArrayRef<StringAttr> partial,
                                   ArrayRef<int64_t> blocks) {
  // A sub-axis may share its axis with other sub-axes that do not overlap;
  // a whole axis is used once.
  llvm::StringMap<SmallVector<AxisRef>> used;
  auto overlap = [](const AxisRef &a, const AxisRef &b) {
    if (a.isWhole() || b.isWhole())
      return true;
    return a.preSize < b.preSize * b.size && b.preSize < a.preSize * a.size;
  };
  auto use = [&](Attribute a) -> LogicalResult {
    std::optional<AxisRef> ref = axisRefOf(a);
    if (!ref || ref->name.empty())
      return emitError() << "a sharding names mesh axes by non-empty strings "
                            "or sub-axes [name, pre-size, size]";
    if (!ref->isWhole() && (ref->preSize < 1 || ref->size < 1))
      return emitError() << "sub-axis of \"" << ref->name
                         << "\" needs a pre-size and a size of at least 1";
    for (const AxisRef &other : used[ref->name])
      if (overlap(*ref, other))
        return emitError() << "mesh axis \"" << ref->name
                           << "\" is used twice in one sharding; an axis "
                              "splits one dimension or makes the value "
                              "partial, once";
    used[ref->name].push_back(*ref);
    return success();
  };
  for (ArrayAttr dim : dims)
    for (Attribute a : dim)
      if (failed(use(a)))
        return failure();
  for (StringAttr a : partial)
    if (failed(use(a)))
      return failure();
  if (!blocks.empty() && blocks.size() != dims.size())
    return emitError() << "a sharding's blocks have one entry per dimension, "
                          "got "
                       << blocks.size() << " for " << dims.size();
  for (auto [d, n] : llvm::enumerate(blocks)) {
    if (n < 1)
      return emitError() << "dimension " << d
                         << " needs at least 1 block, got " << n;
    if (n > 1 && dims[d].empty())
      return emitError() << "dimension " << d << " has " << n
                         << " blocks but no axes splitting them";
  }
  return success();
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  return llvm::to_vector(llvm::map_range(
      getDimAxisRefs(dim), [](const AxisRef &ref) { return ref.name; }));
}

SmallVector<AxisRef> ShardingAttr::getDimAxisRefs(unsigned dim) const {
  SmallVector<AxisRef> refs;
  for (Attribute a : getDims()[dim])
    if (std::optional<AxisRef> ref = axisRefOf(a))
      refs.push_back(*ref);
  return refs;
}

int64_t ShardingAttr::getDimBlocks(unsigned dim) const {
  return getBlocks().empty() ? 1 : getBlocks()[dim];
}

bool ShardingAttr::isReplicated() const {
  return getPartial().empty() &&
         llvm::all_of(getDims(), [](ArrayAttr d) { return d.empty(); });
}

//===----------------------------------------------------------------------===//
// Checks against the mesh
//===----------------------------------------------------------------------===//

MeshAttr mlir::cleave::lookupMesh(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto mesh = op->getAttrOfType<MeshAttr>(kMeshAttr))
      return mesh;
  return {};
}

ParameterOp mlir::cleave::lookupParameter(Operation *user,
                                          FlatSymbolRefAttr name) {
  if (auto param = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(user, name))
    return param;
  auto stage = user->getParentOfType<ModuleOp>();
  auto k = stage ? stage->getAttrOfType<IntegerAttr>(kStageAttr) : IntegerAttr();
  auto top = stage ? stage->getParentOfType<ModuleOp>() : ModuleOp();
  MeshAttr mesh = top ? lookupMesh(top) : MeshAttr();
  std::optional<int64_t> ranks =
      mesh ? mesh.getAxisSize(kPipelineAxis) : std::nullopt;
  if (!k || !ranks)
    return {};
  for (auto other : top.getOps<ModuleOp>()) {
    auto j = other->getAttrOfType<IntegerAttr>(kStageAttr);
    if (!j || other == stage || j.getInt() % *ranks != k.getInt() % *ranks)
      continue;
    if (auto param = dyn_cast_or_null<ParameterOp>(
            SymbolTable::lookupSymbolIn(other, name.getAttr())))
      return param;
  }
  return {};
}

std::optional<StateShards> mlir::cleave::stateShards(ParameterOp param) {
  auto axis = param->getAttrOfType<StringAttr>(kStateAxisAttr);
  MeshAttr mesh = axis ? lookupMesh(param) : MeshAttr();
  std::optional<int64_t> ranks =
      mesh ? mesh.getAxisSize(axis.getValue()) : std::nullopt;
  auto type = param.getType().dyn_cast<RankedTensorType>();
  if (!ranks || *ranks < 1 || !type || !type.hasStaticShape())
    return std::nullopt;
  StateShards shards;
  shards.axis = axis.getValue();
  shards.ranks = *ranks;
  shards.elements = type.getNumElements();
  // A working copy's chunks, in its narrower type, start aligned too.
  int64_t bits =
      std::min(type.getElementType().getIntOrFloatBitWidth(),
               readType(param).getElementType().getIntOrFloatBitWidth());
  int64_t perAlignment =
      std::max<int64_t>(1, kStateChunkAlignment * 8 / std::max<int64_t>(bits, 8));
  int64_t chunk = (shards.elements + *ranks - 1) / *ranks;
  shards.chunk = (chunk + perAlignment - 1) / perAlignment * perAlignment;
  return shards;
}

RankedTensorType mlir::cleave::chunkType(ParameterOp param,
                                         const StateShards &shards) {
  return RankedTensorType::get(
      {shards.chunk},
      param.getType().cast<RankedTensorType>().getElementType());
}

RankedTensorType mlir::cleave::readType(ParameterOp param) {
  auto type = param.getType().cast<RankedTensorType>();
  if (auto working = param->getAttrOfType<TypeAttr>(kWorkingTypeAttr))
    return type.clone(working.getValue()).cast<RankedTensorType>();
  return type;
}

SmallVector<ModuleOp> mlir::cleave::rankModules(ModuleOp module) {
  auto k = module->getAttrOfType<IntegerAttr>(kStageAttr);
  auto top = module->getParentOfType<ModuleOp>();
  MeshAttr mesh = top ? lookupMesh(top) : MeshAttr();
  std::optional<int64_t> ranks =
      mesh ? mesh.getAxisSize(kPipelineAxis) : std::nullopt;
  if (!k || !ranks)
    return {module};
  std::map<int64_t, ModuleOp> byStage;
  for (auto other : top.getOps<ModuleOp>())
    if (auto j = other->getAttrOfType<IntegerAttr>(kStageAttr))
      if (j.getInt() % *ranks == k.getInt() % *ranks)
        byStage[j.getInt()] = other;
  SmallVector<ModuleOp> modules;
  for (auto &[j, other] : byStage)
    modules.push_back(other);
  return modules;
}

FailureOr<int64_t>
mlir::cleave::groupSize(ArrayRef<StringRef> axes, MeshAttr mesh,
                        function_ref<InFlightDiagnostic()> emitError) {
  if (axes.empty()) {
    emitError() << "needs at least one mesh axis for its group";
    return failure();
  }
  int64_t n = 1;
  llvm::StringSet<> seen;
  for (StringRef axis : axes) {
    std::optional<int64_t> size = mesh.getAxisSize(axis);
    if (!size) {
      emitError() << "mesh axis \"" << axis << "\" is not in the mesh "
                  << mesh;
      return failure();
    }
    if (!seen.insert(axis).second) {
      emitError() << "mesh axis \"" << axis << "\" is named twice";
      return failure();
    }
    n *= *size;
  }
  return n;
}

LogicalResult
mlir::cleave::verifySharding(ShardingAttr sharding, Type type, MeshAttr mesh,
                             function_ref<InFlightDiagnostic()> emitError) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  if (!tensor)
    return emitError() << "a sharding applies to a ranked tensor, not "
                       << type;
  if (!mesh)
    return emitError() << "a sharding needs a cleave.mesh on an enclosing "
                          "module to name its axes";
  if (int64_t(sharding.getDims().size()) != tensor.getRank())
    return emitError() << "sharding " << sharding << " has "
                       << sharding.getDims().size()
                       << " dimensions, the value " << tensor << " has "
                       << tensor.getRank();
  for (auto [dim, axes] : llvm::enumerate(sharding.getDims())) {
    if (axes.empty())
      continue;
    int64_t n = 1;
    for (const AxisRef &ref : sharding.getDimAxisRefs(dim)) {
      std::optional<int64_t> size = mesh.getAxisSize(ref.name);
      if (!size)
        return emitError() << "mesh axis \"" << ref.name
                           << "\" is not in the mesh " << mesh;
      if (!ref.isWhole() && *size % (ref.preSize * ref.size) != 0)
        return emitError() << "sub-axis \"" << ref.name << "\":("
                           << ref.preSize << ")" << ref.size
                           << " does not divide the axis's " << *size
                           << " ranks";
      n *= ref.isWhole() ? *size : ref.size;
    }
    n *= sharding.getDimBlocks(dim);
    if (tensor.getDimSize(dim) % n != 0)
      return emitError() << "dimension " << dim << " of " << tensor
                         << " (size " << tensor.getDimSize(dim)
                         << ") is not divisible by the " << n
                         << (sharding.getDimBlocks(dim) != 1
                                 ? " pieces of its blocks and mesh axes"
                                 : " ranks of its mesh axes");
  }
  for (StringAttr axis : sharding.getPartial())
    if (!mesh.getAxisSize(axis.getValue()))
      return emitError() << "partial-sum axis \"" << axis.getValue()
                         << "\" is not in the mesh " << mesh;
  return success();
}

//===----------------------------------------------------------------------===//
// The dialect's attribute verifier
//===----------------------------------------------------------------------===//

/// Checks a discardable `cleave.*` attribute on whatever it is attached to:
/// its name is declared, its value has the right kind, and a sharding fits
/// `type` (null when the attribute is not on one value) and the mesh.
static LogicalResult verifyCleaveAttr(Operation *op, NamedAttribute attr,
                                      Type type, StringRef where) {
  StringRef name = attr.getName().getValue();
  auto emitError = [&]() {
    return op->emitOpError() << "attribute '" << name << "'" << where << ": ";
  };
  if (!llvm::is_contained(kKnownAttrNames, name))
    return op->emitOpError()
           << "unknown attribute '" << name
           << "'; the cleave.* attribute names are declared in ir/AttrNames.h";
  if (name == kMeshAttr) {
    if (!attr.getValue().isa<MeshAttr>())
      return emitError() << "expected a #cleave.mesh";
    if (!isa<ModuleOp>(op))
      return emitError() << "a mesh is declared on a module";
    return success();
  }
  if (name == kShardingAttr) {
    auto sharding = attr.getValue().dyn_cast<ShardingAttr>();
    if (!sharding)
      return emitError() << "expected a #cleave.sharding";
    if (!type)
      return emitError() << "a sharding belongs to one value: a parameter, "
                            "a function argument or result, or an op with "
                            "one result";
    return verifySharding(sharding, type, lookupMesh(op), emitError);
  }
  if (name == kFullTypeAttr) {
    auto full = attr.getValue().dyn_cast<TypeAttr>();
    auto fullType =
        full ? full.getValue().dyn_cast<RankedTensorType>() : RankedTensorType();
    auto local = type ? type.dyn_cast<RankedTensorType>() : RankedTensorType();
    if (!fullType || !isa<ParameterOp>(op))
      return emitError() << "expected the full tensor type, on a "
                            "cleave.parameter";
    if (!local || local.getRank() != fullType.getRank() ||
        local.getElementType() != fullType.getElementType())
      return emitError() << "the full type " << fullType
                         << " and the parameter's local type " << type
                         << " differ in rank or element type";
    for (auto [l, f] : llvm::zip(local.getShape(), fullType.getShape()))
      if (l < 1 || f % l != 0)
        return emitError() << "the parameter's local type " << type
                           << " is not a slice of its full type " << fullType
                           << " split evenly";
    return success();
  }
  if (name == kLastMicrobatchAttr || name == kLastMicrobatchOfAttr) {
    if (!attr.getValue().isa<FlatSymbolRefAttr>() ||
        !isa<FunctionOpInterface>(op))
      return emitError() << "expected a function's symbol, on a function";
    return success();
  }
  if (name == kStateAxisAttr) {
    auto axis = attr.getValue().dyn_cast<StringAttr>();
    if (!axis || !isa<ParameterOp>(op))
      return emitError() << "expected the name of a mesh axis, on a "
                            "cleave.parameter";
    MeshAttr mesh = lookupMesh(op);
    if (!mesh || !mesh.getAxisSize(axis.getValue()))
      return emitError() << "\"" << axis.getValue()
                         << "\" is not an axis of the enclosing mesh";
    return success();
  }
  if (name == kParamAxisAttr) {
    auto axis = attr.getValue().dyn_cast<StringAttr>();
    auto state = op->getAttrOfType<StringAttr>(kStateAxisAttr);
    if (!axis || !isa<ParameterOp>(op))
      return emitError() << "expected the name of a mesh axis, on a "
                            "cleave.parameter";
    if (state != axis)
      return emitError() << "a sharded parameter's chunks are its optimizer "
                            "state's: expected cleave.state_axis = \""
                         << axis.getValue() << "\" beside it";
    return success();
  }
  if (name == kWorkingTypeAttr) {
    auto element = attr.getValue().dyn_cast<TypeAttr>();
    auto param = dyn_cast<ParameterOp>(op);
    if (!element || !param)
      return emitError() << "expected an element type, on a cleave.parameter";
    auto low = element.getValue().dyn_cast<FloatType>();
    auto master = param.getType().cast<RankedTensorType>().getElementType();
    if (!low || !master.isF32() || low.getWidth() != 16)
      return emitError() << "a working copy is a 16-bit float copy of an f32 "
                            "parameter; got "
                         << element.getValue() << " for " << param.getType();
    if (!op->hasAttr(kStateAxisAttr) || op->hasAttr(kParamAxisAttr))
      return emitError() << "a working copy belongs to a parameter whose "
                            "optimizer state is split (cleave.state_axis) "
                            "and which is not sharded (cleave.param_axis)";
    return success();
  }
  if (name == kReadPartsAttr) {
    auto parts = attr.getValue().dyn_cast<IntegerAttr>();
    auto tensor = type ? type.dyn_cast<RankedTensorType>() : nullptr;
    if (!parts || parts.getInt() < 2 || !tensor || tensor.getRank() != 2 ||
        !tensor.getElementType().isa<IntegerType>())
      return emitError() << "expected the number of parts (2 or more) a "
                            "microbatch is read in, on a [batch, seq] "
                            "token-ids or targets argument";
    MeshAttr mesh = lookupMesh(op);
    std::optional<int64_t> tensorRanks =
        mesh ? mesh.getAxisSize(kTensorAxis) : std::nullopt;
    if (!tensorRanks || *tensorRanks != parts.getInt())
      return emitError() << "a microbatch is read in one part per rank of "
                            "the mesh's \"tensor\" axis";
    return success();
  }
  if (name == kGatherPerHostAttr) {
    auto k = attr.getValue().dyn_cast<IntegerAttr>();
    if (!k || k.getInt() < 2 || !isa<GatherParamOp>(op))
      return emitError() << "expected the ranks of the group on one host "
                            "(2 or more), on a cleave.gather_param";
    return success();
  }
  if (name == kMemorySpaceAttr) {
    if (!attr.getValue().isa<MemorySpaceAttr>())
      return emitError() << "expected a #cleave.memory_space";
    if (!type)
      return emitError() << "a memory space belongs to one value: a "
                            "parameter, a function argument or result, or "
                            "an op with one result";
  }
  return success();
}

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  Type type;
  if (auto param = dyn_cast<ParameterOp>(op)) {
    type = param.getType();
    // A partitioned parameter's sharding is its full tensor's.
    auto full = op->getAttrOfType<TypeAttr>(kFullTypeAttr);
    if (attr.getName() == kShardingAttr && full)
      type = full.getValue();
  } else if (op->getNumResults() == 1) {
    type = op->getResult(0).getType();
  }
  return verifyCleaveAttr(op, attr, type, "");
}

LogicalResult CleaveDialect::verifyRegionArgAttribute(Operation *op,
                                                      unsigned region,
                                                      unsigned index,
                                                      NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getArgumentTypes()[index];
  return verifyCleaveAttr(op, attr, type,
                          (" of argument " + Twine(index)).str());
}

LogicalResult CleaveDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned region,
                                                         unsigned index,
                                                         NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getResultTypes()[index];
  return verifyCleaveAttr(op, attr, type, (" of result " + Twine(index)).str());
}
