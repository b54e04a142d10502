// Each broken contract --cleave-verify-partitioned reports, on hand-written
// partitioned modules.
// RUN: cleave-opt %s --split-input-file --cleave-verify-partitioned --verify-diagnostics

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 1 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
      %0 = cleave.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
      return %0 : tensor<f32>
    }
  }
  // expected-error @+1 {{cleave-verify-partitioned: 'func.func' is outside every stage module; after partitioning the top-level module holds only module @stage<k>}}
  func.func @left_behind(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{cleave-verify-partitioned: stage module 0 in order has cleave.stage = 1; stages are 0..1 once each, in order}}
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  // expected-error @+1 {{cleave-verify-partitioned: stage 1 needs cleave.stages = 2, the number of stage modules}}
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 3 : i64} {
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<2x4x16xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: stage 1 receives 'tensor<2x4x8xf32>' as boundary value 0, but stage 0 sends 'tensor<2x4x16xf32>'}}
    func.func @forward(%h: tensor<2x4x8xf32> {cleave.boundary = 0 : i64}) -> tensor<2x4x8xf32> {
      return %h : tensor<2x4x8xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}, tensor<4xf32> {cleave.boundary = 1 : i64}) {
      return %x, %x : tensor<4xf32>, tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: stage 1 receives 1 boundary values, stage 0 sends 2}}
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: result 0 is boundary value 1, expected 0 (boundary values are numbered in order)}}
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 1 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: the first stage receives nothing from another stage, it has 1 boundary arguments}}
    func.func @forward(%x: tensor<4xf32> {cleave.boundary = 0 : i64}) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: parameter @emb is held by stages [0, 1] but its cleave.tied_stages in stage 0 is []; a tied parameter lists every stage holding it, an untied one has none}}
    cleave.parameter @emb : tensor<16x8xf32>
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    cleave.parameter @emb {cleave.tied_stages = [0, 1]} : tensor<16x8xf32>
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}

// -----

module {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    // expected-error @+1 {{cleave-verify-partitioned: the last stage sends nothing on, it has 1 boundary results}}
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %h : tensor<4xf32>
    }
  }
}

// -----

// expected-error @+1 {{cleave-verify-partitioned: 2 stages do not place evenly on the 4 ranks of mesh axis "pipeline"}}
module attributes {cleave.mesh = #cleave.mesh<["pipeline"=4]>} {
  module @stage0 attributes {cleave.stage = 0 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.boundary = 0 : i64}) {
      return %x : tensor<4xf32>
    }
  }
  module @stage1 attributes {cleave.stage = 1 : i64, cleave.stages = 2 : i64} {
    func.func @forward(%h: tensor<4xf32> {cleave.boundary = 0 : i64}) -> tensor<4xf32> {
      return %h : tensor<4xf32>
    }
  }
}
