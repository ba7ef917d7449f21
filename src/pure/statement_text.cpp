// The table of kept statements: each name with its text, in Statement order.
// The texts are in the subsystems' *_statements.cpp files (statement_text.hpp).
#include "pure/pure.hpp"

#include "pure/statement_text.hpp"

namespace idem {

namespace statement_sql {
extern const char claim_insert[];
extern const char claim_take_over[];
extern const char claim_regenerate[];
extern const char mark_succeeded[];
extern const char mark_failed[];
extern const char set_recovery_point[];
extern const char key_fence_and_status[];
extern const char purge_expired[];
extern const char purge_candidates[];
extern const char sweep_stale[];
extern const char sweep_rows[];
extern const char lookup_key[];
extern const char evict_key[];
extern const char force_expire_key[];
extern const char purge_consumed[];
extern const char purge_published[];
extern const char extend_lock[];
extern const char claim_insert_10[];
extern const char claim_take_over_10[];
extern const char claim_regenerate_10[];
extern const char sweep_stale_10[];
extern const char claim_give_up[];
extern const char policy_load[];
extern const char exhaust_attempts[];
extern const char completer_candidates[];
extern const char completer_claim[];
extern const char session_temp_objects[];
extern const char inbox_insert[];
extern const char inbox_set_result[];
extern const char outbox_insert[];
extern const char outbox_existing[];
extern const char outbox_published[];
extern const char outbox_event_state[];
extern const char outbox_lease[];
extern const char stored_answer[];
extern const char release_key[];
extern const char owner_load[];
extern const char outbox_lease_11[];
extern const char scopes_to_sweep[];
extern const char scopes_to_purge[];
extern const char sweep_stale_in_scope[];
extern const char sweep_stale_10_in_scope[];
extern const char purge_expired_in_scope[];
extern const char purge_candidates_in_scope[];
}  // namespace statement_sql

const StatementText statement_texts[statement_count] = {
    {Statement::claim_insert, "claim_insert", statement_sql::claim_insert},
    {Statement::claim_take_over, "claim_take_over", statement_sql::claim_take_over},
    {Statement::claim_regenerate, "claim_regenerate", statement_sql::claim_regenerate},
    {Statement::mark_succeeded, "mark_succeeded", statement_sql::mark_succeeded},
    {Statement::mark_failed, "mark_failed", statement_sql::mark_failed},
    {Statement::set_recovery_point, "set_recovery_point", statement_sql::set_recovery_point},
    {Statement::key_fence_and_status, "key_fence_and_status", statement_sql::key_fence_and_status},
    {Statement::purge_expired, "purge_expired", statement_sql::purge_expired},
    {Statement::purge_candidates, "purge_candidates", statement_sql::purge_candidates},
    {Statement::sweep_stale, "sweep_stale", statement_sql::sweep_stale},
    {Statement::sweep_rows, "sweep_rows", statement_sql::sweep_rows},
    {Statement::lookup_key, "lookup_key", statement_sql::lookup_key},
    {Statement::evict_key, "evict_key", statement_sql::evict_key},
    {Statement::force_expire_key, "force_expire_key", statement_sql::force_expire_key},
    {Statement::purge_consumed, "purge_consumed", statement_sql::purge_consumed},
    {Statement::purge_published, "purge_published", statement_sql::purge_published},
    {Statement::extend_lock, "extend_lock", statement_sql::extend_lock},
    {Statement::claim_insert_10, "claim_insert_10", statement_sql::claim_insert_10},
    {Statement::claim_take_over_10, "claim_take_over_10", statement_sql::claim_take_over_10},
    {Statement::claim_regenerate_10, "claim_regenerate_10", statement_sql::claim_regenerate_10},
    {Statement::sweep_stale_10, "sweep_stale_10", statement_sql::sweep_stale_10},
    {Statement::claim_give_up, "claim_give_up", statement_sql::claim_give_up},
    {Statement::policy_load, "policy_load", statement_sql::policy_load},
    {Statement::exhaust_attempts, "exhaust_attempts", statement_sql::exhaust_attempts},
    {Statement::completer_candidates, "completer_candidates", statement_sql::completer_candidates},
    {Statement::completer_claim, "completer_claim", statement_sql::completer_claim},
    {Statement::session_temp_objects, "session_temp_objects", statement_sql::session_temp_objects},
    {Statement::inbox_insert, "inbox_insert", statement_sql::inbox_insert},
    {Statement::inbox_set_result, "inbox_set_result", statement_sql::inbox_set_result},
    {Statement::outbox_insert, "outbox_insert", statement_sql::outbox_insert},
    {Statement::outbox_existing, "outbox_existing", statement_sql::outbox_existing},
    {Statement::outbox_published, "outbox_published", statement_sql::outbox_published},
    {Statement::outbox_event_state, "outbox_event_state", statement_sql::outbox_event_state},
    {Statement::outbox_lease, "outbox_lease", statement_sql::outbox_lease},
    {Statement::stored_answer, "stored_answer", statement_sql::stored_answer},
    {Statement::release_key, "release_key", statement_sql::release_key},
    {Statement::owner_load, "owner_load", statement_sql::owner_load},
    {Statement::outbox_lease_11, "outbox_lease_11", statement_sql::outbox_lease_11},
    {Statement::scopes_to_sweep, "scopes_to_sweep", statement_sql::scopes_to_sweep},
    {Statement::scopes_to_purge, "scopes_to_purge", statement_sql::scopes_to_purge},
    {Statement::sweep_stale_in_scope, "sweep_stale_in_scope", statement_sql::sweep_stale_in_scope},
    {Statement::sweep_stale_10_in_scope, "sweep_stale_10_in_scope",
     statement_sql::sweep_stale_10_in_scope},
    {Statement::purge_expired_in_scope, "purge_expired_in_scope",
     statement_sql::purge_expired_in_scope},
    {Statement::purge_candidates_in_scope, "purge_candidates_in_scope",
     statement_sql::purge_candidates_in_scope},
};

}  // namespace idem
