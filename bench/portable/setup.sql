-- The portable engine's database (bench/portable/run): what the benchmark
-- needs beside dist/idem-portable.sql, loaded by the database's owner (not a
-- superuser). The smoke scenario is bench/smoke.sql's own, so the portable
-- engine plays exactly the steps the C++ engine, ref and floor play in the
-- other database; bench/portable/agree.sql's helper comes with it.

CREATE SCHEMA bench;

-- The request hash every workload sends (the same as bench/setup.sql's).
CREATE FUNCTION bench.hash() RETURNS text IMMUTABLE LANGUAGE sql
AS $$ SELECT 'b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c' $$;

\ir ../smoke.sql
