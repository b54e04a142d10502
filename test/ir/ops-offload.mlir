// cleave.offload and cleave.fetch round-trip (twice).
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// CHECK-LABEL: func.func @copies(
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32>, %[[S:.*]]: tensor<2x8xf32> {cleave.memory_space = #cleave.memory_space<host>})
// CHECK-NEXT: %[[H:.*]] = cleave.offload %[[X]] {cleave.memory_space = #cleave.memory_space<host>} : tensor<2x8xf32>
// CHECK-NEXT: %[[D:.*]] = cleave.fetch %[[H]] : tensor<2x8xf32>
// CHECK-NEXT: %[[E:.*]] = cleave.fetch %[[S]] : tensor<2x8xf32>
func.func @copies(%x: tensor<2x8xf32>, %saved: tensor<2x8xf32> {cleave.memory_space = #cleave.memory_space<host>}) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %h = cleave.offload %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<2x8xf32>
  %d = cleave.fetch %h : tensor<2x8xf32>
  %e = cleave.fetch %saved : tensor<2x8xf32>
  return %d, %e : tensor<2x8xf32>, tensor<2x8xf32>
}
