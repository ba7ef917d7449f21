-- The bare peer (the physical floor): the least table a client could keep its
-- keys in. idem's columns and NOT NULLs, a primary key and nothing else: no
-- sweep or purge index, and only the checks of one column each (no rule
-- that ties columns together, so the database lets a row break any of
-- idem's row rules). pgbench sends it the floor's statements
-- (bench/workloads/newkey_floor.sql, with bare. for floor.). What this
-- table does not keep, and what idem pays to keep it, is in
-- bench/README.md, "The physical floor".
CREATE SCHEMA bare;
CREATE SEQUENCE bare.fence_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE bare.idempotency_request
    (LIKE idem.idempotency_request INCLUDING DEFAULTS EXCLUDING CONSTRAINTS EXCLUDING INDEXES);
ALTER TABLE bare.idempotency_request
    ADD PRIMARY KEY (scope, key),
    ADD CONSTRAINT scope_length CHECK (char_length(scope) BETWEEN 1 AND 255),
    ADD CONSTRAINT key_length CHECK (char_length(key) BETWEEN 1 AND 255),
    ADD CONSTRAINT request_hash_present CHECK (request_hash <> ''),
    ADD CONSTRAINT fence_positive CHECK (fence > 0),
    ADD CONSTRAINT response_code_is_http_status CHECK (response_code BETWEEN 100 AND 599);
