// Request fingerprints: SHA-256 (OpenSSL EVP) as lowercase hex. No Postgres
// header: failures are thrown as idem::Error.
#pragma once

#include <cstddef>

namespace idem {

constexpr size_t sha256_hex_length = 64;

// Writes the hex digest and a terminating NUL into out[65].
void sha256_hex(const void *data, size_t length, char *out);

// SHA-256 of the RFC 8785 canonical form of one UTF-8 JSON text. Returns
// false, having written nothing, when interrupt_pending (asked now and then,
// jcs.hpp) said to stop: the caller serves the interrupt, then may ask again.
bool canonical_json_sha256_hex(const char *json, size_t length, char *out,
                               bool (*interrupt_pending)());

}  // namespace idem
