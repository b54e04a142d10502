// A parameter that cleave-partition-tensor left with its local type: its
// cleave.full_type (the full tensor's type) is checked against that type,
// and its sharding and value against the full type.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
// expected-error @+1 {{attribute 'cleave.full_type': the parameter's local type 'tensor<5x8xf32>' is not a slice of its full type 'tensor<24x8xf32>' split evenly}}
cleave.parameter @w {cleave.full_type = tensor<24x8xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<5x8xf32>
}

// -----

// expected-error @+1 {{attribute 'cleave.full_type': the full type 'tensor<24xf32>' and the parameter's local type 'tensor<12x8xf32>' differ in rank or element type}}
cleave.parameter @w {cleave.full_type = tensor<24xf32>} : tensor<12x8xf32>

// -----

// expected-error @+1 {{attribute 'cleave.full_type': expected the full tensor type, on a cleave.parameter}}
cleave.parameter @w {cleave.full_type = 3 : i64} : tensor<12x8xf32>

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=4]>} {
// The sharding is checked against the full type (20 rows are not 3 blocks
// of 4 parts), not the local one.
// expected-error @+1 {{attribute 'cleave.sharding': dimension 0 of 'tensor<20x8xf32>' (size 20) is not divisible by the 12 pieces of its blocks and mesh axes}}
cleave.parameter @w {cleave.full_type = tensor<20x8xf32>, cleave.sharding = #cleave.sharding<[3 blocks {"tensor"}, {}]>} : tensor<5x8xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["tensor"=2]>} {
// The value is the full tensor's.
// expected-error @+1 {{initial value of type 'tensor<2x2xf32>' does not match the parameter type 'tensor<4x2xf32>'}}
cleave.parameter @w {cleave.full_type = tensor<4x2xf32>, cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<2x2xf32> = dense<1.0> : tensor<2x2xf32>
}
