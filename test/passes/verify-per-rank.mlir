// Tests of --cleave-verify-per-rank: a well-formed per-rank module passes;
// a send without its receive, a type or tag mismatch, a boundary left in a
// signature, a missing mesh and a dynamic shape are each refused, naming
// the stages.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics --cleave-verify-per-rank

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2, "tensor"=1]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<2x4xf32>) {
      cleave.send %x {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
      return
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward() -> tensor<2x4xf32> {
      %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf32>
      return %h : tensor<2x4xf32>
    }
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2, "tensor"=1]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<2x4xf32>) {
      // expected-error @+1 {{cleave-verify-per-rank: stage 0 sends tag 0 to pipeline rank 1, but no stage on pipeline rank 1 receives it}}
      cleave.send %x {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
      return
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward() -> tensor<2x4xf32> {
      %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 1 : i64} : tensor<2x4xf32>
      return %h : tensor<2x4xf32>
    }
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2, "tensor"=1]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<2x4xf32>) {
      // expected-error @+1 {{cleave-verify-per-rank: stage 0 sends 'tensor<2x4xf32>' with tag 0, but stage 1 receives 'tensor<4x2xf32>'}}
      cleave.send %x {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
      return
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward() -> tensor<4x2xf32> {
      %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 0 : i64} : tensor<4x2xf32>
      return %h : tensor<4x2xf32>
    }
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2, "tensor"=1]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<2x4xf32>) {
      return
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward() -> tensor<2x4xf32> {
      // expected-error @+1 {{cleave-verify-per-rank: stage 1 receives tag 0 from pipeline rank 0, but no stage there sends it}}
      %h = cleave.recv {axis = "pipeline", peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf32>
      return %h : tensor<2x4xf32>
    }
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=1, "pipeline"=2, "tensor"=1]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-per-rank: result 0 of stage 0 function @forward is still a stage boundary ('cleave.boundary'); run cleave-stage-transfers}}
    func.func @forward(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<2x4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%h: tensor<2x4xf32> {cleave.boundary = 0 : i64}) {
      return
    }
  }
}

// -----

// expected-error @+1 {{cleave-verify-per-rank: the module has no cleave.mesh; run cleave-place-ranks first}}
module {
  func.func @forward(%x: tensor<2x4xf32>) {
    return
  }
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=1, "tensor"=1]>} {
  // expected-error @+1 {{cleave-verify-per-rank: function @forward takes 'tensor<?x4xf32>', which has no static local shape}}
  func.func @forward(%x: tensor<?x4xf32>) {
    return
  }
}
