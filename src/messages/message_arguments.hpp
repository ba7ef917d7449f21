// The inbox's and outbox's argument checks and error wording (inbox.cpp,
// outbox.cpp): the words of the PL/pgSQL functions they replaced, so the
// errors users see did not change with the move to C++.
#pragma once

#include "pg/message_text.hpp"
#include "pg/pg.hpp"

namespace idem::message_arguments {

// The longest consumer, message id, scope or key, in characters.
inline constexpr int max_name_chars = 255;
// How much of a too-long name an errdetail quotes, as the SQL's left(name, 40).
inline constexpr int detail_name_chars = 40;

// A text argument, detoasted, or nullptr for NULL.
const text *text_argument(FunctionCallInfo fcinfo, int argno);

// format()'s %L: the quoted literal, cut to max_chars characters as every
// quoted text is (message_text.hpp), or NULL unquoted.
const char *literal(const text *value, int max_chars = message_text::max_quoted_chars);

// A text that is not a name (a hash, a payload), cut as a message quotes it.
const char *excerpt_text(const char *value);

// 1 to max_name_chars characters.
bool name_fits(const text *value);

// Throws idem::Error; the strings are copied before the throw.
[[noreturn]] void throw_error(const char *sqlstate, const char *message, const char *detail,
                              const char *hint);

}  // namespace idem::message_arguments
