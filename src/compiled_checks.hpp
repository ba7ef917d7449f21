// The key table's CHECK constraints, compiled once per backend for idem's
// own statements.
//
// Postgres rebuilds a table's CHECK expressions in every statement that
// writes it (ExecRelCheck: read each constraint's stored tree, plan it,
// compile it), ~357,000 instructions per write for the key table's thirteen
// constraints: more than half of a claim plus its completion. idem writes the
// same table with the same statements all day, so it compiles those
// expressions once and lends them to the executor of each of its own write
// statements. Postgres still evaluates every constraint on every row it
// writes (ExecConstraints, same code, same error); only the rebuild is
// skipped. Statements that others run against the table are left alone.
#pragma once

#include "pg.hpp"

namespace idem::compiled_checks {

// Installs the executor hook and the relcache callback (from _PG_init).
void install();

// Runs one of idem's kept plans with the compiled checks lent to the write
// it starts; SPI_execute_plan otherwise.
int execute_plan(SPIPlanPtr plan, Datum *values, const char *nulls);

}  // namespace idem::compiled_checks
