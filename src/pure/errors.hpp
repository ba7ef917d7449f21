// The errors idem reports, as C++ values. No Postgres header here: the pure
// parts (canonical JSON, claim classification) throw these, and the guard in
// guard.hpp turns them into ereport() once the C++ stack has unwound, with
// the throw's own file, line and function as its LOCATION.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <utility>

namespace idem {

// SQLSTATEs of README.md, "Errors" (class P4) plus the standard ones idem raises itself.
namespace sqlstate {
inline constexpr char scope_invalid[] = "P4000";
inline constexpr char key_invalid[] = "P4001";
inline constexpr char request_mismatch[] = "P4002";
inline constexpr char request_hash_invalid[] = "P4003";
inline constexpr char bad_argument[] = "P4004";
inline constexpr char inexact_number[] = "P4005";
inline constexpr char succeed_not_owned[] = "P4010";
inline constexpr char fail_not_owned[] = "P4011";
inline constexpr char stale_fence[] = "P4012";
inline constexpr char checkpoint_not_owned[] = "P4013";
inline constexpr char lock_not_owned[] = "P4014";       // extend_lock
inline constexpr char release_not_owned[] = "P4015";    // release
inline constexpr char internal[] = "P4099";
// Reserved: the portable engine raises and catches it to roll a
// subtransaction back: claim_or_wait to undo a lost takeover
// (portable/functions/idem_claim_or_wait.sql), a fence's jump to release its
// lock (idem.portable_fence_above); no caller sees it.
inline constexpr char portable_rollback[] = "P4098";
// Standard Postgres codes, for conditions that are not idem's own.
inline constexpr char invalid_json[] = "22P02";          // invalid_text_representation
inline constexpr char too_deep[] = "54001";              // statement_too_complex
inline constexpr char contention[] = "40001";            // serialization_failure
inline constexpr char read_only[] = "25006";             // read_only_sql_transaction
inline constexpr char out_of_memory[] = "53200";         // out_of_memory
// The operator's by-key tools (key_tools.cpp) and the counters (stats.cpp).
inline constexpr char key_not_found[] = "P4020";
inline constexpr char key_in_flight[] = "P4021";        // processing key, force not given
inline constexpr char not_preloaded[] = "55000";        // object_not_in_prerequisite_state
// A scope owned by a role the caller is not a member of (src/policy/scope_owner.hpp).
inline constexpr char scope_not_owned[] = "42501";      // insufficient_privilege
// inbox: src/messages/inbox.cpp and the PL/pgSQL outbox functions of sql/idem--1.0--1.1.sql.
inline constexpr char message_mismatch[] = "P4050";     // consume_once, another message_hash
inline constexpr char event_mismatch[] = "P4051";       // outbox_put, another payload
}  // namespace sqlstate

// Where an error was raised, for the server's LOCATION line. GCC and clang
// evaluate __builtin_FILE, __builtin_LINE and __builtin_FUNCTION in a default
// argument at the call site, so SourceLocation::here() as a default argument
// names the caller.
struct SourceLocation {
  const char *file;
  int line;
  const char *function;

  static constexpr SourceLocation here(const char *file = __builtin_FILE(),
                                       int line = __builtin_LINE(),
                                       const char *function = __builtin_FUNCTION()) noexcept {
    return {file, line, function};
  }
};

// An errmsg as a format and its arguments, so that the guard hands errmsg a
// format a translation catalog can key on. The format is a string literal
// (a char array: a computed char * does not convert, so a caller's text can
// never become a format) whose only conversions are %s, one per argument,
// and %%.
class Message {
 public:
  static constexpr int max_arguments = 2;

  template <std::size_t N>
  Message(const char (&format)[N]) noexcept : format_(format), count_(0) {}  // NOLINT: implicit
  template <std::size_t N>
  Message(const char (&format)[N], std::string argument) : format_(format), count_(1) {
    arguments_[0] = std::move(argument);
  }
  template <std::size_t N>
  Message(const char (&format)[N], std::string first, std::string second)
      : format_(format), count_(2) {
    arguments_[0] = std::move(first);
    arguments_[1] = std::move(second);
  }

  const char *format() const noexcept { return format_; }
  int argument_count() const noexcept { return count_; }
  const std::string &argument(int i) const noexcept { return arguments_[i]; }

  // The format with its arguments in place: the text errmsg will show.
  std::string text() const {
    std::string out;
    int next = 0;
    for (const char *p = format_; *p != '\0'; ++p) {
      if (p[0] == '%' && p[1] == '%') {
        out += '%';
        ++p;
      } else if (p[0] == '%' && p[1] == 's' && next < count_) {
        out += arguments_[next++];
        ++p;
      } else {
        out += *p;
      }
    }
    return out;
  }

 private:
  const char *format_;
  int count_;
  std::string arguments_[max_arguments];
};

// An error of the pure C++ code: SQLSTATE, errmsg, errdetail, errhint, and
// the place that threw it. Code that calls Postgres raises its errors with
// ereport() where they happen instead.
class Error : public std::exception {
 public:
  Error(const char *sqlstate, Message message, std::string detail = {}, std::string hint = {},
        SourceLocation where = SourceLocation::here())
      : message_(std::move(message)),
        text_(message_.text()),
        detail_(std::move(detail)),
        hint_(std::move(hint)),
        where_(where) {
    for (int i = 0; i < 5; ++i) sqlstate_[i] = sqlstate[i];
    sqlstate_[5] = '\0';
  }

  const char *what() const noexcept override { return text_.c_str(); }
  const char *sqlstate() const noexcept { return sqlstate_; }
  // The errmsg text, formatted.
  const std::string &message() const noexcept { return text_; }
  // The errmsg as format and arguments.
  const Message &message_format() const noexcept { return message_; }
  const std::string &detail() const noexcept { return detail_; }
  const std::string &hint() const noexcept { return hint_; }
  const SourceLocation &where() const noexcept { return where_; }

 private:
  char sqlstate_[6];
  Message message_;
  std::string text_;
  std::string detail_;
  std::string hint_;
  SourceLocation where_;
};

}  // namespace idem
