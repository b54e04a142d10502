// Every verifier message of the distribution words: the mesh, shardings
// against types and the mesh, the dialect's attribute names, collectives'
// groups and shapes, peers, and start/wait pairing.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect

// expected-error @+1 {{mesh axis "data" is declared twice}}
module attributes {cleave.mesh = #cleave.mesh<["data"=2, "data"=4]>} {}

// -----

// expected-error @+1 {{mesh axis "tensor" must have at least 1 rank, got 0}}
module attributes {cleave.mesh = #cleave.mesh<["tensor"=0]>} {}

// -----

// expected-error @+1 {{mesh axis "tensor" is used twice in one sharding; an axis splits one dimension or makes the value partial, once}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{"tensor"}, {}], partial = ["tensor"]>} : tensor<8x8xf32>

// -----

// expected-error @+1 {{unknown attribute 'cleave.shardng'; the cleave.* attribute names are declared in ir/AttrNames.h}}
module attributes {cleave.shardng = 1} {}

// -----

// expected-error @+1 {{attribute 'cleave.mesh': a mesh is declared on a module}}
cleave.parameter @w {cleave.mesh = #cleave.mesh<["data"=2]>} : tensor<8x8xf32>

// -----

// expected-error @+1 {{mesh axis "tensor" is used twice in one sharding}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{"tensor":(1)4}, {"tensor":(2)2}]>} : tensor<8x8xf32>

// -----

// expected-error @+1 {{dimension 0 has 3 blocks but no axes splitting them}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[3 blocks {}, {}]>} : tensor<24x8xf32>

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding': sub-axis "tensor":(2)4 does not divide the axis's 4 ranks}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{"tensor":(2)4}, {}]>} : tensor<8x8xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding': dimension 0 of 'tensor<12x8xf32>' (size 12) is not divisible by the 24 pieces of its blocks and mesh axes}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[6 blocks {"tensor"}, {}]>} : tensor<12x8xf32>
}

// -----

// expected-error @+1 {{attribute 'cleave.sharding': a sharding needs a cleave.mesh on an enclosing module to name its axes}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{"tensor"}, {}]>} : tensor<8x8xf32>

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding': dimension 1 of 'tensor<8x6xf32>' (size 6) is not divisible by the 4 ranks of its mesh axes}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{}, {"tensor"}]>} : tensor<8x6xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding': mesh axis "pipeline" is not in the mesh #cleave.mesh<["data"=2, "tensor"=4]>}}
cleave.parameter @w {cleave.sharding = #cleave.sharding<[{}, {"pipeline"}]>} : tensor<8x8xf32>
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding' of argument 0: sharding #cleave.sharding<[{"data"}]> has 1 dimensions, the value 'tensor<8x8xf32>' has 2}}
func.func @rank(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<[{"data"}]>}) {
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.sharding' of result 0: partial-sum axis "sharded_data" is not in the mesh}}
func.func @partial(%x: tensor<8x8xf32>) -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<[{}, {}], partial = ["sharded_data"]>}) {
  return %x : tensor<8x8xf32>
}
}

// -----

// expected-error @+1 {{attribute 'cleave.memory_space': expected a #cleave.memory_space}}
cleave.parameter @w {cleave.memory_space = "host"} : tensor<8x8xf32>

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @two_results(%x: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'cleave.sharding': a sharding belongs to one value}}
  "test.two"(%x) {cleave.sharding = #cleave.sharding<[{}]>} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}
}

// -----

func.func @no_mesh(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op needs a cleave.mesh on an enclosing module to resolve its mesh axes}}
  %0 = cleave.all_gather %x {axes = ["tensor"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x16xf32>
  return
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
func.func @unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op mesh axis "pipeline" is not in the mesh}}
  %0 = cleave.all_gather %x {axes = ["pipeline"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x16xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
func.func @gather_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op result 'tensor<4x8xf32>' must have size 16 in dimension 1 (input 'tensor<4x8xf32>', gathered over 2 ranks along dim 1)}}
  %0 = cleave.all_gather %x {axes = ["tensor"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=2]>} {
func.func @gather_twice(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op mesh axis "tensor" is named twice}}
  %0 = cleave.all_gather %x {axes = ["tensor", "tensor"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x32xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
func.func @scatter_indivisible(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_scatter' op dimension 0 of 'tensor<6x8xf32>' (size 6) is not divisible by the 4 ranks of the group}}
  %0 = cleave.reduce_scatter %x {axes = ["data"], dim = 0 : i64} : tensor<6x8xf32> -> tensor<1x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
func.func @scatter_reduce(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_scatter' op reduce must be "sum", "mean" or "max", got "prod"}}
  %0 = cleave.reduce_scatter %x {axes = ["data"], dim = 0 : i64, reduce = "prod"} : tensor<8x8xf32> -> tensor<2x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
func.func @scatter_dim(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'cleave.reduce_scatter' op dim 2 is not a dimension of 'tensor<8x8xf32>'}}
  %0 = cleave.reduce_scatter %x {axes = ["data"], dim = 2 : i64} : tensor<8x8xf32> -> tensor<2x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=4]>} {
func.func @empty_group(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'cleave.all_gather' op needs at least one mesh axis for its group}}
  %0 = cleave.all_gather %x {axes = [], dim = 0 : i64} : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
func.func @all_reduce_group(%x: tensor<f32>) {
  // expected-error @+1 {{'cleave.all_reduce' op group "tensor" is not an axis of the mesh #cleave.mesh<["data"=2, "pipeline"=2]>}}
  %0 = cleave.all_reduce %x {group = "tensor"} : tensor<f32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @start_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.all_reduce_start' op delivers 'tensor<4xf32>', an all-reduce of 'tensor<8xf32>' delivers the same type}}
  %t = cleave.all_reduce_start %x {axes = ["data"]} : tensor<8xf32> -> !cleave.async_token<tensor<4xf32>>
  %0 = cleave.wait %t : !cleave.async_token<tensor<4xf32>>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @start_without_value(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.all_gather_start' op returns a token that delivers a value: !cleave.async_token<tensor<...>>}}
  %t = cleave.all_gather_start %x {axes = ["data"], dim = 0 : i64} : tensor<8xf32> -> !cleave.async_token
  cleave.wait %t : !cleave.async_token
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @never_waited(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.all_reduce_start' op token must be waited for exactly once, it is waited for 0 times}}
  %t = cleave.all_reduce_start %x {axes = ["data"]} : tensor<8xf32> -> !cleave.async_token<tensor<8xf32>>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2]>} {
func.func @waited_twice(%x: tensor<8xf32>) {
  // expected-error @+1 {{'cleave.all_reduce_start' op token must be waited for exactly once, it is waited for 2 times}}
  %t = cleave.all_reduce_start %x {axes = ["data"]} : tensor<8xf32> -> !cleave.async_token<tensor<8xf32>>
  %0 = cleave.wait %t : !cleave.async_token<tensor<8xf32>>
  %1 = cleave.wait %t : !cleave.async_token<tensor<8xf32>>
  return
}
}

// -----

func.func @wait_for_nothing(%t: !cleave.async_token<tensor<8xf32>>) {
  // expected-error @+1 {{'cleave.wait' op waits for a token that no cleave.*_start op returned}}
  %0 = cleave.wait %t : !cleave.async_token<tensor<8xf32>>
  return
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
func.func @peer_out_of_mesh(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.send' op peer 2 is not a coordinate of mesh axis "pipeline" (size 2)}}
  cleave.send %h {axis = "pipeline", peer = 2 : i64, tag = 0 : i64} : tensor<2x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
func.func @peer_axis(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.recv' op mesh axis "stage" is not in the mesh}}
  %0 = cleave.recv {axis = "stage", peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["pipeline"=2]>} {
func.func @negative_tag(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.send' op tag must be non-negative, got -1}}
  cleave.send %h {axis = "pipeline", peer = 1 : i64, tag = -1 : i64} : tensor<2x8xf32>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["pipeline"=2]>} {
func.func @send_with_value(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{'cleave.send_start' op a send delivers nothing: its token is !cleave.async_token, got '!cleave.async_token<tensor<2x8xf32>>'}}
  %t = cleave.send_start %h {axis = "pipeline", peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32> -> !cleave.async_token<tensor<2x8xf32>>
  %0 = cleave.wait %t : !cleave.async_token<tensor<2x8xf32>>
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
cleave.parameter @w {init = "zeros"} : tensor<4xf32>
func.func @optimizer() {
  // expected-error @+1 {{'cleave.all_reduce_grads' op member 2 is not a coordinate of mesh axis "pipeline"}}
  cleave.all_reduce_grads [@w] {group = "pipeline", members = array<i64: 0, 2>, reduce = "sum"}
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
cleave.parameter @w {init = "zeros"} : tensor<4xf32>
func.func @optimizer() {
  // expected-error @+1 {{'cleave.all_reduce_grads' op member 1 is listed twice}}
  cleave.all_reduce_grads [@w] {group = "pipeline", members = array<i64: 1, 1>, reduce = "sum"}
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "pipeline"=2]>} {
cleave.parameter @w {init = "zeros"} : tensor<4xf32>
func.func @optimizer() {
  // expected-error @+1 {{'cleave.all_reduce_grads' op group "tied:0,1" is not an axis of the mesh #cleave.mesh<["data"=2, "pipeline"=2]>}}
  cleave.all_reduce_grads [@w] {group = "tied:0,1", reduce = "sum"}
  return
}
}

// -----

// cleave.read_parts (cleave-split-token-reads): a [batch, seq] integer
// argument read in one part per tensor rank.
module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.read_parts' of argument 0: expected the number of parts (2 or more) a microbatch is read in, on a [batch, seq] token-ids or targets argument}}
func.func @float_ids(%x: tensor<2x8xf32> {cleave.read_parts = 4 : i64}) {
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
// expected-error @+1 {{attribute 'cleave.read_parts' of argument 0: a microbatch is read in one part per rank of the mesh's "tensor" axis}}
func.func @parts(%x: tensor<2x8xi64> {cleave.read_parts = 2 : i64}) {
  return
}
}

// -----

module attributes {cleave.mesh = #cleave.mesh<["data"=2, "tensor"=4]>} {
func.func @valid_parts(%x: tensor<2x8xi64> {cleave.read_parts = 4 : i64, cleave.role = "tokens"}) {
  return
}
}
