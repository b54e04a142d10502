//===- ProgramSeal.cpp - checksum and compile fingerprint of programs ------===//

#include "runtime/ProgramSeal.h"
#include "runtime/Sha256.h"

using namespace cleave::runtime;

namespace {

// Program's fields 50 and 51 (program.proto), both length-delimited.
constexpr int kFingerprintField = 50;
constexpr int kSha256Field = 51;
constexpr size_t kDigestHex = 64;

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(char(uint8_t(value) | 0x80));
    value >>= 7;
  }
  out.push_back(char(value));
}

void appendField(std::string &out, int number, const std::string &value) {
  appendVarint(out, (uint64_t(number) << 3) | 2); // wire type 2: bytes
  appendVarint(out, value.size());
  out += value;
}

/// The bytes the sha256 field ends a sealed file with, before the digest.
std::string sha256FieldHead() {
  std::string head;
  appendVarint(head, (uint64_t(kSha256Field) << 3) | 2);
  appendVarint(head, kDigestHex);
  return head;
}

} // namespace

std::string cleave::runtime::sha256Hex(const std::string &bytes) {
  Sha256 hash;
  hash.update(bytes.data(), bytes.size());
  return hash.hexDigest();
}

std::string
cleave::runtime::compileFingerprint(const std::vector<std::string> &programs) {
  std::vector<std::string> digests;
  for (const std::string &p : programs)
    digests.push_back(sha256Hex(p));
  return compileFingerprintOfDigests(digests);
}

std::string cleave::runtime::compileFingerprintOfDigests(
    const std::vector<std::string> &digests) {
  Sha256 hash;
  for (const std::string &digest : digests)
    hash.update(digest.data(), digest.size());
  return hash.hexDigest();
}

std::string cleave::runtime::sealTrailer(Sha256 hasher,
                                         const std::string &fingerprint) {
  std::string trailer;
  appendField(trailer, kFingerprintField, fingerprint);
  hasher.update(trailer.data(), trailer.size());
  appendField(trailer, kSha256Field, hasher.hexDigest());
  return trailer;
}

std::string cleave::runtime::sealProgram(const std::string &program,
                                         const std::string &fingerprint) {
  Sha256 hasher;
  hasher.update(program.data(), program.size());
  return program + sealTrailer(hasher, fingerprint);
}

Status cleave::runtime::checkProgramSeal(const std::string &bytes,
                                         const std::string &name) {
  std::string head = sha256FieldHead();
  size_t trailer = head.size() + kDigestHex;
  if (bytes.size() < trailer ||
      bytes.compare(bytes.size() - trailer, head.size(), head) != 0)
    return Status::error(
        name + ": the file does not end with its checksum (field 'sha256'): "
               "it is truncated, was changed, or was written by an older "
               "cleave-compile; copy the compile's output again or recompile");
  size_t body = bytes.size() - trailer;
  std::string expected = bytes.substr(body + head.size());
  std::string actual = sha256Hex(bytes.substr(0, body));
  if (actual != expected)
    return Status::error(
        name + ": checksum mismatch: bytes [0, " + std::to_string(body) +
        ") have SHA-256 " + actual + ", but the file's checksum says " +
        expected +
        ": the file changed after cleave-compile wrote it (a flipped byte, "
        "a partial copy); copy the compile's output again or recompile");
  return Status::ok();
}
