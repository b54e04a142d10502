//===- Passes.td - every Cleave pass -----------------------*- tablegen -*-===//
//
// One declaration per pass, with its options and a description that
// `cleave-opt --help` shows.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_TD
#define CLEAVE_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyImported : Pass<"cleave-verify-imported", "ModuleOp"> {
  let summary = "checks the contract of the import phase";
  let description = [{
    After import, a module holds `cleave.parameter` symbols and one or more
    `func.func` whose ops are all cleave or func ops over statically shaped
    tensors, each located by the ONNX node it came from. Later phases rely
    on that; this pass says which op breaks it.

    ```mlir
    // Passes:
    func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
      %0 = cleave.exp %x : tensor<2x8xf32> loc("/Exp")
      return %0 : tensor<2x8xf32>
    }
    // Fails: "tensor<?x8xf32> is not statically shaped"
    ```
  }];
  let options = [
    Option<"requireNames", "require-names", "bool", /*default=*/"false",
           "require every cleave op to carry an ONNX node name location">,
  ];
}

#endif // CLEAVE_PASSES_TD
