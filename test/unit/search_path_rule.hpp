// The hostile-search_path rule (docs/security.md) for one kept statement's
// text, checked by test/unit/statements_test.cpp on every statement. A
// caller may run idem's functions under any search_path; the text must then
// name nothing that the path could redirect:
//   - every operator is OPERATOR(pg_catalog.op): a bare =, <>, <=, +, -, ||
//     (any run of + - * / < > = ~ ! @ # % ^ & | ` ?) is flagged, except the
//     = of an assignment in a SET list (`SET column = value`), which is
//     syntax, not an operator;
//   - every function call (a name followed by "(") is qualified with
//     pg_catalog. or idem.;
//   - every relation after FROM, JOIN, INTO or UPDATE is qualified with
//     idem. or pg_catalog., or is a name the statement defines itself
//     (WITH name AS (...));
//   - every cast ::type names pg_catalog. or idem., or is one of the SQL
//     keyword types the grammar itself maps to pg_catalog (int, integer,
//     bigint, smallint, boolean, real, float, double, numeric, decimal,
//     char, character, varchar, bit, interval, time, timestamp);
//   - constructs that find an operator by name are flagged: IN (...),
//     BETWEEN, LIKE, ILIKE, SIMILAR, NULLIF, IS [NOT] DISTINCT FROM and the
//     simple CASE x WHEN y (all look up = or another operator under the
//     path); CAST(x AS t) is flagged too: write x::schema.t.
// Keywords: the tokenizer skips string literals ('...', E'...'), quoted
// identifiers ("...") and parameters ($n). These words are SQL syntax, so a
// "(" after them is no function call: AND OR NOT ANY ALL SOME ARRAY EXISTS
// VALUES AS ON CONFLICT WHERE SELECT WHEN THEN ELSE RETURNING BY USING and
// the constructs COALESCE, GREATEST and LEAST (no function lookup:
// GREATEST and LEAST compare with the type's default btree operator class,
// not an operator found by name). ANY/ALL take the operator written before
// them, which the operator rule checks. A word after AS is a name being
// defined (an alias or a CTE), never a call. Not understood, and used by no
// kept statement: comments (-- and /* read as operators, so are flagged),
// dollar quoting, and SELECT * or count(*) (the * is flagged).
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace search_path_rule {

enum class Kind { word, quoted, string, parameter, number, op, punct };

struct Token {
  Kind kind;
  std::string text;  // a word lowercased; a string literal with its quotes
};

inline std::vector<Token> tokenize(const std::string &sql) {
  std::vector<Token> tokens;
  const auto op_char = [](char c) {
    return std::string("+-*/<>=~!@#%^&|`?").find(c) != std::string::npos;
  };
  size_t i = 0;
  const size_t n = sql.size();
  while (i < n) {
    char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '\'' || ((c == 'E' || c == 'e') && i + 1 < n && sql[i + 1] == '\'')) {
      size_t start = i;
      i += c == '\'' ? 1 : 2;
      while (i < n) {
        if (sql[i] == '\\' && c != '\'') {
          i += 2;  // E'' strings escape with a backslash
        } else if (sql[i] == '\'' && i + 1 < n && sql[i + 1] == '\'') {
          i += 2;  // '' inside a literal
        } else if (sql[i] == '\'') {
          break;
        } else {
          ++i;
        }
      }
      i = i < n ? i + 1 : n;
      tokens.push_back({Kind::string, sql.substr(start, i - start)});
    } else if (c == '"') {
      size_t end = sql.find('"', i + 1);
      end = end == std::string::npos ? n : end + 1;
      tokens.push_back({Kind::quoted, sql.substr(i, end - i)});
      i = end;
    } else if (c == '$' && i + 1 < n && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      size_t start = i++;
      while (i < n && std::isdigit(static_cast<unsigned char>(sql[i]))) ++i;
      tokens.push_back({Kind::parameter, sql.substr(start, i - start)});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::string word;
      while (i < n &&
             (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '_' || sql[i] == '$'))
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(sql[i++])));
      tokens.push_back({Kind::word, word});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      while (i < n && (std::isdigit(static_cast<unsigned char>(sql[i])) || sql[i] == '.')) ++i;
      tokens.push_back({Kind::number, sql.substr(start, i - start)});
    } else if (c == ':' && i + 1 < n && sql[i + 1] == ':') {
      tokens.push_back({Kind::punct, "::"});
      i += 2;
    } else if (op_char(c)) {
      size_t start = i;
      while (i < n && op_char(sql[i])) ++i;
      tokens.push_back({Kind::op, sql.substr(start, i - start)});
    } else {
      tokens.push_back({Kind::punct, std::string(1, c)});
      ++i;
    }
  }
  return tokens;
}

// Syntax words after which "(" is no function call (see the head comment).
inline bool is_syntax_word(const std::string &word) {
  static const std::set<std::string> words = {
      "and",  "or",   "not",  "any",    "all",       "some", "array",  "exists",
      "values", "as", "on",   "conflict", "where",   "select", "when", "then",
      "else", "returning", "by", "using", "coalesce", "greatest", "least"};
  return words.count(word) != 0;
}

// Words that find an operator by name, or that hide a cast's type.
inline bool is_by_name_construct(const std::string &word) {
  static const std::set<std::string> words = {"in",      "between", "like", "ilike",
                                              "similar", "nullif",  "cast"};
  return words.count(word) != 0;
}

// Type names the grammar maps to pg_catalog's types by itself.
inline bool is_keyword_type(const std::string &word) {
  static const std::set<std::string> words = {
      "int",     "integer", "bigint", "smallint",  "boolean", "real",     "float",
      "double",  "numeric", "decimal", "char",     "character", "varchar", "bit",
      "interval", "time",   "timestamp"};
  return words.count(word) != 0;
}

inline bool is_name(const Token &token) {
  return token.kind == Kind::word || token.kind == Kind::quoted;
}

// The dotted name starting at tokens[i]: its parts, and the index after it.
inline std::vector<std::string> read_name(const std::vector<Token> &tokens, size_t *i) {
  std::vector<std::string> parts{tokens[*i].text};
  ++*i;
  while (*i + 1 < tokens.size() && tokens[*i].text == "." && is_name(tokens[*i + 1])) {
    parts.push_back(tokens[*i + 1].text);
    *i += 2;
  }
  return parts;
}

inline std::string joined(const std::vector<std::string> &parts) {
  std::string out;
  for (const std::string &part : parts) out += (out.empty() ? "" : ".") + part;
  return out;
}

inline bool qualified(const std::vector<std::string> &parts) {
  return parts.size() >= 2 && (parts[0] == "pg_catalog" || parts[0] == "idem");
}

// What in `sql` breaks the rule, one message each; empty when nothing does.
inline std::vector<std::string> violations(const std::string &sql) {
  const std::vector<Token> tokens = tokenize(sql);
  std::vector<std::string> found;
  // The statement's own relations: WITH name AS (...), name AS (...).
  std::set<std::string> ctes;
  for (size_t i = 0; i + 2 < tokens.size(); ++i)
    if (is_name(tokens[i]) && tokens[i + 1].text == "as" && tokens[i + 2].text == "(")
      ctes.insert(tokens[i].text);

  const auto text_at = [&tokens](size_t i) { return i < tokens.size() ? tokens[i].text : ""; };
  int depth = 0;
  int set_depth = -1;  // the depth of the SET list being read, or -1
  size_t i = 0;
  while (i < tokens.size()) {
    const Token &token = tokens[i];
    const std::string before = i > 0 ? tokens[i - 1].text : "";
    if (token.text == "(") ++depth;
    if (token.text == ")" && --depth < set_depth) set_depth = -1;

    if (token.kind == Kind::op) {
      bool assignment = token.text == "=" && set_depth == depth && i >= 2 &&
                        is_name(tokens[i - 1]) &&
                        (tokens[i - 2].text == "set" || tokens[i - 2].text == ",");
      if (!assignment) found.push_back("bare operator " + token.text);
      ++i;
    } else if (token.text == "::") {
      size_t at = i + 1;
      if (at >= tokens.size() || !is_name(tokens[at])) {
        found.push_back("a cast without a type name");
        ++i;
        continue;
      }
      std::vector<std::string> type = read_name(tokens, &at);
      if (!qualified(type) && !(type.size() == 1 && is_keyword_type(type[0])))
        found.push_back("unqualified cast ::" + joined(type));
      i = at;
    } else if (token.kind != Kind::word) {
      ++i;
    } else if (token.text == "operator" && text_at(i + 1) == "(") {
      // OPERATOR(pg_catalog.op)
      if (text_at(i + 2) == "pg_catalog" && text_at(i + 3) == "." && i + 4 < tokens.size() &&
          tokens[i + 4].kind == Kind::op && text_at(i + 5) == ")") {
        i += 6;
      } else {
        found.push_back("OPERATOR(...) not of pg_catalog");
        i += 2;
        while (i < tokens.size() && tokens[i].text != ")") ++i;  // past the operator
        ++i;
      }
    } else if (token.text == "as") {
      i += i + 1 < tokens.size() && is_name(tokens[i + 1]) ? 2 : 1;  // a name defined here
    } else if (token.text == "set") {
      set_depth = depth;
      ++i;
    } else if (token.text == "distinct" && (before == "is" || before == "not")) {
      found.push_back("IS DISTINCT FROM finds = by name");
      i += text_at(i + 1) == "from" ? 2 : 1;
    } else if (token.text == "case" && text_at(i + 1) != "when") {
      found.push_back("a simple CASE finds = by name");
      ++i;
    } else if (is_by_name_construct(token.text)) {
      found.push_back(token.text == "cast" ? std::string("CAST(...): write ::schema.type")
                                           : "a construct that finds its operator by name: " +
                                                 token.text);
      ++i;
    } else if (token.text == "from" || token.text == "join" || token.text == "into" ||
               (token.text == "update" && before != "for" && before != "do")) {
      if (token.text == "from" && set_depth == depth) set_depth = -1;  // UPDATE ... FROM
      size_t at = i + 1;
      if (at < tokens.size() && is_name(tokens[at])) {
        std::vector<std::string> relation = read_name(tokens, &at);
        if (!qualified(relation) && !(relation.size() == 1 && ctes.count(relation[0])))
          found.push_back("unqualified relation " + joined(relation));
      }
      i = at;
    } else if ((token.text == "where" || token.text == "returning") && set_depth == depth) {
      set_depth = -1;  // the SET list ends
      ++i;
    } else if (is_syntax_word(token.text)) {
      ++i;
    } else {
      size_t at = i;
      std::vector<std::string> name = read_name(tokens, &at);
      if (text_at(at) == "(" && !qualified(name))
        found.push_back("unqualified function " + joined(name));
      i = at;
    }
  }
  return found;
}

}  // namespace search_path_rule
