// The verifiers of cleave.offload and cleave.fetch: an offload's result is
// a host value, a fetch reads one and gives a device value.
// RUN: cleave-opt %s --split-input-file --verify-diagnostics

func.func @offload_without_space(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.offload' op result lives in host memory: the op needs cleave.memory_space = #cleave.memory_space<host>}}
  %h = cleave.offload %x : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

func.func @offload_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = cleave.offload %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<4xf32>
  // expected-error @+1 {{'cleave.offload' op input is already in host memory}}
  %g = cleave.offload %h {cleave.memory_space = #cleave.memory_space<host>} : tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

func.func @fetch_device_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.fetch' op input must be a host value}}
  %d = cleave.fetch %x : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

func.func @fetch_to_host(%x: tensor<4xf32> {cleave.memory_space = #cleave.memory_space<host>}) -> tensor<4xf32> {
  // expected-error @+1 {{'cleave.fetch' op result lives in device memory: remove its cleave.memory_space}}
  %d = cleave.fetch %x {cleave.memory_space = #cleave.memory_space<host>} : tensor<4xf32>
  return %d : tensor<4xf32>
}
