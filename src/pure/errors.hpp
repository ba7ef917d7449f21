// The errors idem reports, as C++ values. No Postgres header here: the pure
// parts (canonical JSON, claim classification) throw these, and the guard in
// guard.hpp turns them into ereport() once the C++ stack has unwound.
#pragma once

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
inline constexpr char internal[] = "P4099";
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
// inbox: src/messages/inbox.cpp and the PL/pgSQL outbox functions of sql/idem--1.0--1.1.sql.
inline constexpr char message_mismatch[] = "P4050";     // consume_once, another message_hash
inline constexpr char event_mismatch[] = "P4051";       // outbox_put, another payload
}  // namespace sqlstate

// A user-facing error: SQLSTATE, errmsg, errdetail, errhint.
class Error : public std::exception {
 public:
  Error(const char *sqlstate, std::string message, std::string detail = {},
        std::string hint = {})
      : message_(std::move(message)), detail_(std::move(detail)), hint_(std::move(hint)) {
    for (int i = 0; i < 5; ++i) sqlstate_[i] = sqlstate[i];
    sqlstate_[5] = '\0';
  }

  const char *what() const noexcept override { return message_.c_str(); }
  const char *sqlstate() const noexcept { return sqlstate_; }
  const std::string &message() const noexcept { return message_; }
  const std::string &detail() const noexcept { return detail_; }
  const std::string &hint() const noexcept { return hint_; }

 private:
  char sqlstate_[6];
  std::string message_;
  std::string detail_;
  std::string hint_;
};

}  // namespace idem
