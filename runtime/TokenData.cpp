//===- TokenData.cpp - the token file and the batches it gives ------------===//

#include "runtime/TokenData.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace cleave::runtime;

namespace {

int32_t littleInt32(const unsigned char *p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                 uint32_t(p[3]) << 24);
}

template <typename T>
void writeWindow(const TokenData &data, int64_t start, int64_t seqLen,
                 T *out) {
  int64_t n = data.size();
  int64_t pos = start;
  for (int64_t t = 0; t < seqLen; ++t) {
    out[t] = T(data[pos]);
    if (++pos == n)
      pos = 0;
  }
}

bool isTokenType(DType dtype) {
  return dtype == DType::I32 || dtype == DType::I64 || dtype == DType::U16 ||
         dtype == DType::U32 || dtype == DType::U64;
}

} // namespace

Status TokenData::read(const std::string &path, TokenData &out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open the token file: " +
                         std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": not a token file (not a regular file)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open the token file: " +
                         std::strerror(errno));
  // One read of the whole file: token shards are hundreds of megabytes.
  std::vector<unsigned char> raw(static_cast<size_t>(st.st_size));
  if (!in.read(reinterpret_cast<char *>(raw.data()), std::streamsize(raw.size())))
    return Status::error(path + ": reading the token file failed");
  if (raw.empty())
    return Status::error(path + ": the token file is empty");

  out = TokenData();
  out.path_ = path;
  size_t begin = 0;
  if (raw.size() >= kLlmcHeaderBytes && littleInt32(raw.data()) == kLlmcMagic) {
    // llm.c's format; as models/tokenizer.py, the magic is what tells it
    // from a flat file.
    int32_t version = littleInt32(raw.data() + 4);
    int32_t count = littleInt32(raw.data() + 8);
    if (version != kLlmcVersion)
      return Status::error(path + ": llm.c token file of version " +
                           std::to_string(version) + ", expected " +
                           std::to_string(kLlmcVersion));
    size_t body = raw.size() - kLlmcHeaderBytes;
    if (count < 0 || uint64_t(count) * 2 != body)
      return Status::error(path + ": the llm.c header says " +
                           std::to_string(count) + " tokens (" +
                           std::to_string(int64_t(count) * 2) +
                           " bytes), but " + std::to_string(body) +
                           " bytes follow the header");
    out.llmc_ = true;
    begin = kLlmcHeaderBytes;
  } else if (raw.size() % 2) {
    return Status::error(path + ": " + std::to_string(raw.size()) +
                         " bytes, an odd size for a file of uint16 tokens");
  }
  size_t n = (raw.size() - begin) / 2;
  if (n == 0)
    return Status::error(path + ": the token file holds no tokens");
  out.tokens_.resize(n);
  for (size_t i = 0; i < n; ++i)
    out.tokens_[i] = uint16_t(raw[begin + 2 * i] | raw[begin + 2 * i + 1] << 8);
  return Status::ok();
}

TokenData TokenData::fromTokens(std::vector<uint16_t> tokens,
                                std::string name) {
  TokenData out;
  out.path_ = std::move(name);
  out.tokens_ = std::move(tokens);
  return out;
}

Status TokenData::checkWindow(int64_t seqLen) const {
  if (size() < seqLen + 1)
    return Status::error(path_ + ": " + std::to_string(size()) +
                         " tokens, fewer than one sample needs (sequence "
                         "length " +
                         std::to_string(seqLen) + " + 1 = " +
                         std::to_string(seqLen + 1) + ")");
  return Status::ok();
}

int64_t TokenData::windowStart(int64_t step, int64_t globalBatch,
                               int64_t seqLen, int64_t sample) const {
  // (step*B + sample)*T mod N without overflow for any step a run reaches:
  // reduce each factor first.
  using u128 = unsigned __int128;
  u128 index = u128(step) * u128(globalBatch) + u128(sample);
  return int64_t((index % u128(size())) * u128(seqLen) % u128(size()));
}

Status TokenData::fill(int64_t step, int64_t globalBatch, int64_t seqLen,
                       int64_t firstSample, int64_t count,
                       const TensorRef &tokens,
                       const TensorRef &targets) const {
  CLEAVE_CHECK(checkWindow(seqLen));
  for (const TensorRef *t : {&tokens, &targets}) {
    if (!t->data)
      continue;
    const char *what = t == &tokens ? "token ids" : "targets";
    if (!isTokenType(t->dtype))
      return Status::error(std::string("the ") + what + " tensor has type " +
                           dtypeName(t->dtype) +
                           ", expected i32, i64, u16, u32 or u64");
    if (t->shape != std::vector<int64_t>{count, seqLen})
      return Status::error(std::string("the ") + what +
                           " tensor does not have shape [" +
                           std::to_string(count) + ", " +
                           std::to_string(seqLen) + "]");
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t start = windowStart(step, globalBatch, seqLen, firstSample + i);
    int64_t next = start + 1 == size() ? 0 : start + 1;
    for (int pass = 0; pass < 2; ++pass) {
      const TensorRef &t = pass == 0 ? tokens : targets;
      if (!t.data)
        continue;
      int64_t from = pass == 0 ? start : next;
      int64_t row = i * seqLen;
      switch (t.dtype) {
      case DType::I32: writeWindow(*this, from, seqLen, t.as<int32_t>() + row); break;
      case DType::I64: writeWindow(*this, from, seqLen, t.as<int64_t>() + row); break;
      case DType::U16: writeWindow(*this, from, seqLen, t.as<uint16_t>() + row); break;
      case DType::U32: writeWindow(*this, from, seqLen, t.as<uint32_t>() + row); break;
      case DType::U64: writeWindow(*this, from, seqLen, t.as<uint64_t>() + row); break;
      default: break;
      }
    }
  }
  return Status::ok();
}
