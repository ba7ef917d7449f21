-- idem 1.2 -> 1.3 (in development). The 1.3 base script (sql/idem--1.3.sql)
-- is generated from the 1.2 base script and this file by the Makefile, so
-- the two ways to 1.3 build the same schema.
\echo Use "ALTER EXTENSION idem UPDATE" to load this file. \quit

-- ==== Citus: tables Citus can distribute (docs/beyond-one-server.md, "Sharding with Citus") ====
-- Citus shards a table by one column and refuses a primary key or unique
-- constraint that does not contain it. The outbox is distributed by key,
-- colocated with the key table, so its primary key carries key. id leads:
-- every statement that finds an event by id (outbox_published,
-- outbox_failed, the lease's join, an error's status read) keeps using the
-- primary key's index as it did, and a put writes no second index. The
-- identity still makes id unique on one server; on Citus each node draws
-- ids from its own range of the identity (Citus's rule for identity
-- columns). The index is rebuilt under the table's ACCESS EXCLUSIVE lock,
-- for as long as it takes to read the outbox once.
ALTER TABLE idem.outbox_event
    DROP CONSTRAINT outbox_event_pkey,
    ADD CONSTRAINT outbox_event_pkey PRIMARY KEY (id, key);
-- ==== end Citus tables ====

-- ==== Citus: the relations a node maintains (docs/contract.md, "Beyond one server") ====
-- On a Citus node a distributed table's own relation is an empty shell: its
-- rows live in shards (idem.idempotency_request_102008, ...), each on the
-- node its placement names. Maintenance (sweep, purges, completers, the
-- relay's lease) works on the relations this function returns, each by
-- name, in its bounded batches: the table itself on a server without Citus
-- and for a table Citus does not manage; otherwise the shards whose
-- placement is on this node (none on a coordinator for a distributed table;
-- a reference table's one shard on every node that holds a copy). A shard
-- whose relation is not here (a move's placement not yet switched) is left
-- out. Citus's catalogs are read only when they exist: PL/pgSQL plans a
-- statement when it first runs, so a server without Citus never plans one
-- that names them.
-- Not SECURITY DEFINER: it reads catalogs every role may read; EXECUTE is
-- for idem's maintenance (the worker, run_maintenance) and operators.
CREATE FUNCTION idem.local_relations(relation regclass)
RETURNS SETOF regclass
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shard regclass;
BEGIN
    IF relation IS NULL THEN
        RETURN;
    END IF;
    -- Two statements: PL/pgSQL plans a condition whole, so the one that
    -- reads Citus's catalog must not be planned where it is missing.
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NEXT relation;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                    WHERE p.logicalrelid OPERATOR(pg_catalog.=) relation) THEN
        RETURN NEXT relation;
        RETURN;
    END IF;
    FOR shard IN
        SELECT pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid))
          FROM pg_catalog.pg_dist_shard s
          JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) s.shardid
         WHERE s.logicalrelid OPERATOR(pg_catalog.=) relation
           AND pl.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)
         ORDER BY s.shardid
    LOOP
        IF shard IS NOT NULL THEN
            RETURN NEXT shard;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION idem.local_relations(regclass) IS
    'The relations holding the table''s rows on this node: the table itself without Citus, its local shards on a Citus node (none on a coordinator).';
REVOKE ALL ON FUNCTION idem.local_relations(regclass) FROM PUBLIC;

-- ==== Fences: the jump lane (docs/internals.md, "On Citus") ====
-- A takeover or a new generation whose drawn fence is not above the key's
-- row (on Citus: the key came with its shard from a node whose sequence ran
-- ahead) "jumps" above the row's fence. A jump that set idem.fence_seq
-- itself could move it back: setval is no compare-and-set, and the values
-- other sessions drew between the read and the setval would be issued again.
-- So on Citus a jump never touches idem.fence_seq: it draws from its own
-- lane, idem.fence_jump_seq, whose values (congruent to the node's group id
-- plus 1024 modulo 2048, idem.citus_node_setup) no ordinary claim draws, and
-- only one jumper at a time moves it (under a lock of idem.fence_jump_lock),
-- always upwards. On one server both sequences step by 1 and the lane is
-- unused; the lock still serialises the rare jump there (a sequence set
-- behind the rows by hand), which moves idem.fence_seq only while it is
-- still behind. The lock table holds no rows and nobody but its owner may
-- lock it (LOCK TABLE needs UPDATE, DELETE or TRUNCATE on it); a jumper
-- holds it for a few sequence calls (docs/internals.md). The lane's value
-- is dumped as idem.fence_seq's is: a restored node must not issue a jump
-- value again.
CREATE SEQUENCE idem.fence_jump_seq AS bigint MINVALUE 1 NO CYCLE;
SELECT pg_catalog.pg_extension_config_dump('idem.fence_jump_seq', '');
REVOKE ALL ON SEQUENCE idem.fence_jump_seq FROM PUBLIC;
CREATE TABLE idem.fence_jump_lock ();
REVOKE ALL ON TABLE idem.fence_jump_lock FROM PUBLIC;
COMMENT ON TABLE idem.fence_jump_lock IS
    'No rows: its lock serialises the jumps of idem.fence_jump_seq (docs/internals.md, "On Citus").';
-- ==== end jump lane ====

-- ==== Citus: fences unique across nodes ====
-- A fence must be unique across the cluster and never go back for a key,
-- also when a shard moves the key to another node. Each node's fence
-- sequence steps by 2048 from a value congruent to the node's Citus group
-- id g modulo 2048, its jump lane (idem.fence_jump_seq, above) by 2048 from
-- one congruent to g + 1024, and the outbox's lease fence sequence
-- (compared by equality against a lease that may have been drawn on
-- another node before a move; it never jumps) by 1024 from one congruent to
-- g: two nodes, or a node's two lanes, never draw the same value. A
-- takeover that draws a fence not above the key's old one takes the next
-- value of the node's jump lane above it (the calls do that), so fences
-- rise per key wherever it lives.
-- Idempotent: a sequence already stepping in its residue is left as it is;
-- otherwise it restarts at the smallest value of its residue above
-- everything either fence sequence has issued. A node without the
-- sequences or the lock table gets them, as the install script makes them:
-- Citus copies a SQL-file install's functions and types to the workers,
-- not its sequences or local tables, which no table's default names.
-- idem.citus_distribute() calls it on every node;
-- after citus_add_node, call it on the new node (or citus_distribute()
-- again). Run by the owner of the sequences (the extension's owner, a
-- superuser, or a SQL-file install's database owner): it runs with its
-- caller's rights.
CREATE FUNCTION idem.citus_node_setup()
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    groups constant bigint := 1024;
    node_group integer;
    made record;
    lane record;
    issued bigint;
    last_value bigint;
    called boolean;
    floor_value bigint;
    next_value bigint;
    changed boolean;
    done jsonb := '{}';
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = '0A000',
                  DETAIL = 'idem.citus_node_setup() sets the fence sequences of one node of a Citus cluster.',
                  HINT = 'On a server without Citus, idem needs no setup.';
    END IF;
    SELECT g.groupid INTO node_group FROM pg_catalog.pg_dist_local_group g;
    IF node_group OPERATOR(pg_catalog.>=) groups THEN
        RAISE EXCEPTION 'this node''s Citus group id % is above idem''s limit', node_group
            USING ERRCODE = '54000',
                  DETAIL = pg_catalog.format('Each node draws fences congruent to its group id modulo %s, so group ids must be below %s.', groups, groups),
                  HINT = 'Group ids grow as nodes are added; a cluster whose ids passed the limit cannot keep fences unique across nodes.';
    END IF;
    -- The sequences are idem's own, never Citus's distributed objects: the
    -- change is this node's alone.
    PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    FOR made IN SELECT d.name, d.options
                  FROM (VALUES ('idem.fence_seq', 'AS bigint MINVALUE 1 NO CYCLE'),
                               ('idem.fence_jump_seq', 'AS bigint MINVALUE 1 NO CYCLE'),
                               ('idem.outbox_lease_fence_seq', 'AS bigint')) d(name, options)
                 WHERE pg_catalog.to_regclass(d.name) IS NULL LOOP
        EXECUTE pg_catalog.format('CREATE SEQUENCE %s %s', made.name, made.options);
        EXECUTE pg_catalog.format('REVOKE ALL ON SEQUENCE %s FROM PUBLIC', made.name);
    END LOOP;
    IF pg_catalog.to_regclass('idem.fence_jump_lock') IS NULL THEN
        CREATE TABLE idem.fence_jump_lock ();
        REVOKE ALL ON TABLE idem.fence_jump_lock FROM PUBLIC;
    END IF;
    FOR lane IN SELECT l.seq::pg_catalog.regclass AS seq, l.step, l.residue
                  FROM (VALUES ('idem.fence_seq', 2048, node_group),
                               ('idem.fence_jump_seq', 2048, node_group OPERATOR(pg_catalog.+) 1024),
                               ('idem.outbox_lease_fence_seq', 1024, node_group)) l(seq, step, residue) LOOP
        EXECUTE pg_catalog.format('SELECT s.last_value, s.is_called FROM %s s', lane.seq) INTO last_value, called;
        changed := (SELECT s.seqincrement FROM pg_catalog.pg_sequence s
                     WHERE s.seqrelid OPERATOR(pg_catalog.=) lane.seq) OPERATOR(pg_catalog.<>) lane.step
                   OR pg_catalog.mod(last_value, lane.step) OPERATOR(pg_catalog.<>) lane.residue;
        IF changed THEN
            -- ALTER SEQUENCE holds a lock that nextval waits for until
            -- this transaction ends: the value read next is the last any
            -- session drew.
            EXECUTE pg_catalog.format('ALTER SEQUENCE %s INCREMENT BY %s', lane.seq, lane.step);
            EXECUTE pg_catalog.format('SELECT s.last_value, s.is_called FROM %s s', lane.seq) INTO last_value, called;
            floor_value := last_value OPERATOR(pg_catalog.+) CASE WHEN called THEN 1 ELSE 0 END;
            IF lane.seq OPERATOR(pg_catalog.<>) 'idem.outbox_lease_fence_seq'::pg_catalog.regclass THEN
                -- The two fence lanes share one space of values: each
                -- restarts above what the other issued too (before this
                -- setup, with one step, either could have issued any value).
                -- The other one's value read here is final: it stepped in its
                -- residue already (an earlier turn of this loop, or before),
                -- or it is the lane, which only jumps draw from, above its
                -- own last value after this turn.
                SELECT pg_catalog.max(v) INTO issued
                  FROM (SELECT q.last_value FROM idem.fence_seq q
                        UNION ALL SELECT q.last_value FROM idem.fence_jump_seq q) o(v);
                floor_value := GREATEST(floor_value, issued OPERATOR(pg_catalog.+) 1);
            END IF;
            next_value := floor_value OPERATOR(pg_catalog.+)
                          pg_catalog.mod(pg_catalog.mod(lane.residue OPERATOR(pg_catalog.-) floor_value, lane.step)
                                         OPERATOR(pg_catalog.+) lane.step, lane.step);
            EXECUTE pg_catalog.format('ALTER SEQUENCE %s RESTART WITH %s', lane.seq, next_value);
        END IF;
        done := done OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(lane.seq::pg_catalog.text,
                    pg_catalog.jsonb_build_object('increment', lane.step, 'residue', lane.residue, 'changed', changed));
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('node_group', node_group, 'sequences', done);
END
$$;
COMMENT ON FUNCTION idem.citus_node_setup() IS
    'On a Citus node: the fence sequence and its jump lane step by 2048 in this node''s residues (group id, group id + 1024), the outbox lease fences by 1024, so fences are unique across nodes. Idempotent.';
REVOKE ALL ON FUNCTION idem.citus_node_setup() FROM PUBLIC;

-- ==== Citus: distributing idem's tables (docs/beyond-one-server.md, "Sharding with Citus") ====
-- Run once on the coordinator, by a superuser or the owner of idem's
-- objects: it calls Citus's functions with its caller's rights (it is not
-- SECURITY DEFINER), so EXECUTE is not granted to anyone. In the caller's
-- transaction, in this order:
--  1. refuses, changing nothing: 0A000 without Citus in this database;
--     55000 on a node that is not the coordinator; 55000 when one of the
--     key, inbox or outbox tables still to distribute holds rows on the
--     coordinator (Citus would copy them into its shards and keep the old
--     copy in the coordinator's table, where no call should find it), or
--     is already distributed otherwise than below;
--  2. runs idem.citus_node_setup() on every node (each commits on its
--     own); 55000 naming the nodes where it failed (idem not installed
--     there, most often);
--  3. idem.scope_policy and idem.scope_owner become reference tables (a copy
--     on every node), with citus.enable_unsafe_triggers on for this
--     transaction: their triggers (the completer's and the owner's checks,
--     the audit, the caches' invalidation) then run on every copy. Rows
--     they hold are copied, and the coordinator's old copy emptied
--     (truncate_local_data_after_distributing_table);
--  4. idem.idempotency_request distributed by key in a colocation group of
--     its own; idem.outbox_event by key and idem.consumed_message by
--     message_id, colocated with it. Their CHECK constraints move to the
--     column-argument form first (the same names, rules and 23514
--     messages): Citus copies a constraint to each shard by its text, and a
--     whole-row argument names the table, which a shard is not. One server
--     keeps the whole-row form: the column form costs a new key's claim and
--     completion 18% more instructions (600,163 against 507,045 on
--     PostgreSQL 15; bench/lifecycle_instructions.sh with
--     SHAPE=bench/shapes/column_argument_checks.sql);
--  5. delegates every call of idem whose first arguments are (scope text,
--     key text) by key, and those whose first are (consumer text,
--     message_id text) by message_id, colocated with the key table: Citus
--     runs such a call on the node holding the key's shard when it is not
--     inside a transaction block (or with force_delegation). The immutable
--     row rules and the portable engine's internal helpers (idem.portable_*)
--     are not calls and stay as they are. Citus crashes the server on a
--     delegated call whose key is NULL; idem's library, preloaded after
--     citus, keeps such a call on the coordinator, and says so on each node
--     with idem.citus_null_key_guard = on (src/pg/null_key_guard.hpp). So
--     delegate_calls NULL (the default) delegates only when every node says
--     on, and otherwise leaves the calls to the coordinator (which routes
--     each statement by key) with a NOTICE naming the nodes; true delegates
--     anyway, false never. A call delegated before stays delegated.
-- A table or function already distributed so is left as it is, so it can
-- be run again, after citus_add_node for instance. Returns what it did.
CREATE FUNCTION idem.citus_distribute(delegate_calls boolean DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    n record;
    f record;
    key_table constant pg_catalog.regclass := 'idem.idempotency_request';
    key_colocation integer;
    holding text[] := '{}';
    misdistributed text[] := '{}';
    failed text[] := '{}';
    holds_rows boolean;
    unguarded text[];
    delegating boolean := delegate_calls;
    nodes jsonb := '[]';
    tables jsonb := '[]';
    delegated jsonb := '[]';
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = '0A000',
                  DETAIL = 'idem.citus_distribute() distributes idem''s tables with Citus.',
                  HINT = 'CREATE EXTENSION citus on every node and add the workers first (docs/beyond-one-server.md, "Sharding with Citus").';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'idem.citus_distribute() runs on the coordinator'
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.format('This node is Citus group %s, a worker.',
                                             (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)),
                  HINT = 'Connect to the coordinator and call it there.';
    END IF;

    -- 1. What is in the way, before anything changes.
    FOR t IN SELECT d.rel::pg_catalog.regclass AS rel, d.col, d.kind, p.partmethod, p.repmodel,
                    pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) AS partcol,
                    p.colocationid
               FROM (VALUES ('idem.idempotency_request', 'key', 'hash'),
                            ('idem.outbox_event', 'key', 'hash'),
                            ('idem.consumed_message', 'message_id', 'hash'),
                            ('idem.scope_policy', NULL, 'reference'),
                            ('idem.scope_owner', NULL, 'reference')) d(rel, col, kind)
               LEFT JOIN pg_catalog.pg_dist_partition p
                 ON p.logicalrelid OPERATOR(pg_catalog.=) d.rel::pg_catalog.regclass
    LOOP
        IF t.partmethod IS NULL THEN
            IF t.kind OPERATOR(pg_catalog.=) 'hash' THEN
                EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM ONLY %s)', t.rel) INTO holds_rows;
                IF holds_rows THEN
                    holding := holding OPERATOR(pg_catalog.||) t.rel::pg_catalog.text;
                END IF;
            END IF;
        ELSIF t.kind OPERATOR(pg_catalog.=) 'hash'
              AND (t.partmethod OPERATOR(pg_catalog.<>) 'h' OR t.partcol IS DISTINCT FROM t.col
                   OR t.colocationid IS DISTINCT FROM
                      (SELECT k.colocationid FROM pg_catalog.pg_dist_partition k
                        WHERE k.logicalrelid OPERATOR(pg_catalog.=) key_table)) THEN
            misdistributed := misdistributed OPERATOR(pg_catalog.||)
                pg_catalog.format('%s (wanted: hash by %s, colocated with %s)', t.rel, t.col, key_table);
        ELSIF t.kind OPERATOR(pg_catalog.=) 'reference'
              AND (t.partmethod OPERATOR(pg_catalog.<>) 'n' OR t.repmodel OPERATOR(pg_catalog.<>) 't') THEN
            misdistributed := misdistributed OPERATOR(pg_catalog.||)
                pg_catalog.format('%s (wanted: a reference table)', t.rel);
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(holding) OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'idem''s tables to distribute hold rows on the coordinator: %',
                        pg_catalog.array_to_string(holding, ', ')
            USING ERRCODE = '55000',
                  DETAIL = 'Citus would copy the rows into its shards and keep the old copy in the coordinator''s table.',
                  HINT = 'Move the rows out first: copy them into a table of your own and delete them here, call idem.citus_distribute(), then insert them back through the coordinator (docs/beyond-one-server.md, "Sharding with Citus").';
    END IF;
    IF pg_catalog.cardinality(misdistributed) OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'idem''s tables are already distributed otherwise: %',
                        pg_catalog.array_to_string(misdistributed, ', ')
            USING ERRCODE = '55000',
                  DETAIL = 'idem''s calls and maintenance rely on the key, inbox and outbox tables sharing the key''s shard, and on a copy of the policies on every node.',
                  HINT = 'undistribute_table() them, then call idem.citus_distribute() again.';
    END IF;

    -- 2. Fences per node, on every node (each node commits its own).
    FOR n IN SELECT r.nodeid, r.success, r.result
               FROM pg_catalog.run_command_on_all_nodes('SELECT idem.citus_node_setup()') r
              ORDER BY r.nodeid
    LOOP
        IF n.success THEN
            nodes := nodes OPERATOR(pg_catalog.||)
                pg_catalog.jsonb_build_object('nodeid', n.nodeid, 'setup', n.result::pg_catalog.jsonb);
        ELSE
            failed := failed OPERATOR(pg_catalog.||) pg_catalog.format('node %s: %s', n.nodeid, n.result);
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(failed) OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'idem.citus_node_setup() failed on % of the cluster''s nodes',
                        pg_catalog.cardinality(failed)
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.array_to_string(failed, '; '),
                  HINT = 'Install idem on every node (CREATE EXTENSION idem on the coordinator once the workers are added, or the portable engine''s install on each), then call idem.citus_distribute() again.';
    END IF;

    -- 3. and 4. The tables, the reference tables first: Citus copies a
    -- view to the workers (a SQL-file install's) once every table it reads
    -- is distributed. Sequential: the shards of one transaction's several
    -- tables are created over one connection per node.
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    FOR t IN SELECT d.rel::pg_catalog.regclass AS rel, d.col, d.con, d.rules
               FROM (VALUES
                   ('idem.idempotency_request', 'key', 'idempotency_request_invariants',
                    'idem.request_invariants_hold(scope, key, request_hash, status, recovery_point, fence, '
                    'attempt_count, locked_until, response_code, response_body, failure_code, '
                    'failure_message, created_at, finished_at, expires_at)', 1),
                   ('idem.outbox_event', 'key', 'outbox_event_invariants',
                    'idem.outbox_event_invariants_hold(scope, key, event_type, status, leased_until, '
                    'lease_fence, published_at)', 2),
                   ('idem.consumed_message', 'message_id', 'consumed_message_invariants',
                    'idem.consumed_message_invariants_hold(consumer, message_id, message_hash, '
                    'consumed_at, expires_at)', 3),
                   ('idem.scope_policy', NULL, NULL, NULL, 0),
                   ('idem.scope_owner', NULL, NULL, NULL, 0)) d(rel, col, con, rules, ord)
              ORDER BY d.ord, d.rel
    LOOP
        IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                    WHERE p.logicalrelid OPERATOR(pg_catalog.=) t.rel) THEN
            tables := tables OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                'table', t.rel::pg_catalog.text, 'by', t.col, 'done', 'already');
            CONTINUE;
        END IF;
        IF t.col IS NOT NULL THEN
            EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I CHECK (%s)',
                                      t.rel, t.con, t.con, t.rules);
            IF t.rel OPERATOR(pg_catalog.=) key_table THEN
                PERFORM pg_catalog.create_distributed_table(t.rel, t.col, colocate_with => 'none');
            ELSE
                PERFORM pg_catalog.create_distributed_table(t.rel, t.col,
                                                            colocate_with => key_table::pg_catalog.text);
            END IF;
            tables := tables OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                'table', t.rel::pg_catalog.text, 'by', t.col, 'done', 'distributed');
        ELSE
            EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM ONLY %s)', t.rel) INTO holds_rows;
            PERFORM pg_catalog.create_reference_table(t.rel);
            IF holds_rows THEN
                PERFORM pg_catalog.truncate_local_data_after_distributing_table(t.rel);
            END IF;
            tables := tables OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                'table', t.rel::pg_catalog.text, 'by', NULL, 'done', 'reference');
        END IF;
    END LOOP;

    -- 5. The calls that take a key, delegated to the key's node where no
    -- NULL key can crash a node.
    IF delegating IS NULL THEN
        SELECT pg_catalog.array_agg(pg_catalog.format('node %s', r.nodeid) ORDER BY r.nodeid) INTO unguarded
          FROM pg_catalog.run_command_on_all_nodes(
                   $q$SELECT pg_catalog.current_setting('idem.citus_null_key_guard', true)$q$) r
         WHERE NOT r.success OR r.result IS DISTINCT FROM 'on';
        delegating := unguarded IS NULL;
        IF NOT delegating THEN
            RAISE NOTICE 'idem.citus_distribute() does not delegate idem''s calls: % cannot keep a call with a NULL key from crashing it',
                         pg_catalog.array_to_string(unguarded, ', ')
                USING DETAIL = 'Citus crashes a node on a delegated call whose key is NULL; idem''s library, in shared_preload_libraries after citus on every node (idem.citus_null_key_guard = on), keeps such a call on the coordinator.',
                      HINT = 'The calls work undelegated: the coordinator routes each of their statements to the key''s node. Preload idem on every node and call idem.citus_distribute() again, or pass delegate_calls => true to delegate anyway (docs/beyond-one-server.md, "A NULL key").';
        END IF;
    END IF;
    SELECT k.colocationid INTO key_colocation FROM pg_catalog.pg_dist_partition k
     WHERE k.logicalrelid OPERATOR(pg_catalog.=) key_table;
    FOR f IN SELECT p.oid::pg_catalog.regprocedure AS fn, p.proargnames[2] AS arg,
                    EXISTS (SELECT FROM pg_catalog.pg_dist_object o
                             WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                               AND o.objid OPERATOR(pg_catalog.=) p.oid
                               AND o.distribution_argument_index OPERATOR(pg_catalog.=) 1
                               AND o.colocationid OPERATOR(pg_catalog.=) key_colocation) AS done
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'idem'::pg_catalog.regnamespace
                AND p.prokind OPERATOR(pg_catalog.=) 'f'
                AND p.provolatile OPERATOR(pg_catalog.<>) 'i'
                AND NOT pg_catalog.starts_with(p.proname::pg_catalog.text, 'portable_')
                AND p.pronargs OPERATOR(pg_catalog.>=) 2
                AND p.proargtypes[0] OPERATOR(pg_catalog.=) 'pg_catalog.text'::pg_catalog.regtype
                AND p.proargtypes[1] OPERATOR(pg_catalog.=) 'pg_catalog.text'::pg_catalog.regtype
                AND (p.proargnames[1:2] OPERATOR(pg_catalog.=) ARRAY['scope', 'key']
                     OR p.proargnames[1:2] OPERATOR(pg_catalog.=) ARRAY['consumer', 'message_id'])
              ORDER BY p.oid::pg_catalog.regprocedure::pg_catalog.text
    LOOP
        CONTINUE WHEN NOT (f.done OR delegating);
        IF NOT f.done THEN
            PERFORM pg_catalog.create_distributed_function(f.fn, f.arg,
                                                           colocate_with => key_table::pg_catalog.text);
        END IF;
        delegated := delegated OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
            'function', f.fn::pg_catalog.text, 'by', f.arg, 'done', CASE WHEN f.done THEN 'already' ELSE 'delegated' END);
    END LOOP;

    RETURN pg_catalog.jsonb_build_object('tables', tables, 'delegate_calls', delegating,
                                         'delegated', delegated, 'nodes', nodes);
END
$$;
COMMENT ON FUNCTION idem.citus_distribute(boolean) IS
    'On a Citus coordinator: distributes idem''s tables by key, makes the policies reference tables, delegates the calls that take a key (by default only where every node keeps a NULL key from being delegated) and sets fences on every node. For a superuser or the owner of idem''s objects, once; idempotent.';
REVOKE ALL ON FUNCTION idem.citus_distribute(boolean) FROM PUBLIC;
-- ==== end Citus ====

-- ==== Citus: maintenance and the outbox's calls per shard (docs/contract.md, "Beyond one server") ====
-- On a Citus node the inbox's and outbox's rows live in shards, and Citus
-- refuses FOR UPDATE on a distributed table: each purge takes its bounded
-- batch from the relations idem.local_relations gives (the table itself on
-- one server; this node's shards otherwise, none on the coordinator) in
-- turn, at most batch_limit rows in all, each statement reading and
-- deleting in one relation by name.
CREATE OR REPLACE FUNCTION idem.purge_consumed(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted bigint := 0;
    gone bigint;
    relation pg_catalog.regclass;
BEGIN
    PERFORM idem.check_batch_limit(batch_limit);
    FOR relation IN SELECT l.r FROM idem.local_relations('idem.consumed_message'::pg_catalog.regclass) AS l(r) LOOP
        EXIT WHEN deleted OPERATOR(pg_catalog.>=) batch_limit;
        EXECUTE pg_catalog.format(
            'WITH doomed AS (
                SELECT d.ctid AS tid FROM %1$s d
                 WHERE d.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
                 ORDER BY d.expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
             DELETE FROM %1$s r
              WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed))', relation)
          USING batch_limit OPERATOR(pg_catalog.-) deleted;
        GET DIAGNOSTICS gone = ROW_COUNT;
        deleted := deleted OPERATOR(pg_catalog.+) gone;
    END LOOP;
    RETURN deleted;
END
$$;

CREATE OR REPLACE FUNCTION idem.purge_published(batch_limit integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_retention', true), ''), '7d');
    deleted bigint := 0;
    gone bigint;
    relation pg_catalog.regclass;
BEGIN
    PERFORM idem.check_batch_limit(batch_limit);
    IF setting OPERATOR(pg_catalog.=) '-1' THEN
        RETURN 0;
    END IF;
    FOR relation IN SELECT l.r FROM idem.local_relations('idem.outbox_event'::pg_catalog.regclass) AS l(r) LOOP
        EXIT WHEN deleted OPERATOR(pg_catalog.>=) batch_limit;
        EXECUTE pg_catalog.format(
            'WITH doomed AS (
                SELECT d.ctid AS tid FROM %1$s d
                 WHERE d.status OPERATOR(pg_catalog.=) ''published''
                   AND d.published_at OPERATOR(pg_catalog.<=)
                       (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) $2::pg_catalog.interval)
                 ORDER BY d.published_at LIMIT $1 FOR UPDATE SKIP LOCKED)
             DELETE FROM %1$s r
              WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT doomed.tid FROM doomed))', relation)
          USING batch_limit OPERATOR(pg_catalog.-) deleted, setting;
        GET DIAGNOSTICS gone = ROW_COUNT;
        deleted := deleted OPERATOR(pg_catalog.+) gone;
    END LOOP;
    RETURN deleted;
END
$$;

-- outbox_failed as in 1.2, with the event's next availability computed
-- before its UPDATE (Citus refuses random(), a VOLATILE function, in an
-- UPDATE's SET, and timestamptz + interval, a STABLE one, on a column
-- there): its attempt count is read under the lease it is failed under,
-- and the UPDATE matches only while the event is still leased under that
-- fence with that count (a lease changes both).
CREATE OR REPLACE FUNCTION idem.outbox_failed(
    id bigint, lease_fence bigint, error text, retry_after interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_attempts integer := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_max_attempts', true), ''), '10')::integer;
    base interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_base', true), ''), '1s')::interval;
    cap interval := COALESCE(NULLIF(pg_catalog.current_setting('idem.outbox_backoff_max', true), ''), '10min')::interval;
    event_scope text;
    attempts integer;
    next_at timestamptz;
BEGIN
    -- idem.interval_is_positive is the rule of every interval idem takes
    -- (section intervals, below); zero is allowed here: retry at once.
    IF error IS NULL OR error OPERATOR(pg_catalog.=) ''
       OR NOT idem.interval_is_positive(retry_after, true) THEN
        RAISE EXCEPTION 'error must be given and retry_after must be finite and not negative'
            USING ERRCODE = 'P4004',
                  DETAIL = pg_catalog.format('outbox_failed(%s): error %L, retry_after %s.', id, error,
                                             COALESCE(retry_after::text, 'NULL')),
                  HINT = 'Say why the delivery failed; pass retry_after NULL for the exponential backoff.';
    END IF;
    -- An id no event has is a lost lease below, as for a member.
    SELECT e.scope INTO event_scope FROM idem.outbox_event e
     WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id;
    IF FOUND THEN
        PERFORM idem.check_scope_owner(event_scope);
    END IF;
    SELECT e.attempt_count INTO attempts FROM idem.outbox_event e
     WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id
       AND e.status OPERATOR(pg_catalog.=) 'leased'
       AND e.lease_fence OPERATOR(pg_catalog.=) outbox_failed.lease_fence;
    IF FOUND THEN
        next_at := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) COALESCE(
            retry_after,
            LEAST(cap, base OPERATOR(pg_catalog.*) pg_catalog.power(2, LEAST(attempts OPERATOR(pg_catalog.-) 1, 30)))
                OPERATOR(pg_catalog.*) (0.5 OPERATOR(pg_catalog.+) (pg_catalog.random() OPERATOR(pg_catalog.*) 0.5)));
        UPDATE idem.outbox_event e
           SET status = CASE WHEN attempts OPERATOR(pg_catalog.>=) max_attempts
                             THEN 'dead'::idem.outbox_status ELSE 'pending'::idem.outbox_status END,
               available_at = next_at,
               leased_until = NULL, lease_fence = NULL, last_error = error
         WHERE e.id OPERATOR(pg_catalog.=) outbox_failed.id
           AND e.status OPERATOR(pg_catalog.=) 'leased'
           AND e.lease_fence OPERATOR(pg_catalog.=) outbox_failed.lease_fence
           AND e.attempt_count OPERATOR(pg_catalog.=) attempts;
    END IF;
    IF NOT FOUND THEN
        PERFORM idem.outbox_lease_lost(id, lease_fence, 'failed');
    END IF;
END
$$;
-- ==== end Citus maintenance and outbox ====

-- ==== search_path proof ====
-- Each statement the C++ engine keeps, whether it is proven to resolve no
-- name through search_path ('proven'), runs only under the pinned path
-- ('pinned-only') or neither ('refused', a bug); and why not
-- (src/pg/statement_proof.cpp). The adversarial suite's catalog scan reads
-- it (test/sql/61_hostile_role.sql). The portable engine keeps no
-- statements: no rows.
CREATE FUNCTION idem.search_path_proof(OUT statement text, OUT verdict text, OUT refusal text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_search_path_proof'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
-- The same proof over any statement text: its first refusal, or NULL when
-- it is proven (so a test can show that each refusal fires). Not SECURITY
-- DEFINER and EXECUTE left to PUBLIC: it only parses the text, as the
-- caller, and reads which idem functions are pinned (pg_proc, readable by
-- all); it runs nothing of the text. The portable engine has no parser to
-- offer and raises feature_not_supported.
CREATE FUNCTION idem.search_path_proof(statement text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_search_path_proof_of_text'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
-- ==== end search_path proof ====

-- ==== C++ engine only: search_path proven, not pinned ====
-- Every statement the C++ engine runs is proven, by PostgreSQL's raw_parser
-- before it is first prepared in a backend, to name each relation, type,
-- function, operator and collation with its schema (src/pg/statement_proof.cpp):
-- it means the same under any search_path, so these SECURITY DEFINER
-- functions, which run nothing else that resolves a name, do without the
-- pin and the settings save and restore it costs at every call
-- (docs/security.md, "search_path"). The portable engine's PL/pgSQL
-- bodies keep theirs (portable/build.pl leaves this block out).
-- idem.run_maintenance() keeps its pin: it runs the completers, whose
-- candidates' statement reads a function name (statement_proof.cpp).
ALTER FUNCTION idem.claim_idempotency_key(text,text,text,text,interval,interval) RESET search_path;
ALTER FUNCTION idem.mark_succeeded(text,text,bigint,integer,jsonb,text,text) RESET search_path;
ALTER FUNCTION idem.mark_failed(text,text,bigint,boolean,text,text,integer,jsonb) RESET search_path;
ALTER FUNCTION idem.set_recovery_point(text,text,bigint,text) RESET search_path;
ALTER FUNCTION idem.purge_expired(integer) RESET search_path;
ALTER FUNCTION idem.sweep_stale(integer) RESET search_path;
ALTER FUNCTION idem.lookup(text,text) RESET search_path;
ALTER FUNCTION idem.evict(text,text,boolean) RESET search_path;
ALTER FUNCTION idem.force_expire(text,text,boolean) RESET search_path;
ALTER FUNCTION idem.typical_duration(text) RESET search_path;
ALTER FUNCTION idem.mark_succeeded_returning(text,text,bigint,integer,jsonb,text,text) RESET search_path;
ALTER FUNCTION idem.mark_failed_returning(text,text,bigint,boolean,text,text,integer,jsonb) RESET search_path;
ALTER FUNCTION idem.consume_once(text,text,text,interval) RESET search_path;
ALTER FUNCTION idem.set_consumed_result(text,text,text,text) RESET search_path;
ALTER FUNCTION idem.outbox_put(text,text,text,jsonb,text,text,jsonb,timestamp with time zone) RESET search_path;
ALTER FUNCTION idem.outbox_lease(integer,interval,text[]) RESET search_path;
ALTER FUNCTION idem.outbox_published(bigint,bigint) RESET search_path;
ALTER FUNCTION idem.claim_or_wait(text,text,text,interval,text,interval,interval) RESET search_path;
ALTER FUNCTION idem.extend_lock(text,text,bigint,interval) RESET search_path;
ALTER FUNCTION idem.release(text,text,bigint) RESET search_path;
ALTER FUNCTION idem.peek(text,text) RESET search_path;
ALTER FUNCTION idem.check_scope_owner(text) RESET search_path;
ALTER FUNCTION idem.may_use_scope(text) RESET search_path;
-- ==== end C++ engine only ====

