// --cleave-pad-vocabulary=pad=false (cleave-compile's under sharded
// optimizer state or sharded parameters): nothing is padded, and the
// remark says why the vocabulary stays replicated.
// RUN: cleave-opt %s --verify-diagnostics --cleave-pad-vocabulary="tensor=2 pad=false" | FileCheck %s

module {
  // CHECK: cleave.parameter @wte : tensor<7x4xf32>
  // expected-remark @+1 {{vocabulary 'wte' of 7 rows not padded to 8 for tensor=2: padding does not yet combine with sharded optimizer state or sharded parameters; it stays replicated}}
  cleave.parameter @wte : tensor<7x4xf32>
  // CHECK: cleave.get_param @wte : tensor<7x4xf32>
  func.func @f(%ids: tensor<4xi64>) -> tensor<4x4xf32> {
    %w = cleave.get_param @wte : tensor<7x4xf32>
    %x = cleave.embedding %w, %ids : (tensor<7x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    return %x : tensor<4x4xf32>
  }
}
