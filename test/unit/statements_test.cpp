// The kept statements' texts (src/pure/statement_text.hpp): each follows the
// hostile-search_path rule (search_path_rule.hpp), and docs/kept-statements.sql
// prints them as they are (`make kept-statements` writes it again).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kept_statements_file.hpp"
#include "pure/statement_text.hpp"
#include "search_path_rule.hpp"

namespace {

using search_path_rule::violations;
using Found = std::vector<std::string>;

TEST(StatementTable, OneRowPerStatementInOrder) {
  std::set<std::string> names;
  for (int i = 0; i < idem::statement_count; ++i) {
    const idem::StatementText &row = idem::statement_texts[i];
    EXPECT_EQ(static_cast<int>(row.statement), i) << row.name;
    EXPECT_TRUE(names.insert(row.name).second) << "twice: " << row.name;
    ASSERT_NE(row.sql, nullptr) << row.name;
    EXPECT_NE(std::string(row.sql).find_first_not_of(" \n"), std::string::npos) << row.name;
    EXPECT_EQ(std::string(row.sql).find(';'), std::string::npos) << row.name << ": one statement";
  }
  EXPECT_STREQ(idem::statement_text(idem::Statement::stored_answer).name, "stored_answer");
}

// No exception: every statement names every operator, function, relation
// and type it uses, so no search_path can redirect any of them.
TEST(StatementTable, EveryStatementFollowsTheSearchPathRule) {
  for (const idem::StatementText &row : idem::statement_texts)
    EXPECT_EQ(violations(row.sql), Found{}) << row.name << ":\n" << row.sql;
}

TEST(StatementTable, DocsFileIsCurrent) {
  std::ifstream file("docs/kept-statements.sql");  // run.sh runs from the tree's root
  ASSERT_TRUE(file.good()) << "docs/kept-statements.sql not found (run from the tree's root)";
  std::stringstream content;
  content << file.rdbuf();
  EXPECT_TRUE(content.str() == kept_statements_file())
      << "docs/kept-statements.sql differs from the statements' sources: run "
         "`make kept-statements` and commit the file";
}

// The checker itself: what it must flag, and what it must let through.

TEST(SearchPathRule, FlagsBareOperators) {
  EXPECT_EQ(violations("SELECT a FROM idem.t WHERE a = $1"), Found{"bare operator ="});
  EXPECT_EQ(violations("SELECT a <> b, a || b, a - 1 FROM idem.t"),
            (Found{"bare operator <>", "bare operator ||", "bare operator -"}));
  EXPECT_EQ(violations("SELECT a OPERATOR(=) b"), Found{"OPERATOR(...) not of pg_catalog"});
  EXPECT_EQ(violations("SELECT a OPERATOR(public.=) b"),
            Found{"OPERATOR(...) not of pg_catalog"});
  // An = inside a SET list's value is a comparison, not the assignment.
  EXPECT_EQ(violations("UPDATE idem.t SET a = b = c"), Found{"bare operator ="});
  EXPECT_EQ(violations("UPDATE idem.t SET a = (b = c)"), Found{"bare operator ="});
}

TEST(SearchPathRule, FlagsUnqualifiedFunctions) {
  EXPECT_EQ(violations("SELECT now()"), Found{"unqualified function now"});
  EXPECT_EQ(violations("SELECT public.f($1)"), Found{"unqualified function public.f"});
  EXPECT_EQ(violations("SELECT COALESCE(lower(a), 'x') FROM idem.t"),
            Found{"unqualified function lower"});
}

TEST(SearchPathRule, FlagsUnqualifiedCasts) {
  EXPECT_EQ(violations("SELECT $1::text"), Found{"unqualified cast ::text"});
  EXPECT_EQ(violations("SELECT $1::public.mood[]"), Found{"unqualified cast ::public.mood"});
  EXPECT_EQ(violations("SELECT CAST($1 AS pg_catalog.text)"),
            Found{"CAST(...): write ::schema.type"});
}

TEST(SearchPathRule, FlagsUnqualifiedRelations) {
  EXPECT_EQ(violations("SELECT a FROM t"), Found{"unqualified relation t"});
  EXPECT_EQ(violations("SELECT a FROM idem.t JOIN public.u ON true"),
            Found{"unqualified relation public.u"});
  EXPECT_EQ(violations("INSERT INTO t (a) VALUES ($1)"), Found{"unqualified relation t"});
  EXPECT_EQ(violations("UPDATE t SET a = $1"), Found{"unqualified relation t"});
  EXPECT_EQ(violations("DELETE FROM t"), Found{"unqualified relation t"});
}

TEST(SearchPathRule, FlagsConstructsThatFindOperatorsByName) {
  EXPECT_EQ(violations("SELECT a FROM idem.t WHERE a IN ($1, $2)"),
            Found{"a construct that finds its operator by name: in"});
  EXPECT_EQ(violations("SELECT NULLIF(a, $1) FROM idem.t"),
            Found{"a construct that finds its operator by name: nullif"});
  EXPECT_EQ(violations("SELECT a IS DISTINCT FROM b FROM idem.t"),
            Found{"IS DISTINCT FROM finds = by name"});
  EXPECT_EQ(violations("SELECT CASE a WHEN 1 THEN 2 END FROM idem.t"),
            Found{"a simple CASE finds = by name"});
  EXPECT_EQ(violations("SELECT a FROM idem.t WHERE a LIKE $1"),
            Found{"a construct that finds its operator by name: like"});
}

TEST(SearchPathRule, AcceptsWhatNamesNothingByPath) {
  // Literals, quoted identifiers and parameters are not read as SQL.
  EXPECT_EQ(violations("SELECT 'a = f(b)::text', E'it\\'s = ', \"odd=name\", $1 FROM idem.t"),
            Found{});
  EXPECT_EQ(violations("SELECT 'it''s = x'"), Found{});
  // Assignments, CTEs, aliases, keyword constructs and keyword types.
  EXPECT_EQ(violations("WITH w AS (SELECT x.a FROM idem.t x FOR UPDATE SKIP LOCKED) "
                       "UPDATE idem.t AS r SET a = GREATEST(r.a, $1), b = NULL "
                       "FROM w WHERE r.a OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT w.a FROM w)) "
                       "AND EXISTS (SELECT FROM idem.u) AND $2::int IS NOT NULL "
                       "RETURNING COALESCE(r.b, LEAST(r.c, '0'::pg_catalog.int8))"),
            Found{});
  EXPECT_EQ(violations("INSERT INTO idem.t AS r (a, b) VALUES ($1, idem.f(pg_catalog.now())) "
                       "ON CONFLICT (a) DO UPDATE SET b = excluded.b "
                       "WHERE r.b OPERATOR(pg_catalog.<=) $2 RETURNING true"),
            Found{});
}

}  // namespace
