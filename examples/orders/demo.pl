#!/usr/bin/env perl
# The orders demo (README.md beside this file): an orders API that charges a
# card at a payment provider (another database, through dblink), crashed at
# every boundary and retried, printed as a timeline. Run by ../../run-demo on
# a throwaway cluster; needs PGHOST/PGPORT (and PGUSER) of a cluster with
# idem available, and creates (drops first) the databases it names.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use Time::HiRes qw(time);
use Orders::Setup;
use Orders::Ledger;
use Orders::Scenarios;
use Orders::Relay;

my %opt = (shop_db => 'shop', provider_db => 'payment_provider', lock_timeout => '1 second');
GetOptions('shop-db=s' => \$opt{shop_db}, 'provider-db=s' => \$opt{provider_db},
           'lock-timeout=s' => \$opt{lock_timeout}) or die "bad options\n";
$| = 1;

my $began = time;
Orders::Setup::create(%opt, dir => $FindBin::Bin);
my $ledger = Orders::Ledger->new(%opt);
my $stories = Orders::Scenarios->new(dsn => "dbi:Pg:dbname=$opt{shop_db}",
                                     lock_timeout => $opt{lock_timeout}, ledger => $ledger);
print <<"INTRO";
Databases: '$opt{shop_db}' (the orders API, with idem) and '$opt{provider_db}'
(the payment provider, with its own idem), linked by dblink. Lock timeout $opt{lock_timeout}.
Each attempt is served by a fresh API server process; a crash kills it on the
spot, a stall only pauses it.
Recovery points: started -> order_created -> charge_created -> finished.
INTRO

my $failures = 0;
my $n = 0;
for my $s (@Orders::Scenarios::ALL) {
    my $r = eval { $stories->run($s) };
    $n++;
    print "\n== $n. $s->{title} ", '=' x (60 - length $s->{title}), "\n";
    print "   $s->{why}\n";
    if (!$r) {  # e.g. the completer's scenario where idem's worker does not serve the shop
        print "   COULD NOT RUN: $@";
        $failures++;
        next;
    }
    my $t0 = $r->{timeline}[0]{t};
    for my $e (sort { $a->{t} <=> $b->{t} } @{$r->{timeline}}) {
        printf "   %+7.3fs  %-7s %-3s %s\n", $e->{t} - $t0, $e->{who}, $e->{tag}, $e->{text};
    }
    my ($ok, $verdict) = verdict($r);
    $failures++ unless $ok;
    print "   $verdict\n";
}

print "\n== Receipts: outbox -> relay -> provider ", '=' x 26, "\n";
print '   ', Orders::Relay::drain(%opt, dir => $FindBin::Bin, ledger => $ledger), "\n";
my ($receipts, $wrong_receipts) = $ledger->receipts;
printf "   receipts at the provider %d: %s\n", $receipts,
    (@$wrong_receipts ? join('; ', @$wrong_receipts) : 'exactly one per paid order');
$failures += @$wrong_receipts;
for my $s (grep { $_->{abandon} && $stories->result($_->{name}) } @Orders::Scenarios::ALL) {
    my $order_id = $stories->result($s->{name})->{counts}{order_ids}[0];
    my $n = $ledger->receipts_for_order($order_id);
    printf "   receipt for order #%d, finished by the completer (%s): %d %s\n", $order_id, $s->{key}, $n,
        $n == 1 ? 'sent exactly once' : 'WRONG';
    $failures++ unless $n == 1;
}

my $totals = $ledger->totals;
my $problems = $ledger->reconcile;
print "\n== Totals ", '=' x 56, "\n";
printf "   intents (idempotency keys) %d; orders %d; provider charges %d; paid orders %d; receipt jobs %d\n",
    @$totals{qw(keys orders charges paid_orders receipt_jobs)};
print "   reconciliation shop <-> provider: ",
    (@$problems ? join('; ', @$problems) : 'every charge has its order, every paid order its charge'), "\n";
$failures++ if @$problems || $totals->{orders} != $totals->{keys} || $totals->{charges} != $totals->{orders};
printf "   %s in %.1f s\n", ($failures ? "$failures PROBLEM(S)" : 'exactly one order, one charge, one receipt per intent'),
    time - $began;
exit($failures ? 1 : 0);

# Exactly one per intent: one order with one audit row, one provider charge,
# and one receipt job if (and only if) the intent succeeded.
sub verdict {
    my ($r) = @_;
    my $c = $r->{counts};
    my $state = $r->{key_state};
    my $jobs_wanted = $state->{status} eq 'succeeded' ? 1 : 0;
    my $ok = $c->{orders} == 1 && $c->{audit_rows} == 1 && $c->{charges} == 1
        && $c->{receipt_jobs} == $jobs_wanted;
    my $answers = join(', ', map { $_->{final}{code} } @{$r->{twins} // [$r]});
    $answers .= ", then $r->{again}{code} (replayed)" if $r->{again};
    return ($ok, sprintf('=> answer %s | key %s at %s, %d attempt(s) | orders %d, provider charges %d, receipt jobs %d: %s',
        $answers, $state->{status}, $state->{recovery_point}, $state->{attempt_count},
        @$c{qw(orders charges receipt_jobs)}, $ok ? 'exactly one per intent' : 'WRONG'));
}
