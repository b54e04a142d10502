//===- PadVocabulary.cpp - pad a vocabulary to the tensor degree ---------===//
//
// cleave-pad-vocabulary (Passes.td): a vocabulary that the tensor-parallel
// degree does not divide is padded with zero rows, as Megatron-LM does, so
// that propagation can split the embedding, the head and the loss over the
// vocabulary; a bias over the classes added to the head's logits
// (nn.Linear's) is padded with zeros alike. The padded classes are masked
// with -inf before the loss, so the padded model trains as the unpadded
// one.
//
//===----------------------------------------------------------------------===//

#include "ir/AttrNames.h"
#include "ir/CleaveOps.h"
#include "ir/DistributionOps.h"
#include "passes/Passes.h"
#include "passes/ValueOrigins.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_PADVOCABULARY
#include "passes/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// `type` with its last dimension `size`.
RankedTensorType withLastDim(Type type, int64_t size) {
  auto ranked = type.cast<RankedTensorType>();
  SmallVector<int64_t> shape(ranked.getShape());
  shape.back() = size;
  return RankedTensorType::get(shape, ranked.getElementType());
}

/// A scalar or all-ones-shaped operand: it broadcasts over the classes.
bool broadcastsOverClasses(Value v) {
  auto type = v.getType().dyn_cast<RankedTensorType>();
  return type && llvm::all_of(type.getShape(), [](int64_t d) { return d == 1; });
}

/// The ops from a head's product to its softmax cross-entropy, each of
/// which keeps the classes (size `vocab`) as its result's last dimension.
struct LogitsChain {
  SmallVector<Operation *> ops; // after the product, before the loss
  SoftmaxCrossEntropyOp loss;
  // Reads of a bias over the classes added on the way (nn.Linear's).
  SmallVector<GetParamOp> biases;
};

/// The read of a parameter `[vocab]`: a bias over the classes.
GetParamOp classBias(Value v, int64_t vocab) {
  auto read = v.getDefiningOp<GetParamOp>();
  auto type = v.getType().dyn_cast<RankedTensorType>();
  return read && type && type.getRank() == 1 && type.getDimSize(0) == vocab
             ? read
             : GetParamOp();
}

/// Follows `logits` (classes last, `vocab` of them) through ops that keep
/// the classes last to a softmax cross-entropy that reads them as its
/// classes; nullopt when it goes anywhere else (another user, an op that
/// moves or cuts the classes).
std::optional<LogitsChain> followLogits(Value logits, int64_t vocab) {
  LogitsChain chain;
  Value v = logits;
  for (int guard = 0; guard < 64; ++guard) {
    if (!v.hasOneUse())
      return std::nullopt;
    OpOperand &use = *v.getUses().begin();
    Operation *user = use.getOwner();
    if (auto loss = dyn_cast<SoftmaxCrossEntropyOp>(user)) {
      auto type = v.getType().cast<RankedTensorType>();
      if (use.getOperandNumber() != 0 || type.getRank() != 2)
        return std::nullopt;
      chain.loss = loss;
      return chain;
    }
    if (user->getNumResults() != 1)
      return std::nullopt;
    auto out = user->getResult(0).getType().dyn_cast<RankedTensorType>();
    if (!out || out.getRank() == 0 || out.getShape().back() != vocab)
      return std::nullopt;
    bool keeps = false;
    if (isa<ReshapeOp>(user))
      keeps = true; // the classes stay last and whole (sizes checked)
    else if (isa<CastOp, TanhOp, NegOp>(user))
      keeps = true;
    else if (GetParamOp bias;
             isa<AddOp>(user) &&
             (bias = classBias(user->getOperand(1 - use.getOperandNumber()),
                               vocab))) {
      // A bias over the classes, padded with the table.
      chain.biases.push_back(bias);
      keeps = true;
    } else if (isa<MulOp, AddOp, SubOp>(user) ||
             (isa<DivOp>(user) && use.getOperandNumber() == 0))
      // A scalar dividing by the logits would make the padded classes'
      // zeros infinite, and -inf + inf is NaN: only logits / scalar.
      keeps = broadcastsOverClasses(user->getOperand(1 - use.getOperandNumber()));
    else if (auto transpose = dyn_cast<TransposeOp>(user)) {
      ArrayRef<int64_t> perm = transpose.getPerm();
      keeps = !perm.empty() && perm.back() == int64_t(perm.size()) - 1;
    } else if (auto slice = dyn_cast<SliceOp>(user)) {
      keeps = slice.getStart().back() == 0 && slice.getLimit().back() == vocab &&
              slice.getStep().back() == 1;
    }
    if (!keeps)
      return std::nullopt;
    chain.ops.push_back(user);
    v = user->getResult(0);
  }
  return std::nullopt;
}

struct PadVocabulary
    : mlir::cleave::impl::PadVocabularyBase<PadVocabulary> {
  using PadVocabularyBase::PadVocabularyBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t degree = tensor;
    if (degree == 0)
      if (auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttr))
        degree = mesh.getAxisSize(kTensorAxis).value_or(1);
    if (degree < 0) {
      module.emitError() << "cleave-pad-vocabulary: tensor must be at least "
                            "1 (0: the mesh's), got "
                         << degree;
      return signalPassFailure();
    }
    if (degree <= 1)
      return;
    for (ParameterOp param :
         llvm::make_early_inc_range(module.getOps<ParameterOp>()))
      if (failed(padParameter(module, param, degree)))
        return signalPassFailure();
  }

  LogicalResult padParameter(ModuleOp module, ParameterOp param,
                             int64_t degree) {
    auto type = param.getType().cast<RankedTensorType>();
    if (type.getRank() != 2 || type.getDimSize(0) % degree == 0 ||
        param->hasAttr(kUnpaddedShapeAttr) || param->hasAttr(kFullTypeAttr))
      return success();
    int64_t vocab = type.getDimSize(0);
    int64_t padded = (vocab + degree - 1) / degree * degree;
    SmallVector<GetParamOp> reads;
    module.walk([&](GetParamOp read) {
      if (read.getName() == param.getSymName())
        reads.push_back(read);
    });
    // What reads the table: embeddings of the input ids and heads; an
    // other reader makes it no vocabulary this pass pads.
    SmallVector<EmbeddingOp> embeddings;
    SmallVector<std::pair<MatmulOp, LogitsChain>> heads;
    Operation *other = nullptr;
    for (GetParamOp read : reads)
      for (OpOperand &use : read.getResult().getUses()) {
        Operation *user = use.getOwner();
        if (auto embedding = dyn_cast<EmbeddingOp>(user);
            embedding && use.getOperandNumber() == 0 &&
            isModelInput(embedding.getIds())) {
          embeddings.push_back(embedding);
          continue;
        }
        if (auto mm = dyn_cast<MatmulOp>(user);
            mm && use.getOperandNumber() == 1 && mm.getTransposeRhs() &&
            !mm.getTransposeLhs()) {
          if (std::optional<LogitsChain> chain =
                  followLogits(mm.getResult(), vocab)) {
            heads.push_back({mm, std::move(*chain)});
            continue;
          }
        }
        other = user;
      }
    if (embeddings.empty() && heads.empty())
      return success();
    std::string name = param.getSymName().str();
    // A bias over the classes is padded with the table, when the heads'
    // adds are all that read it.
    SmallVector<ParameterOp> biases;
    for (auto &[mm, chain] : heads)
      for (GetParamOp read : chain.biases) {
        ParameterOp bias = lookupParameter(read, read.getNameAttr());
        if (!bias || llvm::is_contained(biases, bias))
          continue;
        biases.push_back(bias);
        if (!other && !onlyAddedTo(module, bias, heads)) {
          param.emitRemark()
              << "vocabulary '" << name << "' of " << vocab
              << " rows not padded to " << padded << " for tensor=" << degree
              << ": its bias '" << bias.getSymName()
              << "' is read other than added to its logits; they stay "
                 "replicated";
          return success();
        }
      }
    if (other) {
      param.emitRemark() << "vocabulary '" << name << "' of " << vocab
                         << " rows not padded to " << padded
                         << " for tensor=" << degree << ": "
                         << other->getName()
                         << " reads it other than as an embedding of the "
                            "input ids or a head whose logits reach the "
                            "loss; it stays replicated";
      return success();
    }

    auto paddedType = RankedTensorType::get({padded, type.getDimSize(1)},
                                            type.getElementType());
    OpBuilder b(param);
    param->setAttr(kUnpaddedShapeAttr, b.getDenseI64ArrayAttr(type.getShape()));
    param.setType(paddedType);
    for (GetParamOp read : reads)
      read.getResult().setType(paddedType);
    for (auto &[mm, chain] : heads) {
      mm.getResult().setType(withLastDim(mm.getType(), padded));
      for (Operation *op : chain.ops) {
        op->getResult(0).setType(withLastDim(op->getResult(0).getType(), padded));
        if (auto slice = dyn_cast<SliceOp>(op)) {
          SmallVector<int64_t> limit(slice.getLimit());
          limit.back() = padded;
          slice.setLimit(limit);
        }
      }
      // The padded classes take no probability: -inf before the loss.
      SoftmaxCrossEntropyOp loss = chain.loss;
      Value logits = loss.getInput();
      auto logitsType = logits.getType().cast<RankedTensorType>();
      Type element = logitsType.getElementType();
      auto maskType = RankedTensorType::get({padded}, element);
      SmallVector<APFloat> mask;
      const llvm::fltSemantics &sem =
          element.cast<FloatType>().getFloatSemantics();
      for (int64_t c = 0; c < padded; ++c)
        mask.push_back(c < vocab ? APFloat::getZero(sem)
                                 : APFloat::getInf(sem, /*Negative=*/true));
      b.setInsertionPoint(loss);
      Value maskValue = b.create<ConstantOp>(
          loss.getLoc(), DenseElementsAttr::get(maskType, mask));
      Value masked =
          b.create<AddOp>(loss.getLoc(), logitsType, logits, maskValue);
      loss->setOperand(0, masked);
    }
    for (ParameterOp bias : biases) {
      auto biasType = bias.getType().cast<RankedTensorType>();
      auto paddedBias = RankedTensorType::get({padded}, biasType.getElementType());
      bias->setAttr(kUnpaddedShapeAttr,
                    b.getDenseI64ArrayAttr(biasType.getShape()));
      bias.setType(paddedBias);
      module.walk([&](GetParamOp read) {
        if (read.getName() == bias.getSymName())
          read.getResult().setType(paddedBias);
      });
    }
    param.emitRemark() << "vocabulary '" << name << "' of " << vocab
                       << " rows padded to " << padded << " for tensor="
                       << degree << " (" << padded - vocab
                       << " zero rows, masked before the loss)"
                       << (biases.empty() ? "" : ", with its bias");
    return success();
  }

  /// Whether every read of `bias` is an operand of an add in one of the
  /// heads' logits chains.
  static bool
  onlyAddedTo(ModuleOp module, ParameterOp bias,
              ArrayRef<std::pair<MatmulOp, LogitsChain>> heads) {
    bool only = true;
    module.walk([&](GetParamOp read) {
      if (read.getName() != bias.getSymName())
        return;
      bool inChain = llvm::any_of(heads, [&](const auto &head) {
        return llvm::is_contained(head.second.biases, read);
      });
      // Each of its users must be one of those adds.
      for (Operation *user : read.getResult().getUsers())
        inChain &= llvm::any_of(heads, [&](const auto &head) {
          return llvm::is_contained(head.second.ops, user);
        });
      only &= inChain;
    });
    return only;
  }
};

} // namespace
