# Tenant storm: two services share one database, each a LOGIN role owning a
# prefix of scopes (idem.scope_owner). Clients of both hammer their own
# scope (claim, mark_succeeded, replay, stored_answer, peek, consume_once,
# outbox_put, outbox_lease and outbox_published) and, in between, the other
# tenant's scope with every call kind that is covered, on its real keys,
# fences and messages (each of which, unrefused, would read a stored answer
# or take over, complete, extend or release an in-flight key). Afterwards:
# every own call answered as it would without owners, every cross call
# refused with 42501 naming the scope, no leak (a cross call answered
# otherwise, a lease of the other tenant's event, a stored answer seen by
# the wrong tenant), the other tenant's keys, message and events untouched,
# and every change of idem.scope_owner (INSERT, UPDATE, DELETE, TRUNCATE) in
# the server log. Runs on both engines (IdemProof.pm start_node;
# test/portable/proofs.sh runs it with IDEM_ENGINE=portable).
use strict;
use warnings;
use DBI;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node run_clients connect_or_die poll_until);
use PostgreSQL::Test::Utils;
use Time::HiRes ();
use Test::More;

my $per_tenant = $ENV{TENANT_STORM_CLIENTS} // 4;
my $duration   = $ENV{TENANT_STORM_SECONDS} // 8;
my @tenants    = qw(a b);
my %scope      = map { $_ => "tenant_$_:orders" } @tenants;
my %other      = (a => 'b', b => 'a');

my $node = start_node('tenants');
my $dbh  = connect_or_die($node);    # the bootstrap superuser: passes every check
my $log_offset = -s $node->logfile;

# The tenants: LOGIN roles with the request-path calls, each owning its prefix.
$dbh->do('CREATE ROLE tenant_a LOGIN; CREATE ROLE tenant_b LOGIN');
$dbh->do(q{
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'idem'::regnamespace
              AND p.proname IN ('claim_idempotency_key', 'claim_or_wait', 'mark_succeeded', 'mark_failed',
                                'mark_succeeded_returning', 'mark_failed_returning', 'set_recovery_point',
                                'extend_lock', 'release', 'peek', 'stored_answer', 'retry_after',
                                'typical_duration', 'consume_once', 'set_consumed_result', 'outbox_put',
                                'outbox_lease', 'outbox_published', 'outbox_failed') LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO tenant_a, tenant_b', f);
  END LOOP;
END $$});
$dbh->do(q{INSERT INTO idem.scope_owner (scope_prefix, owner) VALUES ('tenant_a:', 'tenant_a'), ('tenant_b:', 'tenant_b')});

# Each tenant's secrets, written by the superuser: a stored answer, a key in
# flight (its fence is what a thief would need), a consumed message.
my (%inflight_fence, %secret_body);
for my $t (@tenants) {
	my $s = $scope{$t};
	my ($f) = $dbh->selectrow_array(q{SELECT fence FROM idem.claim_idempotency_key($1, 'known', 'h-known')}, undef, $s);
	$secret_body{$t} = qq({"secret": "s-$t", "tenant": "$t"});
	$dbh->do(q{SELECT idem.mark_succeeded($1, 'known', $2, 201, $3::jsonb)}, undef, $s, $f, $secret_body{$t});
	($inflight_fence{$t}) = $dbh->selectrow_array(
		q{SELECT fence FROM idem.claim_idempotency_key($1, 'inflight', 'h-inflight', lock_timeout => '1 hour')}, undef, $s);
	$dbh->do(q{SELECT idem.set_recovery_point($1, 'inflight', $2, 'charged')}, undef, $s, $inflight_fence{$t});
	$dbh->do(q{SELECT idem.consume_once($1, 'm-known', 'h')}, undef, $s);
}
my $secrets_sql = q{
SELECT string_agg(t, E'\n' ORDER BY t) FROM (
  SELECT 'request ' || (to_jsonb(r) - 'bound_session')::text AS t FROM idem.idempotency_request r WHERE key IN ('known', 'inflight')
  UNION ALL SELECT 'consumed ' || to_jsonb(c)::text FROM idem.consumed_message c WHERE message_id = 'm-known') s};
my $secrets_before = $dbh->selectrow_array($secrets_sql);

# Every covered call kind, on the other tenant's scope ($1) and its in-flight
# fence ($2) where it takes one.
my %cross_sql = (
	claim_idempotency_key    => q{SELECT kind FROM idem.claim_idempotency_key($1, 'known', 'h-known')},
	claim_or_wait            => q{SELECT kind FROM idem.claim_or_wait($1, 'known', 'h-known', '10 milliseconds')},
	mark_succeeded           => q{SELECT idem.mark_succeeded($1, 'inflight', $2, 200, '{"stolen": true}')},
	mark_failed              => q{SELECT idem.mark_failed($1, 'inflight', $2, false, 'stolen')},
	mark_succeeded_returning => q{SELECT kind FROM idem.mark_succeeded_returning($1, 'inflight', $2, 200)},
	mark_failed_returning    => q{SELECT kind FROM idem.mark_failed_returning($1, 'inflight', $2, true, 'stolen')},
	set_recovery_point       => q{SELECT idem.set_recovery_point($1, 'inflight', $2, 'stolen')},
	extend_lock              => q{SELECT idem.extend_lock($1, 'inflight', $2, '1 day')},
	release                  => q{SELECT idem.release($1, 'inflight', $2)},
	peek                     => q{SELECT kind FROM idem.peek($1, 'known')},
	stored_answer            => q{SELECT kind, response_body::text FROM idem.stored_answer($1, 'known')},
	retry_after              => q{SELECT idem.retry_after($1, ROW('processing_active', NULL, 1, 'started', NULL, NULL,
	                                NULL, NULL, NULL, NULL, now() + interval '1 hour', NULL)::idem.claim)},
	typical_duration         => q{SELECT idem.typical_duration($1)},
	consume_once             => q{SELECT idem.consume_once($1, 'm-known', 'h')},
	set_consumed_result      => q{SELECT idem.set_consumed_result($1, 'm-known', 'stolen', 'x')},
	outbox_put               => q{SELECT idem.outbox_put($1, 'known', 'stolen', '{"stolen": true}')},
);
my @cross_kinds = sort keys %cross_sql;
# Whether a cross call takes the in-flight fence.
my %takes_fence = map { $_ => 1 } grep { $cross_sql{$_} =~ /\$2/ } @cross_kinds;

my $dir = PostgreSQL::Test::Utils::tempdir;
my $t0  = now() + 1;    # every client starts at the same moment

# One client of tenant $t. Its log: "W what" an own call answered otherwise
# than without owners, "L what" a leak, "P id" an event it published, and a
# last line "T name=count ...".
sub tenant_client {
	my ($t, $i) = @_;
	my $own = $scope{$t};
	my $theirs = $scope{ $other{$t} };
	my $c = DBI->connect(IdemProof::dsn_of($node), "tenant_$t", '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, AutoInactiveDestroy => 1 })
	  or die "tenant_$t: cannot connect: $DBI::errstr";
	open my $log, '>', "$dir/client-$t-$i.log" or die "$dir: $!";
	$log->autoflush(1);
	my %n;
	my $wrong = sub { $n{own_wrong}++; print {$log} "W $_[0]\n"; };
	my $leak = sub { $n{leaks}++; print {$log} "L $_[0]\n"; };
	my $own_call = sub {    # an own call; its row, or undef after counting it wrong
		my ($what, $sql, @bind) = @_;
		$n{own_calls}++;
		my $row = $c->selectrow_arrayref($sql, undef, @bind);
		if ($c->err) { $wrong->("$what: " . $c->state . ' ' . $c->errstr); return undef; }
		return $row // [];
	};
	# Leases a batch and publishes what is its own; returns how many it leased.
	my $relay = sub {
		my $sth = $c->prepare(q{SELECT id, lease_fence, scope, payload->>'tenant' FROM idem.outbox_lease(10, '1 minute')});
		$n{own_calls}++;
		if (!$sth->execute) { $wrong->('outbox_lease: ' . $c->state . ' ' . $c->errstr); return 0; }
		my $rows = $sth->fetchall_arrayref;
		for my $r (@$rows) {
			my ($id, $fence, $scope, $tenant) = @$r;
			$n{leased}++;
			if ($scope ne $own || ($tenant // '') ne $t) {
				$leak->("outbox_lease gave tenant_$t event $id of scope $scope (tenant " . ($tenant // 'none') . ')');
				next;
			}
			next unless $own_call->('outbox_published', q{SELECT idem.outbox_published($1, $2)}, $id, $fence);
			$n{published}++;
			print {$log} "P $id\n";
		}
		return scalar @$rows;
	};

	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $round = 0;
	while (now() < $t0 + $duration) {
		$round++;
		my $key = "c$i-$round";
		my $body = sprintf('{"n": %d, "client": %d, "tenant": "%s"}', $round, $i, $t);
		# Own: a key's life and its replays, a message twice, an event.
		my $row = $own_call->('claim', q{SELECT kind, fence FROM idem.claim_idempotency_key($1, $2, 'h')}, $own, $key)
		  or next;
		$n{claimed}++;
		$wrong->("claim of $key: $row->[0]") unless $row->[0] eq 'new_claim';
		$own_call->('mark_succeeded', q{SELECT idem.mark_succeeded($1, $2, $3, 200, $4::jsonb)}, $own, $key, $row->[1], $body)
		  or next;
		for my $read ([ claim => q{SELECT kind, response_body::text FROM idem.claim_idempotency_key($1, $2, 'h')} ],
			[ stored_answer => q{SELECT kind, response_body::text FROM idem.stored_answer($1, $2)} ],
			[ peek => q{SELECT kind, response_body::text FROM idem.peek($1, $2)} ])
		{
			my ($what, $sql) = @$read;
			my $got = $own_call->("$what (replay)", $sql, $own, $key) or next;
			my ($kind, $answer) = @$got;
			if (($answer // '') =~ /"tenant": "(\w+)"/ && $1 ne $t) {
				$leak->("$what of $own/$key answered tenant $1's body to tenant_$t");
			} elsif ($kind ne 'replay_success' || ($answer // '') ne $body) {
				$wrong->("$what of $key: $kind " . ($answer // 'NULL'));
			} else {
				$n{replays}++;
			}
		}
		for my $expect (1, 0) {
			my $got = $own_call->('consume_once', q{SELECT idem.consume_once($1, $2, 'h')::int}, $own, "m$i-$round") or next;
			$wrong->("consume_once of m$i-$round: $got->[0], not $expect") unless $got->[0] == $expect;
		}
		$own_call->('outbox_put', q{SELECT idem.outbox_put($1, $2, 'charged', $3::jsonb)}, $own, $key, $body) and $n{put}++;
		$relay->();
		# Cross: two call kinds a round, every kind in turn.
		for my $j (0, 1) {
			my $kind = $cross_kinds[ ($i + 2 * $round + $j) % @cross_kinds ];
			my @bind = ($theirs, $takes_fence{$kind} ? ($inflight_fence{ $other{$t} }) : ());
			$n{cross_calls}++;
			my $got = $c->selectrow_arrayref($cross_sql{$kind}, undef, @bind);
			my ($state, $msg) = ($c->state // '', $c->errstr // '');
			if ($c->err && $state eq '42501' && $msg =~ /permission denied for idempotency scope "\Q$theirs\E"/) {
				$n{cross_refused}++;
				$n{"refused_$kind"}++;
			} else {
				$leak->("$kind on $theirs by tenant_$t: "
					  . ($c->err ? "$state $msg" : 'answered ' . join(',', map { $_ // 'NULL' } @{ $got // [] })));
			}
		}
	}
	# Every event of its own that is still pending goes out.
	1 while $relay->() > 0;
	print {$log} 'T ', join(' ', map { "$_=$n{$_}" } sort keys %n), "\n";
	close $log;
	$c->disconnect;
}

my @clients = map { my $t = $_; map { [ $t, $_ ] } 0 .. $per_tenant - 1 } @tenants;
my $failed = run_clients(scalar @clients, sub { tenant_client(@{ $clients[ $_[0] ] }) });
is($failed, 0, 'every tenant client ran to its end');

# The clients' logs: counts per tenant, and what went wrong.
my (%total, %published_by, @wrong, @leaks);
for my $t (@tenants) {
	for my $file (glob("$dir/client-$t-*.log")) {
		open my $in, '<', $file or die "$file: $!";
		while (my $line = <$in>) {
			chomp $line;
			if ($line =~ /^T (.*)/) {
				for (split / /, $1) { my ($k, $v) = split /=/; $total{$t}{$k} += $v; $total{all}{$k} += $v; }
			}
			push @wrong, "tenant_$t: $1" if $line =~ /^W (.*)/;
			push @leaks, "tenant_$t: $1" if $line =~ /^L (.*)/;
			$published_by{$1} = $t if $line =~ /^P (\d+)/;
		}
		close $in;
	}
}
my $all = $total{all};
is(scalar(@wrong), 0, 'every own call was answered as without owners');
diag("own call answered otherwise: $_") for @wrong[ 0 .. ($#wrong < 9 ? $#wrong : 9) ];
is(scalar(@leaks), 0, 'no leak: every cross call refused, no event or stored answer of the other tenant seen');
diag("leak: $_") for @leaks[ 0 .. ($#leaks < 9 ? $#leaks : 9) ];
is($all->{cross_refused} // 0, $all->{cross_calls} // -1, 'every cross call was refused with 42501 naming the scope');
for my $t (@tenants) {
	my @missed = grep { !$total{$t}{"refused_$_"} } @cross_kinds;
	is("@missed", '', "tenant_$t was refused every covered call kind on tenant_$other{$t}'s scope");
	ok(($total{$t}{replays} // 0) > 0 && ($total{$t}{published} // 0) > 0, "tenant_$t used its own scope");
}

# The database: the secrets untouched, nothing stolen written, every event
# published by its own tenant, each tenant's keys its own clients'.
is($dbh->selectrow_array($secrets_sql), $secrets_before,
	"the stored answers, the in-flight keys and the consumed messages are as their tenants left them");
is($dbh->selectrow_array(q{SELECT count(*) FROM idem.outbox_event WHERE event_type = 'stolen'}), 0,
	'no cross outbox_put wrote an event');
my $events = $dbh->selectall_arrayref(q{SELECT id, scope, status::text FROM idem.outbox_event});
my $misrouted = grep { my ($id, $s, $st) = @$_;
	$st ne 'published' || !defined $published_by{$id} || $s ne $scope{ $published_by{$id} } } @$events;
is($misrouted, 0, 'every event was published, by a relay of its own tenant');
is(scalar(@$events), $all->{put} // -1, 'one event for every outbox_put');
for my $t (@tenants) {
	is($dbh->selectrow_array(q{SELECT count(*) FROM idem.idempotency_request WHERE scope = $1
	                              AND key NOT IN ('known', 'inflight')}, undef, $scope{$t}),
		$total{$t}{claimed} // -1, "tenant_$t: one key for every claim of its clients");
}

diag(sprintf('tenants: %s engine, 2 tenants x %d clients, %ss: own calls %d (answered as before %d), '
	  . 'replays %d, events put %d published %d; cross calls %d, refused 42501 %d (%d kinds); leaks %d',
	IdemProof::portable_engine() ? 'portable (' . IdemProof::portable_via() . ')' : 'C++', $per_tenant, $duration,
	$all->{own_calls} // 0, ($all->{own_calls} // 0) - scalar(@wrong), $all->{replays} // 0, $all->{put} // 0,
	$all->{published} // 0, $all->{cross_calls} // 0, $all->{cross_refused} // 0, scalar(@cross_kinds),
	scalar(@leaks)));

# ---- ownership changes: in force at once, and each in the server log ----
my $as = sub {    # a statement as tenant $t: its answer, or the SQLSTATE
	my ($t, $sql, @bind) = @_;
	my $c = DBI->connect(IdemProof::dsn_of($node), "tenant_$t", '', { AutoCommit => 1, RaiseError => 0, PrintError => 0 })
	  or die "tenant_$t: $DBI::errstr";
	my $row = $c->selectrow_arrayref($sql, undef, @bind);
	my $answer = $c->err ? $c->state : join('|', map { $_ // 'NULL' } @{ $row // [] });
	$c->disconnect;
	return $answer;
};
my $read_b = q{SELECT response_body->>'secret' FROM idem.stored_answer('tenant_b:orders', 'known')};
$dbh->do(q{UPDATE idem.scope_owner SET owner = 'tenant_a' WHERE scope_prefix = 'tenant_b:'});
is($as->('a', $read_b), 's-b', "UPDATE: tenant_b's prefix handed to tenant_a, tenant_a reads its stored answer");
is($as->('b', $read_b), '42501', 'and tenant_b is refused');
$dbh->do(q{DELETE FROM idem.scope_owner WHERE scope_prefix = 'tenant_b:'});
is($as->('b', $read_b), 's-b', 'DELETE: the prefix uncovered, tenant_b reads it again');
is($as->('b', q{SELECT kind FROM idem.claim_idempotency_key('tenant_a:orders', 'known', 'h-known')}), '42501',
	"tenant_a's prefix is still its own");
$dbh->do(q{TRUNCATE idem.scope_owner});
is($as->('b', q{SELECT kind FROM idem.claim_idempotency_key('tenant_a:orders', 'known', 'h-known')}), 'replay_success',
	'TRUNCATE: nothing is covered any more');

my $by = qr/by role \S+ \(session user \S+\)/;
for my $case (
	[ 'INSERT', qr/idem: scope owner insert $by: prefix 'tenant_a:' owned by tenant_a/ ],
	[ 'UPDATE', qr/idem: scope owner update $by: prefix 'tenant_b:' owned by tenant_a, was prefix 'tenant_b:' owned by tenant_b/ ],
	[ 'DELETE', qr/idem: scope owner delete $by: prefix 'tenant_b:' was owned by tenant_a/ ],
	[ 'TRUNCATE', qr/idem: every scope owner removed \(TRUNCATE idem\.scope_owner\) $by/ ])
{
	my ($what, $re) = @$case;
	ok(poll_until("the audit line of $what in the server log",
			sub { substr(slurp_file($node->logfile), $log_offset) =~ /LOG:  $re/ }, 0.1),
		"$what of idem.scope_owner is in the server log");
}

$node->stop;
done_testing();
