// Tests of --cleave-place-ranks: the placement strategy orders the mesh's
// axes (the first varies slowest in the rank number), and a bad one is
// refused.
// RUN: cleave-opt %s "--cleave-place-ranks=data=2 pipeline=4" | FileCheck %s --check-prefix=CLUSTER
// RUN: cleave-opt %s "--cleave-place-ranks=data=2 pipeline=4 placement=spread" | FileCheck %s --check-prefix=SPREAD
// RUN: cleave-opt %s "--cleave-place-ranks=data=3 pipeline=2 tensor=2 placement=PDT" | FileCheck %s --check-prefix=PDT
// RUN: not cleave-opt %s "--cleave-place-ranks=data=2 placement=DDP" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not cleave-opt %s "--cleave-place-ranks=data=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// CLUSTER: module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=4, "tensor"=1]>}
// SPREAD: module attributes {cleave.mesh = #cleave.mesh<["tensor"=1, "pipeline"=4, "data"=2]>}
// PDT: module attributes {cleave.mesh = #cleave.mesh<["pipeline"=2, "data"=3, "tensor"=2]>}
// BAD: error: placement must be cluster, spread or an order of D, P and T, got 'DDP'
// ZERO: error: cleave-place-ranks: every degree must be at least 1 (data 0, pipeline 1, tensor 1)

cleave.parameter @w {init = "normal:0.02"} : tensor<4x8xf32>
