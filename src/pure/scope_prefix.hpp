// The per-backend copy of idem.scope_owner: scope prefixes and the role that
// owns each, and the longest-prefix lookup every covered call makes. Pure
// C++ (no Postgres header): src/policy/scope_owner.cpp fills a table when
// idem.scope_owner changed and reads it at every covered call.
//
// A lookup hashes the scope's prefixes of the lengths the table has, longest
// first, so it costs one hash probe per distinct prefix length (a handful in
// practice), not a scan of the rows. Prefixes are compared byte by byte: a
// valid string that is a byte prefix of another ends on one of its character
// boundaries in every server encoding (both are read from their first byte
// on), so this is SQL's starts_with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem {

class ScopePrefixTable {
 public:
  // Adds one row; a prefix added again replaces the earlier owner. May throw
  // std::bad_alloc.
  void add(const char *prefix, size_t prefix_bytes, uint32_t owner);

  // The owner of the longest prefix scope starts with ('' covers every
  // scope); false when no row covers it. Allocates nothing.
  bool find(const char *scope, size_t scope_bytes, uint32_t *owner) const noexcept;

  size_t size() const noexcept { return by_prefix_.size(); }
  void clear() noexcept;
  // Exchanges the contents; the views stay valid (no element moves).
  void swap(ScopePrefixTable &other) noexcept;

 private:
  std::deque<std::string> prefixes_;  // owns the bytes by_prefix_'s keys view; never move
  std::unordered_map<std::string_view, uint32_t> by_prefix_;
  std::vector<size_t> lengths_;  // every prefix length in the table, once, longest first
};

// The backend's one table, in generations as policy_table.hpp's: a new one
// is built while the old stays readable, then published.
void begin_scope_owners();
// May throw std::bad_alloc.
void add_scope_owner(const char *prefix, size_t prefix_bytes, uint32_t owner);
void publish_scope_owners() noexcept;
bool find_scope_owner(const char *scope, size_t scope_bytes, uint32_t *owner) noexcept;

}  // namespace idem
