// Round-trip of a parameter that cleave-partition-tensor left with its
// local type: cleave.full_type, the full tensor's sharding and its full
// value (docs/tensor-parallel.md, "How a parameter in the program
// describes several blocks").
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// CHECK: cleave.parameter @qkv {cleave.full_type = tensor<24x8xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<12x8xf32>
// CHECK: cleave.parameter @wk {cleave.full_type = tensor<4x2xf32>, cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<2x2xf32> = dense<1.000000e+00> : tensor<4x2xf32>
module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
cleave.parameter @qkv {cleave.full_type = tensor<24x8xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<12x8xf32>
cleave.parameter @wk {cleave.full_type = tensor<4x2xf32>, cleave.sharding = #cleave.sharding<[{"tensor":(1)2}, {}]>} : tensor<2x2xf32> = dense<1.0> : tensor<4x2xf32>
}
