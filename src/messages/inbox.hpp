// idem.consume_once and idem.set_consumed_result (DESIGN.md "Consume-once for
// message consumers (the inbox)"; README "Message consumers"): the inbox's
// request path in the key store's layer instead of PL/pgSQL: a replay is
// one read through the primary key (key_probe.hpp), a new message one kept
// INSERT (bench/README.md, "1.1: inbox and outbox").
#pragma once

#include "pg/pg.hpp"

namespace idem {

// consume_once(consumer, message_id, message_hash, retention): true for the
// transaction that consumes the message, false for a replay; P4050 when the
// message was consumed with another hash.
Datum consume_once(FunctionCallInfo fcinfo);

// set_consumed_result(consumer, message_id, result_ref_type, result_ref_id):
// P4020 when the message is not consumed (or expired).
Datum set_consumed_result(FunctionCallInfo fcinfo);

}  // namespace idem
