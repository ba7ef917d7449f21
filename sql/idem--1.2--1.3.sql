-- idem 1.2 -> 1.3 (in development). The 1.3 base script (sql/idem--1.3.sql)
-- is generated from the 1.2 base script and this file by the Makefile, so
-- the two ways to 1.3 build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit
