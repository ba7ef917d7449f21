package Orders::Scenarios;
# The stories the demo tells and the tests check: a request nothing
# interrupts, a crash at every boundary, twins, a declined card, an
# unreachable provider, a changed body and a replay. Each run returns what
# happened (the timeline, every answer, what idem said) and what it left
# behind (rows per key), so the demo can print it and the tests can judge it.
use strict;
use warnings;
use JSON::PP;
use Time::HiRes qw(time sleep);
use Orders::Client;

our $SCOPE = 'POST /orders';

my $json = JSON::PP->new->canonical;

sub body_for {
    my (%fields) = @_;
    return $json->encode({customer => 'cus_ada', amount_cents => 2500, currency => 'eur',
                          payment_method => 'pm_card_visa', %fields});
}

# name, title, why (one line), key, body, and how the story goes:
# crash_at / recover ('wait': the client honours Retry-After until the lock
# times out; 'sweep': an operator runs idem.sweep_stale() first) / stall_at
# (the server only stalls there, and wakes after a retry took over) / twins /
# provider_down / same_as (reuses an earlier scenario's key) / max_wait (twins
# claim with idem.claim_or_wait) / abandon (no retry ever comes: the worker
# runs the scope's completer, shop.complete_order in shop.sql).
our @ALL = (
    {name => 'happy', title => 'A request nothing interrupts', key => 'key-happy',
     why => 'phase by phase, one commit each',
     body => body_for()},
    {name => 'crash_after_claim', title => 'Crash after phase 1', key => 'key-crash-1',
     why => 'the key is claimed and locked, nothing else happened',
     body => body_for(customer => 'cus_bob', amount_cents => 1200),
     crash_at => 'after_claim', recover => 'wait', resumes_at => 'started'},
    {name => 'crash_after_order', title => 'Crash after phase 2', key => 'key-crash-2',
     why => 'the order exists, the card is not charged yet',
     body => body_for(customer => 'cus_cy', amount_cents => 4000),
     crash_at => 'after_order', recover => 'sweep', resumes_at => 'order_created'},
    {name => 'crash_after_charge', title => 'Crash after the charge, before phase 3', key => 'key-crash-3',
     why => 'THE window: the card is charged and nothing local says so',
     body => body_for(customer => 'cus_dee', amount_cents => 9900),
     crash_at => 'after_charge', recover => 'wait', resumes_at => 'order_created',
     provider_replays => 1},
    {name => 'crash_after_record', title => 'Crash after phase 3', key => 'key-crash-4',
     why => 'the charge is recorded; no receipt, no response yet',
     body => body_for(customer => 'cus_eve', amount_cents => 350),
     crash_at => 'after_charge_recorded', recover => 'sweep', resumes_at => 'charge_created'},
    {name => 'crash_before_mark', title => 'Crash inside phase 4, before the final mark', key => 'key-crash-5',
     why => 'the receipt job was staged in a transaction that never committed',
     body => body_for(customer => 'cus_fay', amount_cents => 7700),
     crash_at => 'before_final_mark', recover => 'wait', resumes_at => 'charge_created'},
    {name => 'twins', title => 'Concurrent twins', key => 'key-twins',
     why => 'two copies of one request claim at the same instant',
     body => body_for(customer => 'cus_gus', amount_cents => 1999), twins => 1},
    {name => 'double_click', title => 'A double-clicked POST that waits', key => 'key-double-click',
     why => 'the second copy waits for the first (idem.claim_or_wait) and gets its 201',
     body => body_for(customer => 'cus_hal', amount_cents => 2500), twins => 1,
     max_wait => '10 seconds'},
    {name => 'zombie', title => 'A stalled server and the retry that takes over', key => 'key-zombie',
     why => 'the first server is not dead, only slow; fencing stops its late write',
     body => body_for(customer => 'cus_kim', amount_cents => 4200),
     stall_at => 'after_charge', resumes_at => 'order_created', provider_replays => 1},
    {name => 'declined', title => 'A declined card', key => 'key-declined',
     why => 'a final failure: stored as 402, replayed as 402',
     body => body_for(customer => 'cus_hal', amount_cents => 5000, payment_method => 'pm_card_declined'),
     again => 1},
    {name => 'provider_down', title => 'The provider is unreachable', key => 'key-provider-down',
     why => 'a retryable failure (503): the retry resumes at order_created',
     body => body_for(customer => 'cus_ivy', amount_cents => 6400), provider_down => 1,
     resumes_at => 'order_created'},
    {name => 'abandoned', title => 'The client disappears after the charge', key => 'key-abandoned',
     why => 'no retry ever comes: idem\'s worker runs the scope\'s completer from the recovery point',
     body => body_for(customer => 'cus_lou', amount_cents => 3100),
     crash_at => 'after_charge', abandon => 1, resumes_at => 'order_created'},
    {name => 'mismatch', title => 'A retry with a changed body', key => 'key-happy',
     why => 'same key as the first request, another amount',
     body => body_for(amount_cents => 999999), same_as => 'happy'},
    {name => 'replay', title => 'A replay of a finished request', key => 'key-happy',
     why => 'same key, same request (members in another order: JCS makes it the same hash)',
     body => '{"payment_method":"pm_card_visa","currency":"eur","amount_cents":2500,"customer":"cus_ada"}',
     same_as => 'happy'},
);

# dsn (shop), lock_timeout, ledger (Orders::Ledger).
sub new {
    my ($class, %args) = @_;
    return bless {%args, results => {}}, $class;
}

sub result { $_[0]{results}{$_[1]} }

sub event {
    my ($timeline, %event) = @_;
    push @$timeline, {t => time, tag => '', %event};
}

sub client {
    my ($self, $timeline, %args) = @_;
    return Orders::Client->new(dsn => $self->{dsn}, lock_timeout => $self->{lock_timeout},
                               timeline => $timeline, %args);
}

# What a crash left behind, and, for 'sweep', the operator's sweep once the
# lock has run out.
sub after_crash {
    my ($self, $s, $timeline) = @_;
    my $ledger = $self->{ledger};
    my $state = $ledger->key_state($SCOPE, $s->{key});
    my $counts = $ledger->counts_for_key($SCOPE, $s->{key});
    event($timeline, who => 'db', kind => 'left_behind', state => $state, counts => $counts,
          text => sprintf('left behind: key %s at %s (lock %.1f s left); orders %d, provider charges %d, receipt jobs %d',
                          $state->{status}, $state->{recovery_point}, $state->{lock_left},
                          @$counts{qw(orders charges receipt_jobs)}));
    return unless ($s->{recover} // '') eq 'sweep';
    $self->wait_for_lock_end($s->{key});
    my $swept = $ledger->sweep;
    my $after = $ledger->key_state($SCOPE, $s->{key});
    event($timeline, who => 'sweeper', kind => 'sweep', swept => $swept,
          text => "lock expired; idem.sweep_stale() -> $swept key(s): now $after->{status} "
                  . "'$after->{failure_code}', recovery point $after->{recovery_point} kept");
}

# Waits until the key's lock has run out by the database's clock (the
# clock a claim or a sweep judges it by); dies if it has not well after the
# lock timeout.
sub wait_for_lock_end {
    my ($self, $key) = @_;
    my $deadline = time + $self->lock_seconds + 60;
    while (1) {
        my $state = $self->{ledger}->key_state($SCOPE, $key);
        return $state if $state && $state->{lock_expired};
        die "the lock of $key did not run out in time\n" if time > $deadline;
        sleep 0.02;
    }
}

sub lock_seconds {
    my ($self) = @_;
    my ($seconds) = $self->{ledger}->shop->selectrow_array(
        'SELECT extract(epoch FROM ?::interval)::float8', undef, $self->{lock_timeout});
    return $seconds;
}

sub set_provider_port {
    my ($self, $port) = @_;
    my $shop = $self->{ledger}->shop;
    $shop->do(sprintf('ALTER SERVER payment_provider OPTIONS (SET port %s)', $shop->quote($port)));
}

# The first attempt dies after the charge and no retry ever comes. idem's
# worker, once the lock has run out and the scope's completer_delay passed,
# claims the key and runs the completer from the recovery point; this waits
# (with a deadline) until the key has ended, and returns its stored answer
# as the final one, the answer any later retry would get.
sub abandoned {
    my ($self, $s, $timeline) = @_;
    my $ledger = $self->{ledger};
    my $shop = $ledger->shop;
    my $workers = eval { $shop->selectrow_array(
        'SELECT count(*) FROM idem.worker_status WHERE database = current_database()') };
    die "the completer needs idem's worker in database '" . $shop->{pg_db}
        . "': add it to idem.database (idem.naptime = 1 for a quick demo) and restart\n"
        unless $workers;
    my $client = $self->client($timeline);
    my $response = $client->finish($client->start($SCOPE, $s->{key}, $s->{body}, crash_at => $s->{crash_at}));
    die "the attempt was meant to crash\n" if $response;
    $client->note(kind => 'gone', text => 'the client is gone: it never retries');
    $self->after_crash($s, $timeline);
    # The worker stays off during the other scenarios, whose clients do come
    # back (its sweeper would race their retries); it is switched on here
    # and back off once the key has ended.
    my ($enabled) = $shop->selectrow_array(q{SELECT current_setting('idem.worker_enabled')});
    $self->switch_worker($timeline, 'on') if $enabled eq 'off';
    my ($delay) = $shop->selectrow_array(
        'SELECT extract(epoch FROM completer_delay)::float8 FROM idem.scope_policy WHERE scope = ?',
        undef, $SCOPE);
    my $lock = $self->lock_seconds;
    my $deadline = time + $lock + $delay + 120;
    my $state = $ledger->key_state($SCOPE, $s->{key});
    my $ended = sub { $_[0]{status} =~ /^(succeeded|failed_final)$/ };
    while (!$ended->($state) && time < $deadline) {
        sleep 0.1;
        $state = $ledger->key_state($SCOPE, $s->{key});
    }
    $self->switch_worker($timeline, 'off') if $enabled eq 'off';
    die "the completer did not finish $s->{key} in time: key $state->{status} at $state->{recovery_point}\n"
        unless $ended->($state);
    my $stored = $shop->selectrow_hashref(
        q{SELECT response_code AS code, response_body::text AS body,
                 extract(epoch FROM finished_at)::float8 AS finished
            FROM idem.idempotency_request WHERE scope = ? AND key = ?}, undef, $SCOPE, $s->{key});
    event($timeline, who => 'worker', kind => 'completer', state => $state, t => $stored->{finished} - 0.001,
          text => sprintf("no retry within the scope's completer_delay (%.0f s): idem's worker claimed the key "
                          . "(claimed_by '%s', attempt %d) and ran shop.complete_order from %s",
                          $delay, $state->{claimed_by}, $state->{attempt_count}, $s->{resumes_at}));
    my $counts = $ledger->counts_for_key($SCOPE, $s->{key});
    event($timeline, who => 'worker', kind => 'completed', code => $stored->{code}, t => $stored->{finished},
          text => sprintf('completer: charge asked again with the same derived key (provider charges for '
                          . 'the order: %d), phase 3, receipt job staged with the final mark: key %s with %s',
                          $counts->{charges}, $state->{status}, $stored->{code}));
    return {final => $stored, responses => [], attempts => $client->{attempts}};
}

# idem.worker_enabled is a reload setting: ALTER SYSTEM (as a superuser)
# and a reload, which the worker applies at once.
sub switch_worker {
    my ($self, $timeline, $on) = @_;
    my $shop = $self->{ledger}->shop;
    $shop->do($on eq 'on' ? 'ALTER SYSTEM SET idem.worker_enabled = on' : 'ALTER SYSTEM RESET idem.worker_enabled');
    $shop->selectrow_array('SELECT pg_reload_conf()');
    event($timeline, who => 'ops', kind => "worker_$on", text => "idem's worker switched $on (idem.worker_enabled)");
}

# Runs one scenario; returns its result (also kept for later scenarios).
sub run {
    my ($self, $s) = @_;
    my @timeline;
    my $started = time;
    my %result = (scenario => $s, timeline => \@timeline);
    if ($s->{stall_at}) {
        # The client gives up on the slow attempt once it has stalled and
        # its lock has run out, and retries; the stalled server wakes up
        # (SIGUSR1) only after the retry has answered. Each step waits for
        # what it needs, not for a time.
        my $seconds = $self->lock_seconds;
        my $slow = $self->client(\@timeline, label => 'A');
        my $attempt = $slow->start($SCOPE, $s->{key}, $s->{body},
                                   stall_at => $s->{stall_at}, stall_for => $seconds + 120);
        $slow->wait_for_event($attempt, 'stall', time + $seconds + 60);
        $self->wait_for_lock_end($s->{key});
        my $retry = $self->client(\@timeline, label => 'B');
        event(\@timeline, who => 'client', tag => 'A1', kind => 'timeout',
              text => 'no answer yet: the client times out and retries on another connection');
        %result = (%result, %{$retry->request($SCOPE, $s->{key}, $s->{body})});
        kill 'USR1', $attempt->{pid};
        $result{zombie} = $slow->finish($attempt);
        $slow->note(kind => 'answer', code => $result{zombie}{code}, t => $result{zombie}{t},
                    text => "<- $result{zombie}{code} $result{zombie}{body} (to a client that stopped listening)");
    } elsif ($s->{abandon}) {
        %result = (%result, %{$self->abandoned($s, \@timeline)});
    } elsif ($s->{twins}) {
        my @clients = map { $self->client(\@timeline, label => $_) } qw(A B);
        my $at = time + 0.3;
        my @attempts = map { $_->start($SCOPE, $s->{key}, $s->{body}, start_at => $at,
                                       max_wait => $s->{max_wait}) } @clients;
        $result{twins} = [map { $clients[$_]->request($SCOPE, $s->{key}, $s->{body},
                                                     started => $attempts[$_]) } 0 .. 1];
        $result{final} = $result{twins}[0]{final};
    } else {
        my $real_port;
        my $before_retry = sub {
            my ($response) = @_;
            $self->after_crash($s, \@timeline) unless $response;
            if (defined $real_port) {
                $self->set_provider_port($real_port);
                event(\@timeline, who => 'ops', kind => 'provider_back', text => 'the provider is reachable again');
                undef $real_port;
            }
        };
        if ($s->{provider_down}) {
            ($real_port) = $self->{ledger}->shop->selectrow_array(q{SELECT current_setting('port')});
            $self->set_provider_port('1');
            event(\@timeline, who => 'ops', kind => 'provider_down', text => 'the provider goes unreachable');
        }
        my $client = $self->client(\@timeline, before_retry => $before_retry);
        my $answer = $client->request($SCOPE, $s->{key}, $s->{body}, crash_at => $s->{crash_at});
        %result = (%result, %$answer);
        if ($s->{again}) {
            my $again = $client->request($SCOPE, $s->{key}, $s->{body});
            $result{again} = $again->{final};
        }
    }
    @timeline = sort { $a->{t} <=> $b->{t} } @timeline;
    $result{seconds} = time - $started;
    $result{counts} = $self->{ledger}->counts_for_key($SCOPE, $s->{key});
    $result{key_state} = $self->{ledger}->key_state($SCOPE, $s->{key});
    $result{claims} = [map { $_->{claim} } grep { $_->{kind} eq 'claim' } @timeline];
    $result{takeovers} = [grep { $_->{kind} eq 'claim' && $_->{claim} =~ /^(processing_stale|retryable_failure)$/ }
                          @timeline];
    $result{charges} = [grep { $_->{kind} eq 'charge' } @timeline];
    $self->{results}{$s->{name}} = \%result;
    return \%result;
}

1;
