#include "pure/pure.hpp"

#include "pure/hashing.hpp"

#include <openssl/evp.h>

#include <string>

#include "pure/errors.hpp"
#include "pure/jcs.hpp"

namespace idem {

void sha256_hex(const void *data, size_t length, char *out) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  if (EVP_Digest(data, length, digest, &digest_length, EVP_sha256(), nullptr) != 1 ||
      digest_length * 2 != sha256_hex_length)
    throw Error(sqlstate::internal, "OpenSSL could not compute SHA-256", "",
                "Check the OpenSSL installation the server uses.");
  static const char hex_digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < digest_length; ++i) {
    out[2 * i] = hex_digits[digest[i] >> 4];
    out[2 * i + 1] = hex_digits[digest[i] & 0x0f];
  }
  out[sha256_hex_length] = '\0';
}

bool canonical_json_sha256_hex(const char *json, size_t length, char *out,
                               bool (*interrupt_pending)()) {
  std::string canonical;
  try {
    canonical = jcs::canonicalize(std::string_view(json, length), interrupt_pending);
  } catch (const jcs::Interrupted &) {
    return false;  // the parser's memory is freed by now
  }
  sha256_hex(canonical.data(), canonical.size(), out);
  return true;
}

}  // namespace idem
