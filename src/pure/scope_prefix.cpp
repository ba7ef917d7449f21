// The longest-prefix table of idem.scope_owner (scope_prefix.hpp).
#include "pure/pure.hpp"

#include "pure/scope_prefix.hpp"

#include <algorithm>
#include <functional>

namespace idem {

void ScopePrefixTable::add(const char *prefix, size_t prefix_bytes, uint32_t owner) {
  std::string_view key(prefix, prefix_bytes);
  auto found = by_prefix_.find(key);
  if (found != by_prefix_.end()) {
    found->second = owner;
    return;
  }
  auto at = std::lower_bound(lengths_.begin(), lengths_.end(), prefix_bytes, std::greater<>());
  if (at == lengths_.end() || *at != prefix_bytes) lengths_.insert(at, prefix_bytes);
  prefixes_.emplace_back(prefix, prefix_bytes);
  by_prefix_.emplace(std::string_view(prefixes_.back()), owner);
}

bool ScopePrefixTable::find(const char *scope, size_t scope_bytes,
                            uint32_t *owner) const noexcept {
  for (size_t length : lengths_) {
    if (length > scope_bytes) continue;
    auto found = by_prefix_.find(std::string_view(scope, length));
    if (found != by_prefix_.end()) {
      *owner = found->second;
      return true;
    }
  }
  return false;
}

void ScopePrefixTable::clear() noexcept {
  by_prefix_.clear();
  prefixes_.clear();
  lengths_.clear();
}

void ScopePrefixTable::swap(ScopePrefixTable &other) noexcept {
  prefixes_.swap(other.prefixes_);
  by_prefix_.swap(other.by_prefix_);
  lengths_.swap(other.lengths_);
}

namespace {
ScopePrefixTable current;
ScopePrefixTable building;
}  // namespace

void begin_scope_owners() { building.clear(); }

void add_scope_owner(const char *prefix, size_t prefix_bytes, uint32_t owner) {
  building.add(prefix, prefix_bytes, owner);
}

void publish_scope_owners() noexcept {
  current.swap(building);
  building.clear();
}

bool find_scope_owner(const char *scope, size_t scope_bytes, uint32_t *owner) noexcept {
  return current.find(scope, scope_bytes, owner);
}

}  // namespace idem
