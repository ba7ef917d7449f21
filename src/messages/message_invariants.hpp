// The inbox's and outbox's row rules, as the functions their tables' one
// CHECK constraint each calls (sql/idem--1.0--1.1.sql, the comment before
// idem.consumed_message_invariants_hold). One CHECK calling one C function instead of a CHECK per
// rule: PostgreSQL reads every CHECK back from its stored text and compiles
// it at each INSERT and UPDATE, which cost consume_once a quarter of its
// new-message throughput (bench/README.md).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// idem.consumed_message: consumer and message_id 1 to 255 characters,
// message_hash not empty, expires_at after consumed_at. True, or 23514
// naming the rule (the names of the CHECKs it replaces).
Datum consumed_message_invariants_hold(FunctionCallInfo fcinfo);

// idem.outbox_event: scope and key 1 to 255 characters, event_type not
// empty, a leased event has its lease, a published one its date.
Datum outbox_event_invariants_hold(FunctionCallInfo fcinfo);

// The same rules over a whole idem.consumed_message / idem.outbox_event row:
// what the tables' CHECK constraints call (row_check.hpp).
Datum consumed_message_row_invariants_hold(FunctionCallInfo fcinfo);
Datum outbox_event_row_invariants_hold(FunctionCallInfo fcinfo);

}  // namespace idem
