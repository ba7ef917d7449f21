// The one rule for quoting a caller's text in an error message: cut at a
// character boundary of the server encoding, never inside a character, and
// marked "..." when cut. A message cut inside a multibyte character is not
// valid text: a client whose encoding differs from the server's cannot
// receive it, and gets the conversion's error (22021) instead of idem's own
// SQLSTATE. Every place that puts a caller's text into errmsg, errdetail or
// errhint goes through here (the key store's and the inbox's and outbox's
// errors), and the guard (guard.cpp) applies the same cut to its fixed
// buffers. How many characters a message quotes is the caller's choice of
// the named limits below; the cut is the same.
#pragma once

#include "pg/pg.hpp"

namespace idem::message_text {

// How many characters of one text a message quotes: every valid scope, key,
// consumer or message id (at most 255 characters) is shown whole.
inline constexpr int max_quoted_chars = 300;
// How much of a too-long name an inbox or outbox errdetail quotes: the
// PL/pgSQL functions they replaced showed left(name, 40), and their
// messages keep that wording.
inline constexpr int too_long_name_chars = 40;

// A palloc'd copy of data[0, bytes), cut to at most max_chars characters
// and followed by "..." when it was cut. data is in the server encoding.
char *excerpt(const char *data, int bytes, int max_chars = max_quoted_chars);
char *excerpt(const text *value, int max_chars = max_quoted_chars);
// The same of a NUL-terminated string (a hash, a payload's text).
char *excerpt(const char *value);

// format()'s %L of the excerpt: the quoted literal, or NULL unquoted for a
// null value, as the PL/pgSQL functions the inbox and outbox replaced wrote
// their errors.
const char *quoted(const text *value, int max_chars = max_quoted_chars);

// The length of the longest prefix of s (bytes long, server encoding) that
// ends on a character boundary and is at most max_bytes long. Calls no
// function that can raise an error.
int clip_bytes(const char *s, int bytes, int max_bytes);

}  // namespace idem::message_text
