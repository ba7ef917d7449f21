#!/usr/bin/env perl
# Tests for the orders example (examples/orders): every scenario of the demo
# is run for real - crashes, twins, a decline, an unreachable provider, a
# changed body, a replay - and judged by the rows it left in the shop and at
# the provider: exactly one order (with one audit row), one provider charge
# and one receipt job per idempotency key, the retry resuming from the
# recovery point the crash left, and every stored response replayed byte for
# byte. Prints what it checked; the last line is "orders: N passed, N failed".
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../../examples/orders/lib";
use Getopt::Long;
use JSON::PP;
use Time::HiRes qw(time);
use Orders::Setup;
use Orders::Ledger;
use Orders::Scenarios;
use Orders::Relay;
use Orders::Client;

my %opt = (shop_db => 'orders_shop_test', provider_db => 'orders_provider_test',
           lock_timeout => '2 seconds');
GetOptions('shop-db=s' => \$opt{shop_db}, 'provider-db=s' => \$opt{provider_db},
           'lock-timeout=s' => \$opt{lock_timeout}) or die "bad options\n";
$| = 1;

my ($passed, $failed) = (0, 0);
sub check {
    my ($ok, $what) = @_;
    if ($ok) { $passed++; print "ok - $what\n" } else { $failed++; print "not ok - $what\n" }
    return $ok;
}
sub is_eq {
    my ($got, $want, $what) = @_;
    $got //= 'undef';
    check($got eq $want, $what) or print "#   got '$got', want '$want'\n";
}

my $began = time;
Orders::Setup::create(%opt, dir => "$FindBin::Bin/../../examples/orders");
my $ledger = Orders::Ledger->new(%opt);
my $dsn = "dbi:Pg:dbname=$opt{shop_db}";
my $stories = Orders::Scenarios->new(dsn => $dsn, lock_timeout => $opt{lock_timeout}, ledger => $ledger);
my $scope = $Orders::Scenarios::SCOPE;

# One more crash than the demo shows: a declined card whose server dies
# between the provider's answer and phase 3; the provider must replay the
# decline, not charge again.
my @scenarios = (@Orders::Scenarios::ALL,
    {name => 'declined_crash', title => 'declined card, crash after the charge', key => 'key-declined-crash',
     body => Orders::Scenarios::body_for(customer => 'cus_jo', amount_cents => 300,
                                         payment_method => 'pm_card_declined'),
     crash_at => 'after_charge', recover => 'sweep', resumes_at => 'order_created',
     provider_replays => 1});

my %expected_code = (declined => 402, declined_crash => 402, mismatch => 422);
my %replayed_before;
my @completed_orders;  # [scenario, order id] of orders the completer finished

for my $s (@scenarios) {
    my $name = $s->{name};
    my $r = $stories->run($s);
    my @events = @{$r->{timeline}};
    my $code = $expected_code{$name} // 201;
    my $attempts = 0;
    $attempts += $_->{attempts} for @{$r->{twins} // [$r]};
    printf "# %s: %.2f s, %d attempt(s)\n", $name, $r->{seconds}, $attempts;
    for my $final (map { $_->{final} } @{$r->{twins} // [$r]}) {
        is_eq($final->{code}, $code, "$name: answered $code");
    }

    # Rows per intent. mismatch and replay reuse the first request's key:
    # they must leave its rows exactly as they were.
    my $c = $r->{counts};
    my $declined = $name =~ /^declined/;
    is_eq($c->{orders}, 1, "$name: exactly one order for the key");
    is_eq($c->{audit_rows}, 1, "$name: exactly one audit row for the order");
    is_eq($c->{charges}, 1, "$name: exactly one charge at the provider");
    is_eq($c->{receipt_jobs}, $declined ? 0 : 1, "$name: " . ($declined ? 'no' : 'exactly one') . ' receipt job');
    is_eq($r->{key_state}{status}, $declined ? 'failed_final' : 'succeeded', "$name: key ends $r->{key_state}{status}");
    my $phase2 = grep { $_->{kind} eq 'phase' && $_->{phase} == 2 } @events;
    my $new_charges = grep { $_->{kind} eq 'charge' && $_->{provider_claim} eq 'new_claim' } @events;
    my $reused = $name eq 'mismatch' || $name eq 'replay';
    is_eq($phase2, $reused ? 0 : 1, "$name: phase 2 ran " . ($reused ? 'never' : 'once') . ' over all attempts');
    is_eq($new_charges, $reused ? 0 : 1, "$name: the provider minted " . ($reused ? 'no' : 'one') . ' charge');

    if (my $crash_at = $s->{crash_at}) {
        my ($crash) = grep { $_->{kind} eq 'crash' } @events;
        is_eq($crash && $crash->{at}, $crash_at, "$name: the first attempt crashed $crash_at");
        my ($left) = grep { $_->{kind} eq 'left_behind' } @events;
        is_eq("$left->{state}{status}\@$left->{state}{recovery_point}", "processing\@$s->{resumes_at}",
              "$name: the crash left the key processing at $s->{resumes_at}");
        is_eq($left->{counts}{receipt_jobs}, 0, "$name: no receipt job survived the crash")
            if $crash_at eq 'before_final_mark';
    }
    if ($s->{crash_at} && !$s->{abandon}) {
        my $takeover_kind = $s->{recover} eq 'sweep' ? 'retryable_failure' : 'processing_stale';
        my @takeovers = @{$r->{takeovers}};
        is_eq(scalar @takeovers, 1, "$name: exactly one takeover");
        is_eq(($takeovers[0]{claim} // '') . '@' . ($takeovers[0]{recovery_point} // ''),
              "$takeover_kind\@$s->{resumes_at}",
              "$name: the retry took over ($takeover_kind) and resumed at $s->{resumes_at}");
        if ($s->{recover} eq 'wait') {
            check((grep { $_->{kind} eq 'claim' && $_->{claim} eq 'processing_active' } @events) == 1,
                  "$name: a retry inside the lock timeout was told 409 processing_active");
        }
    }
    if ($s->{abandon}) {
        is_eq($r->{attempts}, 1, "$name: the client sent one attempt and never retried");
        is_eq(scalar @{$r->{takeovers}}, 0, "$name: no client took the key over");
        is_eq("$r->{key_state}{claimed_by} $r->{key_state}{attempt_count}", 'idem completer 2',
              "$name: idem's worker claimed the key (attempt 2) and its completer finished it");
        check((grep { $_->{kind} eq 'completed' } @events) == 1, "$name: the demo shows the completion");
        push @completed_orders, [$name, $c->{order_ids}[0]];
    }
    if ($s->{provider_replays}) {
        my @charges = @{$r->{charges}};
        is_eq(join(',', map { $_->{provider_claim} } @charges),
              $declined ? 'new_claim,final_failure' : 'new_claim,replay_success',
              "$name: the retry's charge was deduplicated by the provider");
        is_eq($charges[1]{charge_id} // '', $charges[0]{charge_id} // 'none',
              "$name: the provider returned the original charge $charges[0]{charge_id}");
        is_eq($charges[1]{provider_key} // '', $charges[0]{provider_key} // 'none',
              "$name: both charges used the same derived provider key");
        check(($charges[0]{provider_key} // '') =~ /^shop-charge-[0-9a-f]{64}$/
              && index($charges[0]{provider_key}, $s->{key}) < 0,
              "$name: the provider key is derived (SHA-256), not the caller's key");
    }
    if ($s->{twins}) {
        my @first = map { my $t = $_; (grep { $_->{kind} eq 'claim' && $_->{tag} eq "${t}1" } @events)[0] } qw(A B);
        my @kinds = sort map { $_->{claim} // 'none' } @first;
        is_eq(scalar(grep { $_ eq 'new_claim' } @kinds), 1, "$name: exactly one twin won the claim");
        if ($s->{max_wait}) {
            check(grep({ $_ eq 'replay_success' } @kinds) == 1,
                  "$name: the other waited and was answered with the replay (got @kinds)");
            is_eq(join(',', map { $_->{final}{code} } @{$r->{twins}}), '201,201',
                  "$name: both got 201 on their first attempt, no 409");
            is_eq($r->{twins}[0]{attempts} + $r->{twins}[1]{attempts}, 2, "$name: no retry was needed");
        } else {
            check(grep({ $_ eq 'processing_active' } @kinds) == 1,
                  "$name: the other was told 409 processing_active (got @kinds)");
        }
        is_eq($r->{twins}[1]{final}{body}, $r->{twins}[0]{final}{body}, "$name: both got the same 201 body");
    }
    if ($s->{stall_at}) {
        my @takeovers = @{$r->{takeovers}};
        is_eq(join(',', map { "$_->{claim}\@$_->{recovery_point}" } @takeovers),
              "processing_stale\@$s->{resumes_at}", "$name: the retry took over at $s->{resumes_at}");
        is_eq($r->{zombie}{code}, 409, "$name: the stalled server's late write was refused (409)");
        check((grep { $_->{kind} eq 'superseded' && $_->{sqlstate} eq 'P4012' } @events) == 1,
              "$name: refused by the fence (P4012)");
        check($r->{zombie}{t} > $r->{final}{t}, "$name: the zombie woke after the retry had answered");
    }
    if ($s->{provider_down}) {
        is_eq($r->{responses}[0]{code}, 503, 'provider_down: the first attempt answered 503');
        is_eq(join(',', map { "$_->{claim}\@$_->{recovery_point}" } @{$r->{takeovers}}),
              'retryable_failure@order_created', 'provider_down: the retry took over at order_created');
    }
    if ($declined) {
        my $order_status = $ledger->shop->selectrow_array(
            'SELECT status FROM shop.orders WHERE id = ?', undef, $c->{order_ids}[0]);
        is_eq($order_status, 'payment_failed', "$name: the order is payment_failed");
    }
    if ($s->{again}) {
        is_eq($r->{again}{body}, $r->{final}{body}, "$name: the retry got the stored response byte for byte");
    }
    if ($name eq 'mismatch') {
        check($r->{final}{body} =~ /key_reused/, 'mismatch: 422 says the key was reused');
    }
    if ($name eq 'replay') {
        my $original = $stories->result('happy')->{final};
        is_eq($r->{final}{body}, $original->{body}, 'replay: the stored 201 body, byte for byte');
        is_eq($r->{claims}[0], 'replay_success', 'replay: idem answered replay_success');
    }

    # Every finished key replays its stored response byte for byte, and a
    # replay writes no order, no charge and no job.
    next if $name eq 'mismatch';
    my $final = $r->{twins} ? $r->{twins}[0]{final} : $r->{final};
    my $client = Orders::Client->new(dsn => $dsn, lock_timeout => $opt{lock_timeout}, timeline => []);
    my $replay = $client->request($scope, $s->{key}, $s->{body})->{final};
    is_eq("$replay->{code} $replay->{body}", "$final->{code} $final->{body}",
          "$name: a later retry replays the stored $final->{code} byte for byte");
    is_eq($replay->{headers}{'Idempotent-Replayed'}, 'true', "$name: the replay is marked Idempotent-Replayed");
    my $after = $ledger->counts_for_key($scope, $s->{key});
    is_eq(join(',', @$after{qw(orders charges receipt_jobs)}), join(',', @$c{qw(orders charges receipt_jobs)}),
          "$name: the replay wrote no order, charge or job");
}

# The receipts leave through the outbox: a relay killed with SIGKILL, a
# second one that drains the rest, exactly one receipt per paid order.
print '# ', Orders::Relay::drain(%opt, dir => "$FindBin::Bin/../../examples/orders", ledger => $ledger), "\n";
my ($receipts, $wrong_receipts) = $ledger->receipts;
is_eq(join('; ', @$wrong_receipts), '', "receipts: exactly one per paid order ($receipts delivered)");
for my $completed (@completed_orders) {
    my ($name, $order_id) = @$completed;
    is_eq($ledger->receipts_for_order($order_id), 1,
          "$name: the receipt of order $order_id, finished by the completer, was sent exactly once");
}

my $totals = $ledger->totals;
my $problems = $ledger->reconcile;
printf "# totals: %d keys, %d orders, %d provider charges, %d paid orders, %d receipt jobs\n",
    @$totals{qw(keys orders charges paid_orders receipt_jobs)};
is_eq($totals->{orders}, $totals->{keys}, 'totals: one order per key');
is_eq($totals->{charges}, $totals->{orders}, 'totals: one provider charge per order');
is_eq($totals->{receipt_jobs}, $totals->{paid_orders}, 'totals: one receipt job per paid order');
check(!@$problems, 'reconciliation: shop and provider agree');
print "#   $_\n" for @$problems;
printf "# wall time %.1f s (lock timeout %s)\n", time - $began, $opt{lock_timeout};
print "orders: $passed passed, $failed failed\n";
exit($failed ? 1 : 0);
