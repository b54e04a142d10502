// Tests of --cleave-verify-imported, the contract of the import phase: static
// shapes, only cleave and func ops, and with require-names an ONNX node name
// on every cleave op. One file, split so that each mode reads its own inputs.

// RUN: split-file %s %t
// RUN: cleave-opt %t/good.mlir --cleave-verify-imported | FileCheck %t/good.mlir
// RUN: cleave-opt %t/good.mlir --cleave-verify-imported=require-names | FileCheck %t/good.mlir
// RUN: cleave-opt %t/contract.mlir --allow-unregistered-dialect --split-input-file \
// RUN:   --cleave-verify-imported --verify-diagnostics
// RUN: cleave-opt %t/names.mlir --split-input-file \
// RUN:   --cleave-verify-imported=require-names --verify-diagnostics

//--- good.mlir
// A module as the importer writes it passes in both modes and is unchanged.
// Parameters and func ops need no node name.
// CHECK: cleave.parameter @wte : tensor<16x8xf32>
// CHECK-LABEL: func.func @forward
// CHECK: cleave.embedding
// CHECK: cleave.reduce_mean
cleave.parameter @wte : tensor<16x8xf32>
func.func @forward(%idx: tensor<2x4xi64>) -> tensor<2x4x1xf32> {
  %w = cleave.get_param @wte : tensor<16x8xf32> loc("wte")
  %e = cleave.embedding %w, %idx : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32> loc("/wte/Gather")
  %m = cleave.reduce_mean %e {axes = array<i64: 2>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32> loc("/ln_f/ReduceMean")
  return %m : tensor<2x4x1xf32>
}

//--- contract.mlir
// Without require-names, ops need no node name.
func.func @unnamed(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = cleave.exp %x : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Cleave ops cannot have dynamic shapes at all; a call can.
func.func private @dynamic(tensor<2x8xf32>) -> tensor<?x8xf32>
func.func @dynamic_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result of type 'tensor<?x8xf32>' is not a statically shaped tensor}}
  %0 = func.call @dynamic(%x) : (tensor<2x8xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func private @unranked(tensor<2x8xf32>) -> tensor<*xf32>
func.func @unranked_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result of type 'tensor<*xf32>' is not a statically shaped tensor}}
  %0 = func.call @unranked(%x) : (tensor<2x8xf32>) -> tensor<*xf32>
  return
}

// -----

// expected-error @+1 {{argument of type 'tensor<?x8xf32>' is not a statically shaped tensor}}
func.func @dynamic_argument(%x: tensor<?x8xf32>) {
  return
}

// -----

// expected-error @+1 {{argument of type 'i64' is not a statically shaped tensor}}
func.func @scalar_argument(%n: i64) {
  return
}

// -----

func.func @foreign_op() -> tensor<2xf32> {
  // expected-error @+1 {{op 'test.foo' is not part of an imported cleave module}}
  %0 = "test.foo"() : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

//--- names.mlir
func.func @unnamed_op(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = cleave.exp %x : tensor<2x8xf32> loc("/h.0/Exp")
  // expected-error @+1 {{op has no ONNX node name as its location}}
  %1 = cleave.tanh %0 : tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

