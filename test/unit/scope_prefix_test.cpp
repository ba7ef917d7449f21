// The longest-prefix lookup of idem.scope_owner (src/pure/scope_prefix.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../../src/pure/scope_prefix.hpp"

namespace {

using idem::ScopePrefixTable;

void add(ScopePrefixTable &table, const std::string &prefix, uint32_t owner) {
  table.add(prefix.data(), prefix.size(), owner);
}

// 0: not covered.
uint32_t owner_of(const ScopePrefixTable &table, const std::string &scope) {
  uint32_t owner = 0;
  return table.find(scope.data(), scope.size(), &owner) ? owner : 0;
}

TEST(ScopePrefix, EmptyTableCoversNothing) {
  ScopePrefixTable table;
  EXPECT_EQ(owner_of(table, "billing"), 0u);
  EXPECT_EQ(owner_of(table, ""), 0u);
}

TEST(ScopePrefix, ExactAndPrefixMatches) {
  ScopePrefixTable table;
  add(table, "billing", 10);
  EXPECT_EQ(owner_of(table, "billing"), 10u);
  EXPECT_EQ(owner_of(table, "billing.refunds"), 10u);
  EXPECT_EQ(owner_of(table, "billin"), 0u);
  EXPECT_EQ(owner_of(table, "Billing"), 0u);
  EXPECT_EQ(owner_of(table, "shipping"), 0u);
}

TEST(ScopePrefix, LongestPrefixWins) {
  ScopePrefixTable table;
  add(table, "", 1);
  add(table, "billing.", 2);
  add(table, "billing.refunds.", 3);
  add(table, "b", 4);
  EXPECT_EQ(owner_of(table, "billing.refunds.eu"), 3u);
  EXPECT_EQ(owner_of(table, "billing.refunds."), 3u);
  EXPECT_EQ(owner_of(table, "billing.refunds"), 2u);
  EXPECT_EQ(owner_of(table, "billing."), 2u);
  EXPECT_EQ(owner_of(table, "billing"), 4u);
  EXPECT_EQ(owner_of(table, "shipping"), 1u);
  EXPECT_EQ(owner_of(table, ""), 1u);
}

TEST(ScopePrefix, InsertionOrderDoesNotMatter) {
  ScopePrefixTable table;
  add(table, "a.b.c", 3);
  add(table, "a", 1);
  add(table, "a.b", 2);
  EXPECT_EQ(owner_of(table, "a.b.c.d"), 3u);
  EXPECT_EQ(owner_of(table, "a.b.x"), 2u);
  EXPECT_EQ(owner_of(table, "a.x"), 1u);
}

TEST(ScopePrefix, SamePrefixAddedAgainReplacesTheOwner) {
  ScopePrefixTable table;
  add(table, "t", 1);
  add(table, "t", 2);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(owner_of(table, "tenant"), 2u);
}

TEST(ScopePrefix, BytesNotCStrings) {
  ScopePrefixTable table;
  add(table, std::string("a\0b", 3), 7);
  EXPECT_EQ(owner_of(table, std::string("a\0bc", 4)), 7u);
  EXPECT_EQ(owner_of(table, "a"), 0u);
  // Multibyte characters: a UTF-8 prefix matches at a character boundary.
  add(table, "caf\xc3\xa9", 8);
  EXPECT_EQ(owner_of(table, "caf\xc3\xa9-eu"), 8u);
  EXPECT_EQ(owner_of(table, "cafe"), 0u);
}

TEST(ScopePrefix, ClearEmptiesTheTable) {
  ScopePrefixTable table;
  add(table, "", 1);
  add(table, "x", 2);
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(owner_of(table, "x"), 0u);
  add(table, "y", 3);
  EXPECT_EQ(owner_of(table, "y"), 3u);
}

// A thousand tenants, each with a prefix of its own and some with nested
// ones: every scope finds its own tenant's row.
TEST(ScopePrefix, AThousandRows) {
  ScopePrefixTable table;
  for (uint32_t i = 1; i <= 1000; ++i) {
    add(table, "tenant-" + std::to_string(i) + ".", i);
    if (i % 10 == 0) add(table, "tenant-" + std::to_string(i) + ".admin.", 10000 + i);
  }
  EXPECT_EQ(table.size(), 1100u);
  for (uint32_t i = 1; i <= 1000; ++i) {
    std::string base = "tenant-" + std::to_string(i) + ".";
    EXPECT_EQ(owner_of(table, base + "orders"), i);
    EXPECT_EQ(owner_of(table, base + "admin.x"), i % 10 == 0 ? 10000 + i : i);
  }
  EXPECT_EQ(owner_of(table, "tenant-1001.orders"), 0u);
  EXPECT_EQ(owner_of(table, "tenant-1"), 0u);
}

}  // namespace

namespace {

TEST(ScopePrefix, SwapKeepsEveryLookup) {
  idem::ScopePrefixTable a;
  idem::ScopePrefixTable b;
  add(a, "tenant-a.", 1);
  add(b, "tenant-b.", 2);
  a.swap(b);
  EXPECT_EQ(owner_of(a, "tenant-b.x"), 2u);
  EXPECT_EQ(owner_of(a, "tenant-a.x"), 0u);
  EXPECT_EQ(owner_of(b, "tenant-a.x"), 1u);
}

// The backend's generations: what is being built is not seen until published.
TEST(ScopePrefix, GenerationsPublishAtOnce) {
  idem::begin_scope_owners();
  idem::add_scope_owner("x", 1, 5);
  uint32_t owner = 0;
  EXPECT_FALSE(idem::find_scope_owner("xy", 2, &owner));
  idem::publish_scope_owners();
  EXPECT_TRUE(idem::find_scope_owner("xy", 2, &owner));
  EXPECT_EQ(owner, 5u);
  idem::begin_scope_owners();
  idem::publish_scope_owners();
  EXPECT_FALSE(idem::find_scope_owner("xy", 2, &owner));
}

}  // namespace
