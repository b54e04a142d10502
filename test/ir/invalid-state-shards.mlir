// The verifier messages of ZeRO-1's words: cleave.state_axis on a
// parameter and a mesh axis; a split parameter's update and gradient read
// take one chunk; the buckets name split parameters of their group; a
// working copy (cleave.working_type: split fp32 masters) is a 16-bit copy
// of a split, unsharded f32 parameter, read in its type, and only such a
// parameter has a master chunk to cast.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics
// (The last case is valid: a working copy read in its type, its master
// cast and gathered.)

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.state_axis': "tensor" is not an axis of the enclosing mesh}}
  cleave.parameter @w {cleave.state_axis = "tensor"} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.state_axis': expected the name of a mesh axis, on a cleave.parameter}}
  cleave.parameter @w {cleave.state_axis = 2 : i64} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w : tensor<3x5xf32>
  func.func @optimizer() {
    // expected-error @+1 {{parameter @w has no cleave.state_axis: its gradient is not split; use cleave.get_grad}}
    %g = cleave.get_grad_shard @w : tensor<8xf32>
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @optimizer() {
    // 15 elements over 2 ranks: chunks of 8, rounded to 16 (64 bytes).
    // expected-error @+1 {{the result must be 'tensor<16xf32>', got 'tensor<7xf32>'}}
    %g = cleave.get_grad_shard @w : tensor<7xf32>
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @optimizer(%step: tensor<i64>, %g: tensor<3x5xf32>) {
    // expected-error @+1 {{the gradient of a parameter with split optimizer state must be 'tensor<16xf32>', got 'tensor<3x5xf32>'}}
    cleave.adamw @w, %g, %step {lr = 1.0e-03} : tensor<3x5xf32>, tensor<i64>
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  cleave.parameter @b : tensor<5xf32>
  func.func @optimizer() {
    // expected-error @+1 {{parameter @b does not split its optimizer state over "data" (its cleave.state_axis)}}
    cleave.reduce_scatter_grads [@w, @b] {group = "data"}
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @optimizer() {
    // expected-error @+1 {{parameter @w does not split its optimizer state over "pipeline" (its cleave.state_axis)}}
    cleave.all_gather_params [@w] {group = "pipeline"}
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @optimizer() {
    // expected-error @+1 {{reduce must be "mean" or "sum", got "max"}}
    cleave.reduce_scatter_grads [@w] {group = "data", reduce = "max"}
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @backward() attributes {cleave.kind = "backward"} {
    // expected-error @+1 {{event 3 is started but never waited for: the optimizer needs a cleave.wait_grads event 3}}
    cleave.reduce_scatter_grads_start [@w] event 3 {group = "data"}
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @backward() attributes {cleave.kind = "backward"} {
    cleave.reduce_scatter_grads_start [@w] event 1 {group = "data"}
    return
  }
  func.func @optimizer() attributes {cleave.kind = "optimizer"} {
    cleave.wait_grads event 1
    %g = cleave.get_grad_shard @w : tensor<16xf32>
    return
  }
}

// -----

// Sharded data parallelism: cleave.param_axis names the state's axis.
module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.param_axis': a sharded parameter's chunks are its optimizer state's: expected cleave.state_axis = "data" beside it}}
  cleave.parameter @w {cleave.param_axis = "data"} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{parameter @w is not sharded (it needs a cleave.param_axis equal to its cleave.state_axis); read it with cleave.get_param}}
    %w = cleave.gather_param @w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{parameter @w is sharded (cleave.param_axis): this rank holds one chunk of it; read it with cleave.gather_param}}
    %w = cleave.get_param @w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @backward(%dw: tensor<3x5xf32>) {
    // expected-error @+1 {{the gradient chunk of a sharded parameter must be 'tensor<16xf32>', got 'tensor<3x5xf32>'}}
    cleave.accumulate_grad @w, %dw : tensor<3x5xf32>
    return
  }
}

// -----

// MiCS splits the data axis: replica first, then sharded_data, no "data".
// expected-error @+1 {{mesh axis "data_replica" splits the data axis: it is followed by "sharded_data" and the mesh has no "data"}}
module attributes {cleave.mesh = #cleave.mesh<["sharded_data"=2, "data_replica"=2]>} {
}

// -----

// A started gather (cleave-prefetch-gathers) has exactly one wait, before
// its readers.
module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{started gather (event 1) has no cleave.wait_param}}
    %w = cleave.gather_param @w event 1 : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    %w = cleave.gather_param @w event 1 : tensor<3x5xf32>
    %y = cleave.tanh %w : tensor<3x5xf32>
    // expected-error @+1 {{comes after a reader of the gathered parameter @w; the wait must come first}}
    cleave.wait_param %w : tensor<3x5xf32>
    return %y : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    %w = cleave.gather_param @w : tensor<3x5xf32>
    // expected-error @+1 {{waits for a value that no started cleave.gather_param (with an event) defines}}
    cleave.wait_param %w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{event must be positive, got 0}}
    %w = cleave.gather_param @w event 0 : tensor<3x5xf32>
    cleave.wait_param %w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

// A started reduce-scatter (cleave-bucket-scatters) is waited for with its
// own input, before its readers.
module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  func.func @backward(%f: tensor<32xf32>, %g: tensor<32xf32>) -> tensor<16xf32> {
    %c = cleave.reduce_scatter %f {axes = ["data"], dim = 0 : i64, reduce = "mean", cleave.event = 1 : i64} : tensor<32xf32> -> tensor<16xf32>
    // expected-error @+1 {{names an input that is not its reduce-scatter's}}
    cleave.wait_scatter %c, %g : tensor<16xf32>, tensor<32xf32>
    return %c : tensor<16xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  func.func @backward(%f: tensor<32xf32>) -> tensor<16xf32> {
    %c = cleave.reduce_scatter %f {axes = ["data"], dim = 0 : i64, reduce = "mean"} : tensor<32xf32> -> tensor<16xf32>
    // expected-error @+1 {{waits for a value that no started cleave.reduce_scatter (with a cleave.event) defines}}
    cleave.wait_scatter %c, %f : tensor<16xf32>, tensor<32xf32>
    return %c : tensor<16xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  func.func @backward(%f: tensor<32xf32>) -> tensor<16xf32> {
    %c = cleave.reduce_scatter %f {axes = ["data"], dim = 0 : i64, reduce = "mean", cleave.event = 1 : i64} : tensor<32xf32> -> tensor<16xf32>
    %n = cleave.neg %c : tensor<16xf32>
    // expected-error @+1 {{comes after a reader of the reduce-scattered value; the wait must come first}}
    cleave.wait_scatter %c, %f : tensor<16xf32>, tensor<32xf32>
    return %n : tensor<16xf32>
  }
}

// -----

// cleave.gather_next_hop needs a started hierarchical gather
// (sdp_hierarchical_allgather's first hop).
module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    %w = cleave.gather_param @w event 1 : tensor<3x5xf32>
    // expected-error @+1 {{needs a value that a started hierarchical cleave.gather_param (with an event and cleave.gather_per_host) defines}}
    cleave.gather_next_hop %w : tensor<3x5xf32>
    cleave.wait_param %w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    %w = cleave.gather_param @w event 1 {cleave.gather_per_host = 2 : i64} : tensor<3x5xf32>
    cleave.wait_param %w : tensor<3x5xf32>
    // expected-error @+1 {{comes after a wait for the gathered parameter @w; the next hop must come first}}
    cleave.gather_next_hop %w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
  cleave.parameter @w {cleave.param_axis = "data", cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{started gather (event 1) has more than one cleave.gather_next_hop}}
    %w = cleave.gather_param @w event 1 {cleave.gather_per_host = 2 : i64} : tensor<3x5xf32>
    cleave.gather_next_hop %w : tensor<3x5xf32>
    cleave.gather_next_hop %w : tensor<3x5xf32>
    cleave.wait_param %w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.working_type': a working copy belongs to a parameter whose optimizer state is split (cleave.state_axis) and which is not sharded (cleave.param_axis)}}
  cleave.parameter @w {cleave.working_type = bf16} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.working_type': a working copy belongs to a parameter whose optimizer state is split (cleave.state_axis) and which is not sharded (cleave.param_axis)}}
  cleave.parameter @w {cleave.state_axis = "data", cleave.param_axis = "data", cleave.working_type = bf16} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.working_type': a working copy is a 16-bit float copy of an f32 parameter; got 'f64' for 'tensor<3x5xf32>'}}
  cleave.parameter @w {cleave.state_axis = "data", cleave.working_type = f64} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  // expected-error @+1 {{attribute 'cleave.working_type': expected an element type, on a cleave.parameter}}
  cleave.parameter @w {cleave.state_axis = "data", cleave.working_type = "bf16"} : tensor<3x5xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data", cleave.working_type = bf16} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xf32> {
    // expected-error @+1 {{result type 'tensor<3x5xf32>' differs from the type of parameter @w, 'tensor<3x5xbf16>'}}
    %w = cleave.get_param @w : tensor<3x5xf32>
    return %w : tensor<3x5xf32>
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data"} : tensor<3x5xf32>
  func.func @refresh_params() attributes {cleave.kind = "refresh"} {
    // expected-error @+1 {{parameter @w has no cleave.working_type: its fp32 value is the parameter itself, not a master chunk}}
    cleave.cast_master_chunk @w
    return
  }
}

// -----

// Valid.
module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
  cleave.parameter @w {cleave.state_axis = "data", cleave.working_type = bf16} : tensor<3x5xf32>
  func.func @forward() -> tensor<3x5xbf16> {
    %w = cleave.get_param @w : tensor<3x5xbf16>
    return %w : tensor<3x5xbf16>
  }
  func.func @refresh_params() attributes {cleave.kind = "refresh"} {
    cleave.cast_master_chunk @w
    cleave.all_gather_params [@w] {group = "data"}
    return
  }
}
