// idem.request_hash(jsonb) and idem.request_hash(bytea): the Postgres side
// of hashing.hpp. Each runs inside run_guarded().
#pragma once

#include "pg/pg.hpp"

namespace idem {

Datum request_hash_jsonb(FunctionCallInfo fcinfo);
Datum request_hash_bytea(FunctionCallInfo fcinfo);

}  // namespace idem
