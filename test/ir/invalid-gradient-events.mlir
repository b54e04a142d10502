// The pairing of started gradient all-reduces with their waits
// (cleave.all_reduce_grads_start / cleave.wait_grads): by event, across the
// functions of a module, each event started once in a backward and waited
// for once in the optimizer.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

cleave.parameter @w : tensor<4xf32>
func.func @backward(%dw: tensor<4xf32>) attributes {cleave.kind = "backward"} {
  cleave.accumulate_grad @w, %dw : tensor<4xf32>
  // expected-error @+1 {{event 1 is started but never waited for: the optimizer needs a cleave.wait_grads event 1}}
  cleave.all_reduce_grads_start [@w] event 1 {group = "data"}
  return
}
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  return
}

// -----

cleave.parameter @w : tensor<4xf32>
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  // expected-error @+1 {{event 3 is waited for but never started: a backward needs a cleave.all_reduce_grads_start with event 3}}
  cleave.wait_grads event 3
  return
}

// -----

cleave.parameter @w : tensor<4xf32>
func.func @backward(%dw: tensor<4xf32>) attributes {cleave.kind = "backward"} {
  cleave.accumulate_grad @w, %dw : tensor<4xf32>
  // expected-error @+1 {{event 1 is started 2 and waited for 1 times on the rank; each event is started once and waited for once}}
  cleave.all_reduce_grads_start [@w] event 1 {group = "data"}
  cleave.all_reduce_grads_start [@w] event 1 {group = "data"}
  return
}
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  cleave.wait_grads event 1
  return
}

// -----

// The wait must come after the start in the step: a start in the optimizer
// could not be waited for later.
cleave.parameter @w : tensor<4xf32>
func.func @optimizer() attributes {cleave.kind = "optimizer"} {
  // expected-error @+1 {{must be in a function of cleave.kind "backward"}}
  cleave.all_reduce_grads_start [@w] event 1 {group = "data"}
  cleave.wait_grads event 1
  return
}

// -----

cleave.parameter @w : tensor<4xf32>
func.func @backward() attributes {cleave.kind = "backward"} {
  // expected-error @+1 {{event must be at least 1, got 0}}
  cleave.all_reduce_grads_start [@w] event 0 {group = "data"}
  return
}

// -----

func.func @backward() attributes {cleave.kind = "backward"} {
  // expected-error @+1 {{no cleave.parameter named @v}}
  cleave.all_reduce_grads_start [@v] event 1 {group = "data"}
  return
}

// -----

// expected-error @+1 {{attribute 'cleave.last_microbatch': expected a function's symbol, on a function}}
cleave.parameter @w {cleave.last_microbatch = "backward"} : tensor<4xf32>
