// idem.outbox_put, idem.outbox_lease and idem.outbox_published (DESIGN.md
// "Transactional outbox"; README "Outbox"): the calls made for every event,
// moved from PL/pgSQL to the key store's layer of kept SPI plans
// (bench/README.md, "1.1: inbox and outbox"). outbox_failed stays PL/pgSQL
// (sql/idem--1.0--1.1.sql, section inbox).
#pragma once

#include "pg/pg.hpp"

namespace idem {

// outbox_put(scope, key, event_type, payload, aggregate_type, aggregate_id,
// headers, available_at): the event's id, the same id for the same event
// again, P4051 for another payload; NOTIFY idem_outbox at commit.
Datum outbox_put(FunctionCallInfo fcinfo);

// outbox_lease(batch_limit, lease, event_types): the due events, leased.
Datum outbox_lease(FunctionCallInfo fcinfo);

// outbox_published(id, lease_fence): P4012 when the lease was lost.
Datum outbox_published(FunctionCallInfo fcinfo);

}  // namespace idem
