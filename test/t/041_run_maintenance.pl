# idem.run_maintenance() where it is meant to run: a server without the
# preload (no worker), called by a scheduler's role that is not a superuser.
# One call is bounded (at most 10 batches of idem.batch_size a stage) and says
# when work is left ("more"); the next call goes on. A completer runs as its
# owner, never as the caller or the extension's owner.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('run_maintenance');
$node->init;
# idem.batch_size is a server setting (PGC_SIGHUP): two rows a batch.
$node->append_conf('postgresql.conf', "idem.batch_size = 2\n");
$node->start;
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{CREATE EXTENSION idem});
sql(q{CREATE ROLE ops LOGIN; CREATE ROLE app;
      GRANT USAGE ON SCHEMA idem TO ops, app;
      GRANT EXECUTE ON FUNCTION idem.run_maintenance() TO ops;
      GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text) TO app;});

# 25 keys whose lock ran out.
sql(q{SELECT count(*) FROM generate_series(1, 25) g, idem.claim_idempotency_key('bulk', 'k' || g, 'h')});
sql(q{UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'});

my $report = sql(q{SET ROLE ops; SELECT idem.run_maintenance()});
like($report, qr/"swept": 20,/, 'a call sweeps at most 10 batches of idem.batch_size');
like($report, qr/"more": true/, 'and says work is left');
like($report, qr/"batches": 13,/, 'ten sweep batches, one of each purge');
$report = sql(q{SET ROLE ops; SELECT idem.run_maintenance()});
like($report, qr/"swept": 5,/, 'the next call sweeps the rest');
like($report, qr/"more": false/, 'and says nothing is left');
is(sql(q{SELECT count(*) FROM idem.idempotency_request WHERE status = 'processing'}), '0',
	'every stale key was swept');

# Completers of role app, not SECURITY DEFINER: the C++ engine runs them as
# app. One records an outcome; one tries the extension owner's table.
sql(q{CREATE FUNCTION public.finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
      RETURNS void LANGUAGE sql AS $$
        SELECT idem.mark_succeeded(scope, key, fence, 200, jsonb_build_object('ran_as', current_user::text)) $$;
      CREATE FUNCTION public.peek(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
      RETURNS void LANGUAGE sql AS $$ SELECT count(*) FROM idem.idempotency_request; $$;
      ALTER FUNCTION public.finish(text, text, bigint, text, integer) OWNER TO app;
      ALTER FUNCTION public.peek(text, text, bigint, text, integer) OWNER TO app;
      INSERT INTO idem.scope_policy (scope, completer) VALUES
        ('done', 'public.finish(text, text, bigint, text, integer)'),
        ('nosy', 'public.peek(text, text, bigint, text, integer)');});
for my $scope (qw(done nosy)) {
	sql(qq{SELECT kind FROM idem.claim_idempotency_key('$scope', 'k', 'h')});
}
sql(q{UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second' WHERE key = 'k'});
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{SET ROLE ops; SELECT idem.run_maintenance()});
is($ret, 0, 'the call succeeds when a completer fails');
like($stdout, qr/"completer_runs": 2,.*"completer_failures": 1,.*"completer_successes": 1/,
	'two completers ran: one recorded its outcome, one failed');
like($stderr, qr/WARNING:  idem completer public\.peek\(text,text,bigint,text,integer\) for scope "nosy", key "k" failed: permission denied for table idempotency_request/,
	'the one that read the extension owner\'s table was refused, and logged with scope and key');
is(sql(q{SELECT response_body->>'ran_as' FROM idem.idempotency_request WHERE scope = 'done'}), 'app',
	'the completer ran as its owner, not as the caller or the extension owner');
is(sql(q{SELECT status || ' ' || claimed_by FROM idem.idempotency_request WHERE scope = 'nosy'}),
	'processing idem completer', "the failed completer's work is undone, the call's claim kept");

done_testing();
