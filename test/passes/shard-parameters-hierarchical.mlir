// --cleave-shard-parameters with processes-per-host (SMP's
// sdp_hierarchical_allgather): on 8 data ranks sharded in one group of 8,
// 4 ranks a host, every gather of @w gets cleave.gather_per_host = 4 (the
// emitter gathers within the host, then across the 2 hosts). A group within
// one host (8 ranks a host), one rank a host, or the option 0 gather flat.
// With 2 groups of 4 (data_replica x sharded_data) and 2 ranks a host, each
// group spans 2 hosts: 2 per host. Errors: a negative count.
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=8 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=4" | FileCheck %s --check-prefix=HOSTS4
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=8 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=8" | FileCheck %s --check-prefix=FLAT
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=8 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=1" | FileCheck %s --check-prefix=FLAT
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=8 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0" | FileCheck %s --check-prefix=FLAT
// RUN: cleave-opt %s --cleave-input-roles --cleave-place-ranks="data=8 sharded-data=4" --cleave-autodiff --cleave-optimizer "--cleave-shard-optimizer-state=axis=sharded_data replica-axis=data_replica" --cleave-shard-parameters="threshold=0 processes-per-host=2" | FileCheck %s --check-prefix=GROUPS
// RUN: not cleave-opt %s --cleave-input-roles --cleave-place-ranks=data=8 --cleave-autodiff --cleave-optimizer --cleave-shard-optimizer-state --cleave-shard-parameters="threshold=0 processes-per-host=-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

cleave.parameter @w {init = "normal:0.02"} : tensor<4x8xf32>

func.func @forward(%x: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %w = cleave.get_param @w : tensor<4x8xf32>
  %f = cleave.cast %x : tensor<2x4xi64> -> tensor<2x4xf32>
  %y = cleave.matmul %f, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %s = cleave.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// HOSTS4-LABEL: func.func @forward(
// HOSTS4: cleave.gather_param @w {cleave.gather_per_host = 4 : i64}
// FLAT-NOT: gather_per_host
// GROUPS: cleave.gather_param @w {cleave.gather_per_host = 2 : i64}
// NEGATIVE: processes-per-host must not be negative, got -2
