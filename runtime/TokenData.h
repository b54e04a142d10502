//===- TokenData.h - the token file and the batches it gives --*- C++ -*-===//
//
// A token file is either flat little-endian uint16 or llm.c's format: a
// header of 256 little-endian int32 (magic 20240520, version 1, the token
// count, zeros) followed by the tokens as uint16 (models/tokenizer.py writes
// both). The batches follow DESIGN.md "Training semantics": sample j of the
// global batch at step s is the window of T+1 tokens starting at token
// (s*B + j)*T, wrapping at the end of the file; its first T tokens are the
// input ids, its last T the targets.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_TOKENDATA_H
#define CLEAVE_RUNTIME_TOKENDATA_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

class TokenData {
public:
  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr int32_t kLlmcVersion = 1;
  static constexpr size_t kLlmcHeaderBytes = 256 * 4;

  /// Reads the whole file. Errors name the file: missing or empty, an odd
  /// number of token bytes, an llm.c header whose version or token count
  /// disagrees with the file.
  static Status read(const std::string &path, TokenData &out);
  /// Tokens given directly (tests).
  static TokenData fromTokens(std::vector<uint16_t> tokens,
                              std::string name = "tokens");

  /// An error unless the file holds at least one window of `seqLen` + 1
  /// tokens.
  Status checkWindow(int64_t seqLen) const;

  const std::string &path() const { return path_; }
  bool isLlmc() const { return llmc_; }
  int64_t size() const { return int64_t(tokens_.size()); }
  uint16_t operator[](int64_t i) const { return tokens_[i]; }

  /// The first token of sample `sample` (index within the global batch) of
  /// step `step`, as an index into the file (already wrapped).
  int64_t windowStart(int64_t step, int64_t globalBatch, int64_t seqLen,
                      int64_t sample) const;

  /// Writes the ids (`tokens`) and targets (`targets`) of `count` samples
  /// starting at global sample `firstSample` of step `step`: both
  /// [count, seqLen] integer tensors (i32, i64, u16, u32 or u64). Either
  /// may have null data, meaning it is not wanted.
  Status fill(int64_t step, int64_t globalBatch, int64_t seqLen,
              int64_t firstSample, int64_t count, const TensorRef &tokens,
              const TensorRef &targets) const;

private:
  std::string path_;
  bool llmc_ = false;
  std::vector<uint16_t> tokens_;
};

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_TOKENDATA_H
