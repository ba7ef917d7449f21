# ALTER EXTENSION idem UPDATE from the released 1.0 (through 1.1 and 1.2 to
# 1.3, the default version), from 1.1 and from 1.2: keys in every status
# survive it unchanged and keep working (replays answer the same bytes, fences
# keep rising, owners complete their keys); the one CHECK of 1.1 refuses what
# 1.0's thirteen refused, naming the same rule; a fresh install and an
# updated one have the same schema; the contract suites pass on an updated
# install.
use strict;
use warnings;
use DBI;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The source tree, whose test/ holds the regress and isolation files
# (test/suites.sh passes its copy).
my $tree = $ENV{IDEM_TREE} // "$FindBin::RealBin/../..";

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
# The configuration `make installcheck` uses, so the contract suites below
# see the server they expect.
$node->append_conf('postgresql.conf', slurp_file("$tree/test/installcheck.conf"));
$node->start;

sub sql { my ($db, $query) = @_; return $node->safe_psql($db, $query); }

# Creates a database the way pg_regress does for its suites.
sub create_database {
	my ($db) = @_;
	sql('postgres', qq{CREATE DATABASE "$db" TEMPLATE = template0});
	sql('postgres', join '', map { qq{ALTER DATABASE "$db" SET $_;} }
		  "lc_messages TO 'C'", "lc_monetary TO 'C'", "lc_numeric TO 'C'",
		  "lc_time TO 'C'", "bytea_output TO 'hex'", "timezone_abbreviations TO 'Default'");
}

sub install_1_0 {
	my ($db) = @_;
	sql($db, q{CREATE EXTENSION idem VERSION '1.0'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.0',
		"$db: idem installed at 1.0");
}

# 1.0 -> 1.1 -> 1.2 -> 1.3, one step at a time, then UPDATE to the default:
# nothing left.
sub update_idem {
	my ($db) = @_;
	sql($db, q{ALTER EXTENSION idem UPDATE TO '1.1'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.1',
		"$db: idem updated to 1.1");
	sql($db, q{ALTER EXTENSION idem UPDATE TO '1.2'});
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.2',
		"$db: idem updated to 1.2");
	sql($db, q{ALTER EXTENSION idem UPDATE TO '1.3'});
	sql($db, 'ALTER EXTENSION idem UPDATE');
	is(sql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.3',
		"$db: idem updated to 1.3");
}

# EXECUTE on every call a tenant makes, for $role ($db's functions as they
# are at its version).
sub grant_calls {
	my ($db, $role) = @_;
	sql($db, qq{
DO \$\$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'idem'::regnamespace
              AND p.proname IN ('claim_idempotency_key', 'peek', 'stored_answer', 'consume_once', 'outbox_put') LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO $role', f);
  END LOOP;
END \$\$});
}

# $query as $role (SET ROLE; superusers pass every owner check): its
# output, or "ERROR <SQLSTATE> <message>".
sub as_role {
	my ($db, $role, $query) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nSET ROLE $role;\n$query");
	return $out if $ret == 0;
	return $err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "ERROR $1 $2" : "failed: $err";
}

sub check_constraints {
	my ($db) = @_;
	return sql($db, q{
SELECT string_agg(conname || CASE WHEN convalidated THEN '' ELSE ' NOT VALID' END, ', ' ORDER BY conname)
  FROM pg_constraint
 WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c'});
}

# ---- 1.0, filled: a key in every status ----
my $db = 'upgraded';
create_database($db);
install_1_0($db);
my @rules_1_0 = split /\n/, sql($db, q{
SELECT conname FROM pg_constraint
 WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c' ORDER BY oid});
is(scalar(@rules_1_0), 13, '1.0 has thirteen CHECK constraints');

# Each 1.0 rule on a table of its own, kept to judge 1.1's function against
# 1.0's own constraint text after the update. rule_order: 1.0's order.
sql($db, q{
CREATE TABLE rule_order AS
SELECT row_number() OVER (ORDER BY oid) AS position, conname::text AS rule
  FROM pg_constraint
 WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c';
DO $$
DECLARE c record;
BEGIN
  FOR c IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
            WHERE conrelid = 'idem.idempotency_request'::regclass AND contype = 'c' LOOP
    EXECUTE format('CREATE TABLE %I (LIKE idem.idempotency_request)', 'rule_' || c.conname);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', 'rule_' || c.conname, c.conname, c.def);
  END LOOP;
END $$;
});

# Claims a key; returns its fence.
sub claim {
	my ($key, @args) = @_;
	my $extra = @args ? ', ' . join(', ', @args) : '';
	return sql($db, qq{SELECT fence FROM idem.claim_idempotency_key('up', '$key', 'h'$extra)});
}

my %fence;
$fence{succeeded} = claim('succeeded');
sql($db, qq{SELECT idem.mark_succeeded('up', 'succeeded', $fence{succeeded}, 201,
  '{"order": {"id": 42, "note": "na\\u00efve \\u2603"}, "items": [1, 2.50, null]}', 'order', '42')});
$fence{final} = claim('final');
sql($db, qq{SELECT idem.mark_failed('up', 'final', $fence{final}, false, 'card_declined',
  'The card was declined', 402, '{"error": "declined"}')});
$fence{retryable} = claim('retryable');
sql($db, qq{SELECT idem.mark_failed('up', 'retryable', $fence{retryable}, true, 'timeout', 'upstream timed out')});
# Locks and expiries that run out at once, for the sweeper.
for my $key (qw(abandoned abandoned_taken expired)) {
	my $retention = $key eq 'expired' ? q{'1 millisecond'} : 'NULL';
	$fence{$key} = claim($key, 'NULL', q{'1 millisecond'}, $retention);
	sql($db, qq{SELECT idem.set_recovery_point('up', '$key', $fence{$key}, 'reserved')});
}
$fence{expired_success} = claim('expired_success', 'NULL', 'NULL', q{'1 millisecond'});
sql($db, qq{SELECT idem.mark_succeeded('up', 'expired_success', $fence{expired_success}, 200)});
$node->poll_query_until($db, q{
SELECT bool_and(CASE key
                  WHEN 'expired_success' THEN expires_at < clock_timestamp()
                  WHEN 'expired' THEN locked_until < clock_timestamp() AND expires_at < clock_timestamp()
                  ELSE locked_until < clock_timestamp() END)
  FROM idem.idempotency_request
 WHERE key IN ('abandoned', 'abandoned_taken', 'expired', 'expired_success')})
  or die 'the short locks and expiries did not run out';
is(sql($db, 'SELECT idem.sweep_stale()'), '3', 'sweeper: two keys abandoned, one expired');

# The in-flight key's owner: a session that claimed before the update and
# completes after it, with the plans it prepared under 1.0.
my $owner = DBI->connect('dbi:Pg:dbname=' . $db . ';host=' . $node->host . ';port=' . $node->port,
	'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 })
  or die "cannot connect: $DBI::errstr";
($fence{processing}) = $owner->selectrow_array(
	q{SELECT fence FROM idem.claim_idempotency_key('up', 'processing', 'h', lock_timeout => '1 hour')});
$owner->do(q{SELECT idem.set_recovery_point('up', 'processing', ?, 'charged')}, undef, $fence{processing});

is(sql($db, q{SELECT string_agg(key || ' ' || status || ' ' || recovery_point || ' ' || coalesce(failure_code, '-'), ', ' ORDER BY key)
               FROM idem.idempotency_request}),
	'abandoned failed_retryable reserved abandoned, abandoned_taken failed_retryable reserved abandoned, '
	  . 'expired failed_final reserved expired, expired_success succeeded finished -, '
	  . 'final failed_final started card_declined, processing processing charged -, '
	  . 'retryable failed_retryable started timeout, succeeded succeeded finished -',
	'1.0 holds a key in every status');

# What must not change: every stored row, and the answers of the keys that
# replay (a success, a final failure, an in-flight key).
# (1.1's new columns left out: the update adds them empty.)
my $rows_sql = q{SELECT string_agg((to_jsonb(r) - 'bound_session')::text, E'\n' ORDER BY key) FROM idem.idempotency_request r};
my $replays_sql = q{SELECT string_agg(k || ' ' || (idem.claim_idempotency_key('up', k, 'h'))::text, E'\n' ORDER BY k)
                      FROM unnest(ARRAY['succeeded', 'final', 'processing']) k};
my $rows_before = sql($db, $rows_sql);
my $replays_before = sql($db, $replays_sql);
like($replays_before,
	qr/^final \(final_failure,,1,started,402,.*\nprocessing \(processing_active,,1,charged,.*\nsucceeded \(replay_success,,1,finished,201,.*""items"": \[1, 2\.50, null\]/s,
	'replays before the update');
my $last_fence = sql($db, 'SELECT last_value FROM idem.fence_seq');

# ---- the update ----
update_idem($db);
is(check_constraints($db), 'idempotency_request_invariants NOT VALID',
	'thirteen constraints replaced by one, left NOT VALID on a table with keys (no scan under the lock)');
is(sql($db, $rows_sql), $rows_before, 'every stored row is unchanged');
is(sql($db, $replays_sql), $replays_before, 'every replay answers the same bytes');

# ==== owners: idem.scope_owner arrives empty, so nothing is covered ====
# A role that is not superuser (superusers pass every owner check) gets the
# answers 1.0 gave for every key; then an owner row is in force at once.
sql('postgres', 'CREATE ROLE up_tenant; CREATE ROLE up_owner');
grant_calls($db, 'up_tenant');
is(sql($db, q{SELECT (SELECT count(*) FROM idem.scope_owner) || ' ' || ('idem.scope_owner'::regclass = ANY (extconfig))
                FROM pg_extension WHERE extname = 'idem'}),
	'0 true', 'idem.scope_owner arrives with the update, empty, and marked for pg_dump');
is(as_role($db, 'up_tenant', $replays_sql), $replays_before,
	'nothing is covered: every replay answers the same bytes to a role that is not superuser');
my $peeks_sql = 'SELECT string_agg(k || \' \' || coalesce(idem.peek(\'up\', k)::text, \'NULL\'), E\'\\n\' ORDER BY k) FROM unnest(ARRAY['
  . sql($db, q{SELECT string_agg(quote_literal(key), ', ' ORDER BY key) FROM idem.idempotency_request}) . ']::text[]) k';
is(as_role($db, 'up_tenant', $peeks_sql), sql($db, $peeks_sql),
	'every key of 1.0 peeks the same to that role as to the superuser');
sql($db, q{INSERT INTO idem.scope_owner (scope_prefix, owner) VALUES ('u', 'up_owner')});
is(as_role($db, 'up_tenant', q{SELECT kind FROM idem.claim_idempotency_key('up', 'succeeded', 'h')}),
	'ERROR 42501 permission denied for idempotency scope "up"', 'an owner row refuses a role that is not its member');
sql('postgres', 'GRANT up_owner TO up_tenant');
is(as_role($db, 'up_tenant', q{SELECT kind FROM idem.claim_idempotency_key('up', 'succeeded', 'h')}),
	'replay_success', 'and answers a member of its owner');
sql('postgres', 'REVOKE up_owner FROM up_tenant');
sql($db, 'DELETE FROM idem.scope_owner');
# ==== end owners ====

# ==== inbox: the inbox and the outbox arrive with the update and work ====
is(sql($db, q{SELECT string_agg(p.oid::regprocedure::text, ', '
                                  ORDER BY p.proname, p.oid::regprocedure::text COLLATE "C")
                FROM pg_proc p WHERE p.pronamespace = 'idem'::regnamespace
                 AND (p.proname LIKE 'outbox%' OR p.proname LIKE '%consume%')}),
	'idem.consume_once(text,text,text,interval), '
	. 'idem.consumed_message_invariants_hold(idem.consumed_message), '
	. 'idem.consumed_message_invariants_hold(text,text,text,timestamp with time zone,timestamp with time zone), '
	. 'idem.outbox_event_invariants_hold(idem.outbox_event), '
	. 'idem.outbox_event_invariants_hold(text,text,text,idem.outbox_status,timestamp with time zone,bigint,timestamp with time zone), '
	. 'idem.outbox_failed(bigint,bigint,text,interval), '
	. 'idem.outbox_lease(integer,interval,text[]), idem.outbox_lease_lost(bigint,bigint,text), '
	. 'idem.outbox_published(bigint,bigint), idem.outbox_put(text,text,text,jsonb,text,text,jsonb,timestamp with time zone), '
	. 'idem.purge_consumed(integer), idem.set_consumed_result(text,text,text,text)',
	'inbox and outbox functions exist after the update');
is(sql($db, q{SELECT string_agg(conrelid::regclass || ' ' || conname, ', ' ORDER BY conname)
                FROM pg_constraint WHERE contype = 'c' AND convalidated
                 AND conrelid IN ('idem.consumed_message'::regclass, 'idem.outbox_event'::regclass)}),
	'idem.consumed_message consumed_message_invariants, idem.outbox_event outbox_event_invariants',
	'the inbox and the outbox arrive with one validated CHECK each');
is(sql($db, q{SELECT idem.consume_once('up', 'm1', 'h')::text || ' ' || idem.consume_once('up', 'm1', 'h')::text}),
	'true false', 'consume_once after the update');
sql($db, q{SELECT idem.outbox_put('up', 'k', 'evt', '{"n": 1}', 'agg', '1')});
is(sql($db, q{SELECT count(idem.outbox_published(id, lease_fence)) FROM idem.outbox_lease(10)}), '1',
	'outbox put, lease and published after the update');
is(sql($db, q{SELECT published FROM idem.outbox_summary}), '1', 'the outbox summary after the update');
# ==== end inbox ====
is(sql($db, q{SELECT count(*) FROM idem.idempotency_request WHERE bound_session IS NOT NULL}), '0',
	'keys of 1.0 are bound to no session');
# 1.1's lease functions work on a key claimed under 1.0: a twin waits for it
# (max_wait runs out), its owner extends its lock.
is(sql($db, q{SELECT kind FROM idem.claim_or_wait('up', 'processing', 'h', interval '100 milliseconds')}),
	'processing_active', 'claim_or_wait on a 1.0 in-flight key waits, then reports it in flight');
ok($owner->selectrow_array(q{SELECT idem.extend_lock('up', 'processing', ?, interval '2 hours') > now() + interval '90 minutes'},
		undef, $fence{processing}), 'extend_lock lengthens the lock of a key claimed under 1.0');
is(sql($db, q{SELECT kind FROM idem.claim_or_wait('up', 'brand_new_waiter', 'h', interval '1 second')}),
	'new_claim', 'claim_or_wait claims a new key after the update');
sql($db, q{DELETE FROM idem.idempotency_request WHERE key = 'brand_new_waiter'});

# The owner completes its in-flight key from the session it claimed in.
$owner->do(q{SELECT idem.mark_succeeded('up', 'processing', ?, 200, '{"charged": true}')}, undef, $fence{processing});
$owner->disconnect;
is(sql($db, q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('up', 'processing', 'h')}),
	'replay_success {"charged": true}', 'the owner of an in-flight key completed it after the update');
# The owner of a swept key completes it with its fence (no claim since).
sql($db, qq{SELECT idem.mark_succeeded('up', 'abandoned', $fence{abandoned}, 201)});
is(sql($db, q{SELECT status || ' ' || recovery_point FROM idem.idempotency_request WHERE key = 'abandoned'}),
	'succeeded finished', 'the owner of an abandoned key completed it');

# Fences keep rising: every ownership granted after the update, in order.
my @after;
for my $case ([ 'brand_new', 'new_claim' ], [ 'abandoned_taken', 'retryable_failure' ],
	[ 'retryable', 'retryable_failure' ], [ 'expired', 'new_claim' ], [ 'expired_success', 'new_claim' ])
{
	my ($key, $kind) = @$case;
	my ($got_kind, $fence, $point) = split /\|/, sql($db,
		qq{SELECT kind, fence, recovery_point FROM idem.claim_idempotency_key('up', '$key', 'h')});
	is($got_kind, $kind, "after the update, $key claims as $kind");
	push @after, $fence;
	is($point, 'reserved', 'the takeover resumes from the checkpoint') if $key eq 'abandoned_taken';
}
ok($after[0] > $last_fence, "the first fence after the update ($after[0]) exceeds every earlier one ($last_fence)");
is_deeply([ sort { $a <=> $b } @after ], \@after, 'fences rise in claim order');
is(scalar(keys %{ { map { $_ => 1 } @after } }), scalar(@after), 'no fence is issued twice');
my (undef, undef, $stale_err) = $node->psql($db,
	qq{\\set VERBOSITY verbose\nSELECT idem.mark_succeeded('up', 'retryable', $fence{retryable}, 200)});
like($stale_err, qr/ERROR:  P4012:/, 'the 1.0 owner of a key taken over after the update is fenced off (P4012)');

# A superuser's hand-written UPDATE that breaks an invariant is refused by the
# database, on a row written before the update and on one written after.
for my $case ([ 'final', 'locked_until = now()', 'outcome_is_unlocked_and_dated' ],
	[ 'brand_new', q{recovery_point = 'finished'}, 'finished_means_succeeded' ])
{
	my ($key, $set, $rule) = @$case;
	my (undef, undef, $err) = $node->psql($db,
		qq{\\set VERBOSITY verbose\nUPDATE idem.idempotency_request SET $set WHERE scope = 'up' AND key = '$key'});
	like($err, qr/ERROR:  23514: new row violates idem invariant "$rule"/, "hand-written UPDATE of $key: 23514 $rule");
}

# Every row written under 1.0 keeps 1.1's rules: validating scans them all.
sql($db, 'ALTER TABLE idem.idempotency_request VALIDATE CONSTRAINT idempotency_request_invariants');
is(check_constraints($db), 'idempotency_request_invariants', 'VALIDATE CONSTRAINT accepts every row');

# ---- 1.1's function against 1.0's thirteen constraints ----
# Rows that hold the rules for their status, with zero to two columns changed
# at random (seeded); each row goes to the thirteen one-rule tables and to the
# function. They must refuse the same rows, and the function must name the
# first rule (in 1.0's order) that 1.0 found broken.
sql($db, q{
CREATE FUNCTION judge(n integer, OUT rows_tried integer, OUT accepted integer,
                      OUT mismatches integer, OUT examples text, OUT named text[])
LANGUAGE plpgsql AS $$
DECLARE
  statuses text[] := ARRAY['processing', 'succeeded', 'failed_retryable', 'failed_final'];
  st text; sc text; k text; rh text; rp text; fe bigint; ac integer; lu timestamptz;
  rc integer; rb jsonb; fc text; fm text; ca timestamptz; fa timestamptz; ea timestamptz;
  broken text[]; verdict text; expected text; r record;
BEGIN
  PERFORM setseed(0.2026);
  rows_tried := n; accepted := 0; mismatches := 0; examples := ''; named := '{}';
  FOR i IN 1 .. n LOOP
    st := statuses[1 + floor(random() * 4)::int];
    sc := 'up'; k := 'k' || i; rh := 'h'; fe := i; ac := 1;
    rp := CASE st WHEN 'succeeded' THEN 'finished' ELSE 'started' END;
    lu := CASE st WHEN 'processing' THEN now() + interval '1 hour' END;
    rc := CASE st WHEN 'succeeded' THEN 201 END;
    rb := CASE st WHEN 'succeeded' THEN '{"ok": true}'::jsonb END;
    fc := CASE WHEN st LIKE 'failed%' THEN 'boom' END;
    fm := NULL;
    ca := now();
    fa := CASE WHEN st <> 'processing' THEN now() END;
    ea := now() + interval '1 day';
    FOR m IN 1 .. floor(random() * 3)::int LOOP
      CASE 1 + floor(random() * 15)::int
        WHEN 1 THEN sc := (ARRAY['', 'x', repeat('é', 255), repeat('é', 256), repeat('x', 256)])[1 + floor(random() * 5)::int];
        WHEN 2 THEN k := (ARRAY['', 'y', repeat('ü', 255), repeat('ü', 256), repeat('y', 256)])[1 + floor(random() * 5)::int];
        WHEN 3 THEN rh := (ARRAY['', 'h2'])[1 + floor(random() * 2)::int];
        WHEN 4 THEN st := statuses[1 + floor(random() * 4)::int];
        WHEN 5 THEN rp := (ARRAY['', 'finished', 'started', 'Finished'])[1 + floor(random() * 4)::int];
        WHEN 6 THEN fe := (ARRAY[-1, 0, 1, 9223372036854775807])[1 + floor(random() * 4)::int];
        WHEN 7 THEN ac := (ARRAY[-5, 0, 1, 2])[1 + floor(random() * 4)::int];
        WHEN 8 THEN lu := (ARRAY[NULL, now()])[1 + floor(random() * 2)::int];
        WHEN 9 THEN rc := (ARRAY[NULL, 99, 100, 200, 599, 600])[1 + floor(random() * 6)::int];
        WHEN 10 THEN rb := (ARRAY[NULL, '{}', 'null'])[1 + floor(random() * 3)::int]::jsonb;
        WHEN 11 THEN fc := (ARRAY[NULL, '', 'x'])[1 + floor(random() * 3)::int];
        WHEN 12 THEN fm := (ARRAY[NULL, '', 'm'])[1 + floor(random() * 3)::int];
        WHEN 13 THEN ca := (ARRAY[now() + interval '1 day', now() - interval '1 day', 'infinity', '-infinity'])[1 + floor(random() * 4)::int];
        WHEN 14 THEN fa := (ARRAY[NULL, now()])[1 + floor(random() * 2)::int];
        WHEN 15 THEN ea := (ARRAY[now(), 'infinity', '-infinity', now() + interval '1 day'])[1 + floor(random() * 4)::int];
      END CASE;
    END LOOP;
    broken := '{}';
    FOR r IN SELECT rule FROM rule_order ORDER BY position LOOP
      BEGIN
        EXECUTE format('INSERT INTO %I (scope, key, request_hash, status, recovery_point, fence, attempt_count,
                          claimed_at, locked_until, response_code, response_body, failure_code, failure_message,
                          created_at, updated_at, finished_at, expires_at)
                        VALUES ($1, $2, $3, $4::idem.idempotency_status, $5, $6, $7, now(), $8, $9, $10, $11,
                                $12, $13, now(), $14, $15)', 'rule_' || r.rule)
          USING sc, k, rh, st, rp, fe, ac, lu, rc, rb, fc, fm, ca, fa, ea;
      EXCEPTION WHEN check_violation THEN
        broken := broken || r.rule;
      END;
    END LOOP;
    BEGIN
      PERFORM idem.request_invariants_hold(sc, k, rh, st::idem.idempotency_status, rp, fe, ac, lu,
                                           rc, rb, fc, fm, ca, fa, ea);
      verdict := NULL;
    EXCEPTION WHEN check_violation THEN
      verdict := substring(SQLERRM FROM 'invariant "([a-z_]+)"');
    END;
    expected := broken[1];
    IF verdict IS NULL THEN accepted := accepted + 1; ELSE named := named || verdict; END IF;
    IF verdict IS DISTINCT FROM expected THEN
      mismatches := mismatches + 1;
      IF mismatches <= 3 THEN
        examples := examples || format(E'row %s: 1.0 broke %s, 1.1 named %s\n', i, broken, verdict);
      END IF;
    END IF;
  END LOOP;
END $$;
});
my ($tried, $accepted, $mismatches, $examples, $named) = split /\|/,
  sql($db, q{SELECT rows_tried, accepted, mismatches, examples,
                    (SELECT string_agg(x, ',' ORDER BY x COLLATE "C") FROM (SELECT DISTINCT x FROM unnest(named) x) d) FROM judge(3000)});
note("equivalence: $tried rows, $accepted accepted by both");
is($mismatches, 0, "1.0's constraints and 1.1's function refuse the same rows and name the same rule")
  or diag($examples);
ok($accepted >= 300 && $tried - $accepted >= 300, 'the sample holds both accepted and refused rows');
is($named, join(',', sort @rules_1_0), 'every one of the thirteen rules was seen broken');

# ---- the schema: a fresh install (1.3) and updated ones are the same ----
# pg_dump --binary-upgrade writes out each member of the extension (a plain
# dump writes only CREATE EXTENSION); OIDs and xids are left out.
create_database('fresh');
sql('fresh', 'CREATE EXTENSION idem');
create_database('stepwise');
install_1_0('stepwise');
# Between the new library and the update, idem.stats answers with the
# columns of the schema's version (the library fills 1.0's and 1.1's).
my $stats_sql = q{SELECT count(*) || ' ' || (SELECT count(*) FROM pg_attribute
                    WHERE attrelid = 'idem.stats'::regclass AND attnum > 0)
                  FROM idem.stats WHERE datname = current_database()};
is(sql('stepwise', $stats_sql), '1 19', 'a 1.0 schema reads its 19 columns of idem.stats from the 1.3 library');
# The same for idem.worker_status: 1.0's and 1.1's eight columns.
my $status_sql = q{SELECT count(*) || ' ' || (SELECT count(*) FROM pg_attribute
                     WHERE attrelid = 'idem.worker_status'::regclass AND attnum > 0)
                   FROM idem.worker_status};
like(sql('stepwise', $status_sql), qr/^[1-9][0-9]* 8$/,
	'a 1.0 schema reads its 8 columns of idem.worker_status from the 1.3 library');
update_idem('stepwise');
# From a 1.1 install, the updates of 1.2 and 1.3 in one command.
create_database('from_1_1');
sql('from_1_1', q{CREATE EXTENSION idem VERSION '1.1'});
is(sql('from_1_1', $stats_sql), '1 30', 'a 1.1 schema reads its 30 columns of idem.stats from the 1.3 library');
like(sql('from_1_1', $status_sql), qr/^[1-9][0-9]* 8$/,
	'a 1.1 schema reads its 8 columns of idem.worker_status from the 1.3 library');
sql('from_1_1', 'ALTER EXTENSION idem UPDATE');
is(sql('from_1_1', $stats_sql), '1 33',
	'after the update, 33 with messages_purged, events_purged and failed_rounds');
like(sql('from_1_1', $status_sql), qr/^[1-9][0-9]* 13$/,
	'and idem.worker_status 13, with failed_rounds, failing_since and the last error');
is(sql('from_1_1', q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.3',
	'from_1_1: idem updated from 1.1 to 1.3');
# From a 1.2 install (the released 1.2.0), the one update of 1.3.
create_database('from_1_2');
sql('from_1_2', q{CREATE EXTENSION idem VERSION '1.2'});
is(sql('from_1_2', $stats_sql), '1 33', 'a 1.2 schema reads its 33 columns of idem.stats from the 1.3 library');
like(sql('from_1_2', $status_sql), qr/^[1-9][0-9]* 13$/,
	'a 1.2 schema reads its 13 columns of idem.worker_status from the 1.3 library');
sql('from_1_2', 'ALTER EXTENSION idem UPDATE');
is(sql('from_1_2', q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}), '1.3',
	'from_1_2: idem updated from 1.2 to 1.3');
my %schema;
for my $d (qw(fresh stepwise from_1_1 from_1_2)) {
	my $file = PostgreSQL::Test::Utils::tempdir . "/$d.sql";
	$node->command_ok([ 'pg_dump', '--binary-upgrade', '--schema-only', '-f', $file, '-d', $d ],
		"pg_dump --binary-upgrade of $d");
	$schema{$d} = join '', grep {
		!/binary_upgrade_set_next_|^\\(un)?restrict |relfrozenxid|^WHERE oid = '\d+';$/
	} split /^/, slurp_file($file);
	$schema{$d} =~ s/(binary_upgrade_create_empty_extension\(.*?)'\{[\d,]+\}'/$1'{config oids}'/;
}
like($schema{fresh}, qr/CONSTRAINT idempotency_request_invariants CHECK \(idem\.request_invariants_hold\(/,
	'the dump shows the members (the invariants constraint)');
is($schema{stepwise}, $schema{fresh}, 'CREATE EXTENSION idem and 1.0 + ALTER EXTENSION UPDATE build the same schema');
is($schema{from_1_1}, $schema{fresh}, 'CREATE EXTENSION idem and 1.1 + ALTER EXTENSION UPDATE build the same schema');
is($schema{from_1_2}, $schema{fresh}, 'CREATE EXTENSION idem and 1.2 + ALTER EXTENSION UPDATE build the same schema');
# 1.2's storage settings, on a fresh install and on every update.
for my $d (qw(fresh stepwise from_1_1 from_1_2)) {
	is(sql($d, q{SELECT string_agg(relname || ' ' || array_to_string(reloptions, ','), '; ' ORDER BY relname)
	               FROM pg_class WHERE relnamespace = 'idem'::regnamespace AND reloptions IS NOT NULL}),
		'consumed_message vacuum_truncate=false; idempotency_request vacuum_truncate=false; outbox_event vacuum_truncate=false',
		"$d: the churned tables keep the pages a vacuum empties (vacuum_truncate off)");
}
# 1.2's call on a database that came from 1.0: the round runs, and the key
# the policy section below relies on is untouched by it.
like(sql('stepwise', q{SELECT idem.run_maintenance()}), qr/"swept": 0,/,
	'after the updates, idem.run_maintenance() runs');
is(sql('stepwise', q{SELECT has_function_privilege('public', 'idem.run_maintenance()', 'EXECUTE')}), 'f',
	'and is not granted to PUBLIC after the update');
# 1.2's adapter calls on a database that came from 1.0: a key released and
# claimed afresh, a peek; neither granted to PUBLIC.
is(sql('stepwise', q{SELECT idem.release('up_release', 'k', fence) FROM idem.claim_idempotency_key('up_release', 'k', 'h')}), '',
	'after the updates, idem.release releases a key');
is(sql('stepwise', q{SELECT kind FROM idem.claim_idempotency_key('up_release', 'k', 'another body')}), 'new_claim',
	'and the next claim is new with another hash');
is(sql('stepwise', q{SELECT kind FROM idem.peek('up_release', 'k')}), 'processing_active', 'idem.peek reads it');
is(sql('stepwise', q{SELECT has_function_privilege('public', 'idem.release(text, text, bigint)', 'EXECUTE')
                       OR has_function_privilege('public', 'idem.peek(text, text)', 'EXECUTE')}), 'f',
	'release and peek are not granted to PUBLIC after the update');
is(check_constraints('fresh'), 'idempotency_request_invariants', 'a fresh install validates its constraint');

# ==== owners: from 1.1, answers unchanged; pg_dump and pg_restore carry the rows ====
# A key, a message and an event written under 1.1, and what a role that is
# not superuser was answered then; after the update the same, until an
# owner row covers the scope.
create_database('owners_1_1');
sql('owners_1_1', q{CREATE EXTENSION idem VERSION '1.1'});
grant_calls('owners_1_1', 'up_tenant');
sql('owners_1_1', q{
SELECT idem.mark_succeeded('up', 'k', fence, 201, '{"v": 1}') FROM idem.claim_idempotency_key('up', 'k', 'h');
SELECT idem.consume_once('up', 'm', 'h');
SELECT idem.outbox_put('up', 'k', 'evt', '{"v": 1}');});
my $answers_sql = q{SELECT (idem.claim_idempotency_key('up', 'k', 'h'))::text, (idem.stored_answer('up', 'k'))::text,
                           idem.consume_once('up', 'm', 'h'), idem.outbox_put('up', 'k', 'evt', '{"v": 1}')};
my $answers_1_1 = as_role('owners_1_1', 'up_tenant', $answers_sql);
like($answers_1_1, qr/^\(replay_success,.*\|f\|\d+$/, '1.1 answers a role that is not superuser');
sql('owners_1_1', 'ALTER EXTENSION idem UPDATE');
grant_calls('owners_1_1', 'up_tenant');
is(as_role('owners_1_1', 'up_tenant', $answers_sql), $answers_1_1, 'after the update from 1.1, the same answers');
sql('owners_1_1', q{INSERT INTO idem.scope_owner (scope_prefix, owner) VALUES ('', 'up_owner'), ('up', 'up_tenant')});
is(as_role('owners_1_1', 'up_tenant', $answers_sql), $answers_1_1, 'and with the scope owned by that role');
is(as_role('owners_1_1', 'up_tenant', q{SELECT idem.consume_once('other', 'm', 'h')}),
	'ERROR 42501 permission denied for idempotency scope "other"', "a scope under '' owned by another role is refused");

my $owners_sql = q{SELECT string_agg(quote_literal(scope_prefix) || ' ' || owner::text, ', ' ORDER BY scope_prefix) FROM idem.scope_owner};
my $dump = PostgreSQL::Test::Utils::tempdir . '/owners_1_1.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'owners_1_1' ], 'pg_dump of a database with owner rows');
create_database('owners_restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '--single-transaction', '-d', 'owners_restored', $dump ],
	'pg_restore of it');
is(sql('owners_restored', $owners_sql), q{'' up_owner, 'up' up_tenant}, 'the owner rows came along (pg_extension_config_dump)');
is(as_role('owners_restored', 'up_tenant', $answers_sql), $answers_1_1, 'and the restored scope answers its owner');
is(as_role('owners_restored', 'up_tenant', q{SELECT idem.consume_once('other', 'm', 'h')}),
	'ERROR 42501 permission denied for idempotency scope "other"', 'and refuses a scope owned by another role');
# ==== end owners ====

# ---- 1.1's scope policy after ALTER EXTENSION UPDATE ----
sql($db, q{INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts) VALUES ('up_policy', '42 seconds', 1)});
is(sql($db, q{WITH c AS (SELECT * FROM idem.claim_idempotency_key('up_policy', 'k', 'h'))
              SELECT c.locked_until - r.claimed_at FROM c, idem.lookup('up_policy', 'k') r}),
	'00:00:42', 'after the update, a scope policy sets the lock of a claim');
sql($db, q{UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second' WHERE scope = 'up_policy'});
is(sql($db, q{SELECT kind || ' ' || failure_code FROM idem.claim_idempotency_key('up_policy', 'k', 'h')}),
	'final_failure too_many_attempts', 'and its max_attempts ends a key');

# ---- the contract suites on an updated install ----
my $contract = 'contract';
create_database($contract);
install_1_0($contract);
update_idem($contract);
my ($psql_dir) = grep { -x "$_/psql" } split /:/, $ENV{PATH};
my $out = PostgreSQL::Test::Utils::tempdir;
my @regress = map { m{/([^/]+)\.sql$} ? $1 : () } glob("$tree/test/sql/*.sql");
my @specs = map { m{/([^/]+)\.spec$} ? $1 : () } glob("$tree/test/specs/*.spec");
my @common = ('--use-existing', "--dbname=$contract", "--bindir=$psql_dir",
	'--host=' . $node->host, '--port=' . $node->port);
(my $isolation = $ENV{PG_REGRESS}) =~ s{regress/pg_regress$}{isolation/pg_isolation_regress};
die "no pg_isolation_regress beside PG_REGRESS ($ENV{PG_REGRESS})" unless $isolation ne $ENV{PG_REGRESS} && -x $isolation;
for my $suite ([ 'regress', $ENV{PG_REGRESS}, "$tree/test", \@regress ],
	[ 'isolation', $isolation, "$tree/test", \@specs ])
{
	my ($name, $driver, $inputdir, $tests) = @$suite;
	my $ok = $node->command_ok([ $driver, @common, "--inputdir=$inputdir", "--outputdir=$out/$name", @$tests ],
		"the $name suite (" . scalar(@$tests) . ' files) passes on an updated install');
	diag(slurp_file("$out/$name/regression.diffs")) if !$ok && -f "$out/$name/regression.diffs";
}

done_testing();
