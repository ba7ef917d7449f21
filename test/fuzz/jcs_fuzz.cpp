// libFuzzer target for idem::jcs::canonicalize. Beyond the sanitizers'
// checks it asserts two properties: only the documented errors come out, and
// canonical output is a fixed point (accepted again, and unchanged).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "../../src/pure/errors.hpp"
#include "../../src/pure/jcs.hpp"

namespace {

bool documented(const idem::Error &e) {
  return std::strcmp(e.sqlstate(), idem::sqlstate::invalid_json) == 0 ||
         std::strcmp(e.sqlstate(), idem::sqlstate::too_deep) == 0 ||
         std::strcmp(e.sqlstate(), idem::sqlstate::inexact_number) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char *>(data), size);
  std::string once;
  try {
    once = idem::jcs::canonicalize(input);
  } catch (const idem::Error &e) {
    if (!documented(e)) {
      std::fprintf(stderr, "undocumented error %s: %s\n", e.sqlstate(), e.what());
      std::abort();
    }
    return 0;
  }
  std::string twice;
  try {
    twice = idem::jcs::canonicalize(once);
  } catch (const idem::Error &e) {
    std::fprintf(stderr, "canonical output refused (%s): %s\n", e.sqlstate(), e.what());
    std::abort();
  }
  if (twice != once) {
    std::fprintf(stderr, "not idempotent:\n  once:  %s\n  twice: %s\n", once.c_str(), twice.c_str());
    std::abort();
  }
  return 0;
}
