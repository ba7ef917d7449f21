// The kept statements' texts as compile-time constants, and the rules that
// derive one statement's text from another's (src/pure/statements.def uses
// them, statement_text.cpp evaluates them). A derived text is computed by
// the compiler into a constant array, as a written one is: nothing is built
// at run time, and what the server runs is what docs/kept-statements.sql
// prints. A rule that does not fit the text it is given (the line it
// rewrites is gone, say) is not a constant expression, so the build stops
// there: it calls one of the functions below whose name says what went
// wrong, none of them constexpr.
#pragma once

#include <cstddef>

namespace idem::sql_text {

// Where the build stops: the compiler names the function a rule called.
inline void rule_found_no_line_to_change() {}
inline void rule_found_more_than_one_line_to_change() {}
inline void dropped_line_leaves_a_parenthesis_open() {}
inline void derived_text_outgrew_its_room() {}

// A statement's text in a constant array: N bytes of room, NUL-terminated.
template <std::size_t N>
struct Text {
  char chars[N] = {};
  std::size_t length = 0;
};

namespace detail {

// A run of characters of a text or of a literal.
struct Span {
  const char *chars;
  std::size_t length;
};

constexpr Span span(const char *literal) {
  std::size_t length = 0;
  while (literal[length] != '\0') ++length;
  return {literal, length};
}

template <std::size_t N>
constexpr Span span(const Text<N> &text) {
  return {text.chars, text.length};
}

constexpr bool same(Span a, Span b) {
  if (a.length != b.length) return false;
  for (std::size_t i = 0; i < a.length; ++i)
    if (a.chars[i] != b.chars[i]) return false;
  return true;
}

constexpr bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether line names name as a whole word: bound_session, not
// rebound_session; $1, not $10.
constexpr bool names(Span line, Span name) {
  for (std::size_t at = 0; at + name.length <= line.length; ++at) {
    if (!same(Span{line.chars + at, name.length}, name)) continue;
    bool starts = at == 0 || !identifier_char(line.chars[at - 1]) ||
                  !identifier_char(name.chars[0]);
    std::size_t end = at + name.length;
    bool ends = end == line.length || !identifier_char(line.chars[end]) ||
                !identifier_char(name.chars[name.length - 1]);
    if (starts && ends) return true;
  }
  return false;
}

// The line of text that starts at from, without its newline.
constexpr Span line_at(Span text, std::size_t from) {
  std::size_t end = from;
  while (end < text.length && text.chars[end] != '\n') ++end;
  return {text.chars + from, end - from};
}

template <std::size_t N>
constexpr void append(Text<N> &out, Span part) {
  if (out.length + part.length >= N) {
    derived_text_outgrew_its_room();
    return;
  }
  for (std::size_t i = 0; i < part.length; ++i) out.chars[out.length++] = part.chars[i];
}

template <std::size_t N>
constexpr void append(Text<N> &out, char c, std::size_t times = 1) {
  for (std::size_t i = 0; i < times; ++i) append(out, Span{&c, 1});
}

template <std::size_t N>
constexpr void append_number(Text<N> &out, int number) {
  if (number >= 10) append_number(out, number / 10);
  append(out, static_cast<char>('0' + number % 10));
}

// The closing parentheses of line that close nothing opened on it: they
// close what an earlier line opened. Quoted literals are not read.
constexpr int unmatched_closers(Span line) {
  int open = 0, unmatched = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < line.length; ++i) {
    char c = line.chars[i];
    if (c == '\'') quoted = !quoted;
    if (quoted) continue;
    if (c == '(') ++open;
    if (c == ')') {
      if (open > 0)
        --open;
      else
        ++unmatched;
    }
  }
  if (open > 0) dropped_line_leaves_a_parenthesis_open();
  return unmatched;
}

}  // namespace detail

// A text as written in src/pure/statements.def: a raw string literal.
template <std::size_t N>
constexpr Text<N> written(const char (&literal)[N]) {
  Text<N> text;
  detail::append(text, detail::span(literal));
  return text;
}

// A text already derived by a rule, as it is.
template <std::size_t N>
constexpr Text<N> written(const Text<N> &text) {
  return text;
}

// The highest parameter number ($n) the text uses; 0 when it uses none.
template <std::size_t N>
constexpr int highest_parameter(const Text<N> &text) {
  int highest = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < text.length; ++i) {
    if (text.chars[i] == '\'') quoted = !quoted;
    if (quoted || text.chars[i] != '$') continue;
    int number = 0;
    while (i + 1 < text.length && text.chars[i + 1] >= '0' && text.chars[i + 1] <= '9')
      number = number * 10 + (text.chars[++i] - '0');
    if (number > highest) highest = number;
  }
  return highest;
}

// The text with its one line equal to from replaced by to.
template <std::size_t N>
constexpr Text<N + 64> replace_line(const Text<N> &text, const char *from, const char *to) {
  Text<N + 64> out;
  detail::Span source = detail::span(text), old_line = detail::span(from);
  int replaced = 0;
  for (std::size_t at = 0; at <= source.length;) {
    detail::Span line = detail::line_at(source, at);
    if (detail::same(line, old_line)) {
      detail::append(out, detail::span(to));
      ++replaced;
    } else {
      detail::append(out, line);
    }
    at += line.length + 1;
    if (at <= source.length) detail::append(out, '\n');
  }
  if (replaced == 0) rule_found_no_line_to_change();
  if (replaced > 1) rule_found_more_than_one_line_to_change();
  return out;
}

// The text without each line that names one of names. What a dropped line
// closes that an earlier line opened, it leaves closed: its unmatched
// closing parentheses end the line kept before it, in place of that line's
// trailing comma (the last item of a list, or the last term of a
// parenthesised condition, goes with its parenthesis).
template <std::size_t N, std::size_t K>
constexpr Text<N> without_lines_naming(const Text<N> &text, const char *const (&names)[K]) {
  Text<N> out;
  detail::Span source = detail::span(text);
  int dropped = 0;
  for (std::size_t at = 0; at <= source.length;) {
    detail::Span line = detail::line_at(source, at);
    bool drop = false;
    for (const char *name : names) drop = drop || detail::names(line, detail::span(name));
    at += line.length + 1;
    if (!drop) {
      detail::append(out, line);
      if (at <= source.length) detail::append(out, '\n');
      continue;
    }
    ++dropped;
    int closers = detail::unmatched_closers(line);
    if (closers == 0) continue;
    // out ends with the newline of the line kept before.
    if (out.length < 2) {
      rule_found_no_line_to_change();
      continue;
    }
    --out.length;
    if (out.chars[out.length - 1] == ',') --out.length;
    detail::append(out, ')', static_cast<std::size_t>(closers));
    detail::append(out, '\n');
  }
  for (std::size_t i = out.length; i < N; ++i) out.chars[i] = '\0';
  if (dropped == 0) rule_found_no_line_to_change();
  return out;
}

// A claim's statement for a key table still at 1.0, which has no
// bound_session column: the result row keeps the column (ClaimColumn's
// col_bound_session), as a NULL, and every other line that names the
// binding (the column, or $10 and $11, the parameters that carry it) goes.
template <std::size_t N>
constexpr Text<N + 64> on_10_key_table(const Text<N> &text) {
  return without_lines_naming(replace_line(text, "  r.bound_session", "  NULL::pg_catalog.int8"),
                              {"bound_session", "$10", "$11"});
}

// A statement for a schema still at 1.1, which has no idem.may_use_scope (and
// no idem.scope_owner to consult): every line that names it goes.
template <std::size_t N>
constexpr Text<N> on_11_schema(const Text<N> &text) {
  return without_lines_naming(text, {"idem.may_use_scope"});
}

// A statement limited to the one scope named by parameter $param: the scope
// becomes the first condition of the statement's first WHERE (the one that
// picks the rows), on the alias that WHERE's first condition reads.
template <std::size_t N>
constexpr Text<N + 64> in_scope(const Text<N> &text, int param) {
  Text<N + 64> out;
  detail::Span source = detail::span(text), where = detail::span("WHERE ");
  int changed = 0;
  for (std::size_t at = 0; at <= source.length;) {
    detail::Span line = detail::line_at(source, at);
    at += line.length + 1;
    std::size_t indent = 0;
    while (indent < line.length && line.chars[indent] == ' ') ++indent;
    bool first_where = changed == 0 && indent + where.length < line.length &&
                       detail::same(detail::Span{line.chars + indent, where.length}, where);
    if (!first_where) {
      detail::append(out, line);
      if (at <= source.length) detail::append(out, '\n');
      continue;
    }
    ++changed;
    detail::Span condition{line.chars + indent + where.length,
                           line.length - indent - where.length};
    std::size_t alias = 0;
    while (alias < condition.length && detail::identifier_char(condition.chars[alias])) ++alias;
    if (alias == 0 || alias == condition.length || condition.chars[alias] != '.')
      rule_found_no_line_to_change();
    detail::append(out, ' ', indent);
    detail::append(out, where);
    detail::append(out, detail::Span{condition.chars, alias});
    detail::append(out, detail::span(".scope OPERATOR(pg_catalog.=) $"));
    detail::append_number(out, param);
    detail::append(out, '\n');
    detail::append(out, ' ', indent + 2);
    detail::append(out, detail::span("AND "));
    detail::append(out, condition);
    if (at <= source.length) detail::append(out, '\n');
  }
  if (changed == 0) rule_found_no_line_to_change();
  return out;
}

// The sweep in one statement: sweep_rows, which marks the rows whose ctids
// are $2, marking instead the rows that lock (a query of their ctids, AS
// tid) takes, read as the CTE stale.
template <std::size_t N, std::size_t M>
constexpr Text<N + M + 64> over_rows_locked_by(const Text<N> &sweep_rows,
                                                const char (&lock)[M]) {
  Text<N + M + 64> out;
  detail::append(out, detail::span("\nWITH stale AS ("));
  detail::Span query = detail::span(lock);
  // The lock as written: a newline, its lines, a newline.
  if (query.length < 2 || query.chars[0] != '\n' || query.chars[query.length - 1] != '\n')
    rule_found_no_line_to_change();
  query = detail::Span{query.chars + 1, query.length - 2};
  for (std::size_t at = 0; at <= query.length;) {
    detail::Span line = detail::line_at(query, at);
    at += line.length + 1;
    detail::append(out, '\n');
    detail::append(out, ' ', 2);
    detail::append(out, line);
  }
  detail::append(out, ')');
  detail::Span rows = detail::span(sweep_rows), from = detail::span("ANY ($2)"),
               to = detail::span("ANY (ARRAY(SELECT stale.tid FROM stale))");
  int replaced = 0;
  for (std::size_t at = 0; at < rows.length;) {
    if (at + from.length <= rows.length &&
        detail::same(detail::Span{rows.chars + at, from.length}, from)) {
      detail::append(out, to);
      at += from.length;
      ++replaced;
    } else {
      detail::append(out, rows.chars[at++]);
    }
  }
  if (replaced == 0) rule_found_no_line_to_change();
  if (replaced > 1) rule_found_more_than_one_line_to_change();
  return out;
}

}  // namespace idem::sql_text
