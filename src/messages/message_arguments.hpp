// The inbox's and outbox's argument checks and error wording (inbox.cpp,
// outbox.cpp): the words of the PL/pgSQL functions they replaced, so the
// errors users see did not change with the move to C++.
#pragma once

#include "pg/message_text.hpp"
#include "pg/pg.hpp"

namespace idem::message_arguments {

// The inbox's and outbox's errors quote their arguments by the one rule.
using message_text::excerpt;
using message_text::quoted;
using message_text::too_long_name_chars;

// The longest consumer, message id, scope or key, in characters.
inline constexpr int max_name_chars = 255;

// A text argument, detoasted, or nullptr for NULL.
const text *text_argument(FunctionCallInfo fcinfo, int argno);

// 1 to max_name_chars characters.
bool name_fits(const text *value);

// An interval argument of the inbox or outbox (a retention, a lease), judged
// by the one rule (interval_is_acceptable, arguments.hpp): otherwise P4004,
// "<what> must be positive and finite", the value in the detail and `hint`.
// NULL passes unless required.
void require_interval(FunctionCallInfo fcinfo, int argno, const char *what, bool required,
                      const char *hint);

}  // namespace idem::message_arguments
