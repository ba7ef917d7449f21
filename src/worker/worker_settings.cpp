#include "worker/worker_settings.hpp"

#include "pg/pg.hpp"

extern "C" {
#include "utils/varlena.h"
}

namespace idem {

static_assert(NAMEDATALEN == 64, "parse_worker_databases assumes NAMEDATALEN 64");

WorkerSettings worker_settings = {nullptr, 60, 10000, 2000, true, 300000, 4, 1};

int completer_owner_limit() {
  int total = worker_settings.completer_max_processes;
  return Max(Min(worker_settings.completer_max_per_owner, total - 1), 1);
}

int parse_worker_databases(const char *list, char (*names)[64], int max_names) {
  char *copy = pstrdup(list);
  List *items = NIL;
  int count = -1;
  if (SplitIdentifierString(copy, ',', &items)) {
    count = 0;
    ListCell *cell;
    foreach (cell, items) {
      if (count == max_names) {
        count = -1;
        break;
      }
      strlcpy(names[count], static_cast<const char *>(lfirst(cell)), NAMEDATALEN);
      ++count;
    }
  }
  list_free(items);
  pfree(copy);
  return count;
}

namespace {

// Rejects an empty, malformed, too long or repetitive list before the
// postmaster sizes shared memory by it.
bool check_database_list(char **value, void **, GucSource) {
  char names[max_worker_databases + 1][NAMEDATALEN];
  int count = parse_worker_databases(*value, names, max_worker_databases + 1);
  if (count < 0) {
    GUC_check_errdetail("idem.database must be a comma-separated list of database names.");
    return false;
  }
  if (count == 0) {
    GUC_check_errdetail("idem.database must name at least one database.");
    return false;
  }
  if (count > max_worker_databases) {
    GUC_check_errdetail("idem.database names more than %d databases.", max_worker_databases);
    return false;
  }
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < i; ++j)
      if (strcmp(names[i], names[j]) == 0) {
        GUC_check_errdetail("Database \"%s\" is named twice in idem.database.", names[i]);
        return false;
      }
  return true;
}

}  // namespace

void define_worker_settings() {
  // Postgres refuses to define a PGC_POSTMASTER setting after startup (FATAL),
  // and without the preload there is no worker to configure anyway.
  if (process_shared_preload_libraries_in_progress)
    DefineCustomStringVariable(
        "idem.database", "Databases the idem background worker maintains.",
        "A comma-separated list; one worker process per database. Needs a restart.",
        &worker_settings.databases, "postgres", PGC_POSTMASTER, GUC_LIST_INPUT,
        check_database_list, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.naptime", "Time between two maintenance rounds of the idem worker.", nullptr,
      &worker_settings.naptime_s, 60, 1, INT_MAX / 1000, PGC_SIGHUP, GUC_UNIT_S, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.batch_size", "Rows the idem worker sweeps or purges per transaction.",
      "Each batch is its own short transaction; a round goes on while batches are full.",
      &worker_settings.batch_size, 10000, 1, 1000000, PGC_SIGHUP, 0, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "idem.batch_delay", "Longest pause of the idem worker after a full batch.",
      "The whole of it after the first full batch in a row, halved after each further one, "
      "none from the fifth: a small backlog is paced, a large one worked off flat out. 0 never "
      "pauses.",
      &worker_settings.batch_delay_ms, 2000, 0, 60000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
      nullptr);
  DefineCustomBoolVariable(
      "idem.worker_enabled", "Whether the idem worker sweeps and purges.",
      "When off, the workers stay connected but idle.", &worker_settings.enabled, true,
      PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  // Server settings (reload), never a session's or a policy's: a scope's
  // lock_timeout, which its policy writer chooses, can shorten a completer's
  // run but never lengthen it past idem.completer_timeout.
  DefineCustomIntVariable(
      "idem.completer_timeout", "The longest a completer may run.",
      "The worker terminates a completer's process that runs past it (or past the key's lock, "
      "whichever ends first); idem.run_maintenance cancels a completer that does, and ends "
      "the session when it will not stop.",
      &worker_settings.completer_timeout_ms, 300000, 100, INT_MAX, PGC_SIGHUP, GUC_UNIT_MS,
      nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.completer_max_processes", "Completer processes one idem worker runs at once.",
      "Each runs in a background worker of its own, counted in max_worker_processes.",
      &worker_settings.completer_max_processes, 4, 1, max_completer_processes, PGC_SIGHUP, 0,
      nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idem.completer_max_per_owner",
      "Completer processes of one role one idem worker runs at once.",
      "Never all of idem.completer_max_processes while that is 2 or more: one owner's "
      "completers always leave a process for the others'.",
      &worker_settings.completer_max_per_owner, 1, 1, max_completer_processes, PGC_SIGHUP, 0,
      nullptr, nullptr, nullptr);
}

}  // namespace idem
