// One batch of any stage of a maintenance round, for the worker's rounds
// (worker.cpp) and idem.run_maintenance (run_maintenance.cpp): the message
// purges run in messages/message_maintenance.cpp, the key stages (sweep,
// purge) in keys/maintenance.cpp, each behind the same refusal where no
// write may run. Here, above both, so that neither names the other.
#pragma once

#include "keys/maintenance.hpp"
#include "messages/message_maintenance.hpp"

namespace idem {

// The rows the batch changed; fewer than limit means the stage is done (for now).
inline uint64 run_round_batch(SpiSession *session, Statement statement, int32 limit) {
  return is_message_purge(statement) ? run_message_purge_batch(session, statement, limit)
                                     : run_maintenance_batch(session, statement, limit);
}

}  // namespace idem
