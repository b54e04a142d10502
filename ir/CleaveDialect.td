//===- CleaveDialect.td - the cleave dialect ---------------*- tablegen -*-===//
//
// The dialect every Cleave pass reads and writes: tensor operations at the
// granularity a training compiler splits and fuses (matmul, norms, softmax,
// attention, embedding lookup, softmax-cross-entropy), plus the parameters.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_TD
#define CLEAVE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::mlir::cleave";
  let summary = "Tensor operations and parameters of a model being trained";
  let description = [{
    The cleave dialect holds a model as the ONNX frontend imports it: one
    `func.func` over statically shaped tensors whose operations are the ops
    below, and one `cleave.parameter` symbol per trainable weight.

    Ops are chosen at the granularity later passes need. Matrix products,
    norms, softmax, attention, embedding lookup and softmax-cross-entropy are
    single ops so that tensor-parallel splitting can shard them and a backend
    can fuse them; everything else is elementwise, reduction or data movement.
    Every op carries the ONNX node name it came from as its location
    (`loc("/h.0/attn/MatMul")`), so diagnostics of every pass name it.

    Distribution is IR too (docs/distribution-ir.md): a `#cleave.mesh` on
    the module names the device axes, `#cleave.sharding` says how a value
    is split over them and which of them it is a partial sum over,
    `#cleave.memory_space` where it lives, and collectives
    (`cleave.all_gather`, `cleave.reduce_scatter`, `cleave.send`, ...) move
    values between ranks. The ops above do not assume a single device.
    Every discardable `cleave.*` attribute name is declared once
    (ir/AttrNames.h) and checked by the dialect's attribute verifier.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
    void registerDistributionOps();
  }];
}

class Cleave_Op<string mnemonic, list<Trait> traits = []>
    : Op<Cleave_Dialect, mnemonic, traits>;

#endif // CLEAVE_DIALECT_TD
