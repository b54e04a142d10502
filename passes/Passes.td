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

def Fuse : Pass<"cleave-fuse", "ModuleOp"> {
  let summary = "raises exported op chains to fused ops (attention, rotary, rms_norm, gelu, silu)";
  let description = [{
    `torch.onnx.export` spells RMSNorm, GELU (exact and tanh) and SiLU as
    chains of elementwise ops, rotary embeddings (rotate-half) as slices, a
    negation, a concat and products, and attention as two products around a
    softmax (a constant causal mask becomes `causal`; another mask is kept).
    This pass replaces each such chain with the
    dialect's op, which a backend runs as one fused kernel and later passes
    treat as a unit. Chains are matched exactly (constants included); a
    chain that differs in any way is left as it is.

    ```mlir
    // Before:
    %s = cleave.sigmoid %x : tensor<2x8x192xf32>
    %y = cleave.mul %x, %s : (tensor<2x8x192xf32>, tensor<2x8x192xf32>) -> tensor<2x8x192xf32>
    // After:
    %y = cleave.silu %x : tensor<2x8x192xf32>
    ```
  }];
}

def MemoryPlan : Pass<"cleave-memory-plan", "ModuleOp"> {
  let summary = "static offsets for every tensor in one arena per memory space";
  let description = [{
    Plans the memory of each function from the liveness of its values over
    the function's order: parameters, constants and the function's inputs
    stay live for the whole step; every other value lives from its
    definition to its last use and reuses freed space (first fit, aligned).

    Writes the plan into the IR: `cleave.offset` on each parameter and
    function argument, `cleave.offsets` (one per result) on each op that
    allocates, and on the function a `cleave.memory` dictionary with the
    arena's size and the predicted peak bytes by category (parameters,
    constants, io, activations; gradients, optimizer state and workspace
    are zero until training adds them). `cleave.get_param` reads the
    parameter's own storage and allocates nothing.

    ```mlir
    func.func @forward(%x: tensor<2x8xf32> {cleave.offset = 0 : i64}) -> tensor<2x8xf32>
        attributes {cleave.memory = {activations = 64 : i64, arena_bytes = 128 : i64, ...}} {
      %0 = cleave.exp %x {cleave.offsets = array<i64: 64>} : tensor<2x8xf32>
      return %0 : tensor<2x8xf32>
    }
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "byte alignment of every tensor's offset">,
  ];
}

def EmitProgram : Pass<"cleave-emit-program", "ModuleOp"> {
  let summary = "writes the per-rank program (runtime/program.proto)";
  let description = [{
    Translates a planned module (after `cleave-memory-plan`) into the
    runtime's program: `rank-<r>.pb` and the parameters' initial values in
    `params.bin`, in `output-dir`. Each cleave op becomes a kernel
    instruction naming its ONNX node; each value's last use is followed by a
    `free`; the schedule runs `@forward` once per microbatch. The first two
    integer arguments are the token ids and targets, a scalar float result
    is the loss. The module itself is left unchanged.
  }];
  let options = [
    Option<"outputDir", "output-dir", "std::string", /*default=*/"\"\"",
           "folder to write rank-0.pb and params.bin into (required)">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "samples per step (0: the batch of the function's inputs)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per step">,
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "seed of generated parameter initial values">,
  ];
}

#endif // CLEAVE_PASSES_TD
