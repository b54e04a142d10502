// cleave-remat and cleave-offload-activations find each forward's backward
// by its cleave.backward (passes/ForwardBackward.h); one that names no
// function is an error on the forward, naming the pass.
// RUN: cleave-opt %s --cleave-remat=strategy=each --verify-diagnostics
// RUN: not cleave-opt %s --cleave-offload-activations 2>&1 | FileCheck %s --check-prefix=OFFLOAD

// expected-error @+1 {{cleave-remat: no backward function @forward_backward}}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> attributes {cleave.kind = "forward", cleave.backward = @forward_backward} {
  return %x : tensor<2xf32>
}
// OFFLOAD: error: cleave-offload-activations: no backward function @forward_backward
