// The policy table's storage (policy_table.hpp): scope names are owned by a
// deque, whose elements never move, and the map is keyed by views of them,
// so a claim looks a scope up by a view of its argument's bytes.
#include "pure/pure.hpp"

#include "pure/policy_table.hpp"

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace idem {

namespace {

struct Generation {
  std::deque<std::string> names;
  std::unordered_map<std::string_view, ScopePolicy> by_scope;
};

Generation current;
Generation building;

}  // namespace

void begin_policies() { building = Generation(); }

void add_policy(const char *scope, size_t scope_bytes, const ScopePolicy &policy) {
  building.names.emplace_back(scope, scope_bytes);
  building.by_scope[std::string_view(building.names.back())] = policy;
}

void publish_policies() noexcept {
  std::swap(current, building);
  building.by_scope.clear();
  building.names.clear();
}

const ScopePolicy *find_policy(const char *scope, size_t scope_bytes) noexcept {
  if (current.by_scope.empty()) return nullptr;
  auto found = current.by_scope.find(std::string_view(scope, scope_bytes));
  return found == current.by_scope.end() ? nullptr : &found->second;
}

}  // namespace idem
