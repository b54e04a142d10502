//===- CleaveTypes.td - cleave dialect types ---------------*- tablegen -*-===//
//
// Types of the cleave dialect: the token of an asynchronous collective.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TYPES_TD
#define CLEAVE_TYPES_TD

include "ir/CleaveDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Cleave_AsyncTokenType : TypeDef<Cleave_Dialect, "AsyncToken"> {
  let mnemonic = "async_token";
  let summary = "a communication in flight, and the value it will deliver";
  let description = [{
    What a `*_start` op returns: a handle on a collective or point-to-point
    transfer that runs while later ops compute. `cleave.wait` blocks until
    it is done and yields `valueType`, the tensor the transfer delivers
    (the reduced, gathered, scattered or received value); a send delivers
    nothing and its token has no value type.

    ```mlir
    !cleave.async_token<tensor<64xf32>>   // an all-reduce, a gather, a receive
    !cleave.async_token                   // a send
    ```
  }];
  let parameters = (ins OptionalParameter<"::mlir::Type">:$valueType);
  let assemblyFormat = "(`<` $valueType^ `>`)?";
}

#endif // CLEAVE_TYPES_TD
