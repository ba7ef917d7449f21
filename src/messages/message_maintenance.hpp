// The inbox's and outbox's share of the worker's round (docs/contract.md "Version
// 1.1", inbox and outbox): expired consumed messages and published events
// past idem.outbox_retention are purged in bounded batches, each batch its
// own transaction, like the keys. The statements call the SQL functions
// idem.purge_consumed and idem.purge_published, so the worker and an
// operator (or pg_cron) run the very same DELETE.
#pragma once

#include "pg/pg.hpp"
#include "pg/spi_session.hpp"

namespace idem {

// The worker's purges of the message tables, in the order a round runs them.
inline constexpr Statement message_purges[] = {Statement::purge_consumed,
                                               Statement::purge_published};

// True for the statements above: a round's batch of one of them runs here,
// the key stages' in keys/maintenance.cpp (worker/round_batch.hpp).
bool is_message_purge(Statement statement);

// One batch of at most `limit` rows of a message purge at the current time,
// in the caller's transaction; the rows deleted. Refuses where no write may
// run, as every maintenance batch does (keys/maintenance.hpp).
uint64 run_message_purge_batch(SpiSession *session, Statement statement, int32 limit);

// The inbox's and outbox's settings (idem.inbox_retention, idem.outbox_*);
// called from _PG_init. The PL/pgSQL functions read them with current_setting.
void define_message_settings();

// idem.inbox_retention in seconds (-1: forever), for consume_once (inbox.cpp).
int inbox_retention_seconds();

}  // namespace idem
