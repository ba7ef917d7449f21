package Orders::Server;
# The API server's handler for POST /orders: one attempt at one request, run
# as Brandur Leach's state machine over idem's recovery points. Each phase is
# one transaction in shop.sql; this file only decides which phase comes next
# and maps idem's answers to HTTP.
#
# For the demo it can crash at a chosen boundary: the worker process exits on
# the spot, without a goodbye to the server, exactly like a killed API server.
# The database sees the connection drop and rolls back whatever was open.
# Or it can stall there for a while and then carry on, like a zombie.
use strict;
use warnings;
use DBI;
use JSON::PP;
use POSIX ();
use Time::HiRes ();

# The boundaries the demo can crash or stall at, in request order.
our %CRASH_POINTS = (
    after_claim           => 'after phase 1 (key claimed, nothing else done)',
    after_order           => 'after phase 2 (order committed, card not charged)',
    after_charge          => 'after the charge, before phase 3 (card charged, nothing recorded)',
    after_charge_recorded => 'after phase 3 (charge recorded, no receipt, no response)',
    before_final_mark     => 'inside phase 4, before the final mark (receipt job staged, not committed)',
);

my $json = JSON::PP->new->canonical;

# dsn, lock_timeout ('2 seconds'), emit (sub taking an event hash), crash_at
# (a key of %CRASH_POINTS, or undef), stall_at (likewise), stall_for (the
# longest stall in seconds; SIGUSR1 ends it sooner) and max_wait (an
# interval: wait for a twin in flight with idem.claim_or_wait instead of
# answering 409).
sub new {
    my ($class, %args) = @_;
    return bless {%args}, $class;
}

sub emit {
    my ($self, %event) = @_;
    $self->{emit}->({%event, who => 'server'});
}

sub at_boundary {
    my ($self, $here) = @_;
    if (($self->{stall_at} // '') eq $here) {
        # Not dead, only slow (a GC pause, a stuck network): the attempt
        # goes on afterwards as if nothing happened - a zombie.
        # It stalls until SIGUSR1 (the demo sends it once a retry has
        # answered) or, at the latest, for stall_for seconds. The handler
        # stays for the process's life: a late signal must not kill it.
        my $woken = 0;
        $SIG{USR1} = sub { $woken = 1 };
        my $until = Time::HiRes::time() + $self->{stall_for};
        $self->emit(kind => 'stall', at => $here, text => "server stalls $CRASH_POINTS{$here}");
        while (!$woken && (my $left = $until - Time::HiRes::time()) > 0) {
            Time::HiRes::sleep($left < 0.05 ? $left : 0.05);
        }
        $self->emit(kind => 'wake', text => 'server wakes up and carries on with its old fence');
    }
    return unless ($self->{crash_at} // '') eq $here;
    $self->emit(kind => 'crash', at => $here,
                text => "CRASH: server process killed $CRASH_POINTS{$here}");
    # No disconnect, no destructors: the socket just closes.
    POSIX::_exit(70);
}

sub response {
    my ($code, $body, %headers) = @_;
    return {code => $code, body => $body, headers => \%headers};
}

sub error_body { $json->encode({error => {@_}}) }

sub connect {
    my ($self) = @_;
    return $self->{dbh} = DBI->connect($self->{dsn}, '', '',
        {AutoCommit => 1, RaiseError => 1, PrintError => 0, pg_server_prepare => 0});
}

# Handles one attempt; returns {code, body (text), headers}.
sub handle {
    my ($self, $scope, $key, $request) = @_;
    my $dbh = $self->{dbh} // $self->connect;
    my $result = eval { $self->run($scope, $key, $request) };
    return $result if $result;
    my $state = $dbh->state // '';
    my $message = $@;
    $message =~ s/\s+at \S+ line \d+.*//s;
    eval { $dbh->rollback unless $dbh->{AutoCommit} };
    if ($state eq 'P4002') {
        $self->emit(kind => 'mismatch', sqlstate => $state,
                    text => 'claim -> P4002: key already used with a different request body -> 422');
        return response(422, error_body(type => 'idempotency_error', code => 'key_reused',
            message => 'this idempotency key was used with a different request'));
    }
    if ($state =~ /^P400[013]$/) {
        $self->emit(kind => 'bad_key', sqlstate => $state, text => "claim -> $state -> 400");
        return response(400, error_body(type => 'invalid_request', message => $message));
    }
    if ($state eq 'P4012') {
        # A retry took the key over while this attempt was slow: its work is
        # the retry's now, and nothing this attempt wrote after that survived.
        $self->emit(kind => 'superseded', sqlstate => $state,
                    text => 'fenced write refused (P4012): a retry owns the key now -> 409');
        return response(409, error_body(type => 'idempotency_error', code => 'superseded',
            message => 'a retry of this request took it over'));
    }
    $self->emit(kind => 'error', sqlstate => $state, text => "error $state: $message -> 500");
    return response(500, error_body(type => 'api_error', message => 'internal error'));
}

sub run {
    my ($self, $scope, $key, $request) = @_;
    my $dbh = $self->{dbh};
    my $waits = defined $self->{max_wait};
    my $claim = $dbh->selectrow_hashref(
        q{SELECT kind, fence, attempt_count, recovery_point, response_code,
                 response_body::text AS response_body,
                 ceil(extract(epoch FROM locked_until - clock_timestamp()))::int AS retry_after
            FROM } . ($waits ? 'shop.claim_or_wait_order_request(?, ?, ?::jsonb, ?::interval, ?::interval)'
                             : 'shop.claim_order_request(?, ?, ?::jsonb, ?::interval)'),
        undef, $scope, $key, $request, $self->{lock_timeout}, ($waits ? $self->{max_wait} : ()));
    my ($kind, $fence, $point) = @$claim{qw(kind fence recovery_point)};

    if ($kind eq 'replay_success' || $kind eq 'final_failure') {
        $self->emit(kind => 'claim', claim => $kind, recovery_point => $point,
                    text => "claim -> $kind: stored $claim->{response_code} replayed, nothing runs");
        return response($claim->{response_code}, $claim->{response_body},
                        'Idempotent-Replayed' => 'true');
    }
    if ($kind eq 'processing_active') {
        my $wait = $claim->{retry_after} > 0 ? $claim->{retry_after} : 1;
        $self->emit(kind => 'claim', claim => $kind, recovery_point => $point,
                    text => "claim -> processing_active at $point: another attempt holds the key -> 409 Retry-After: $wait");
        return response(409, error_body(type => 'idempotency_error', code => 'in_progress',
            message => 'a request with this key is in progress'), 'Retry-After' => $wait);
    }

    $self->emit(kind => 'claim', claim => $kind, fence => $fence, recovery_point => $point,
                attempt => $claim->{attempt_count},
                text => "claim -> $kind, fence $fence, attempt $claim->{attempt_count}, recovery point $point");
    $self->at_boundary('after_claim');
    if ($point ne 'started') {
        $self->emit(kind => 'resume', recovery_point => $point,
                    text => "resuming at '$point': the phases before it already committed, they are skipped");
    }

    while (1) {
        if ($point eq 'started') {
            my ($order_id) = $dbh->selectrow_array(
                'SELECT shop.create_order(?, ?, ?, ?::jsonb)', undef, $scope, $key, $fence, $request);
            $point = 'order_created';
            $self->emit(kind => 'phase', phase => 2, order_id => $order_id,
                        text => "phase 2: order #$order_id + audit row + recovery point order_created, one commit");
            $self->at_boundary('after_order');
        }
        elsif ($point eq 'order_created') {
            my $charge = eval {
                $dbh->selectrow_hashref(
                    q{SELECT order_id, provider_key, status_code, body::text AS body, provider_claim
                        FROM shop.charge_order(?, ?)}, undef, $scope, $key);
            };
            return $self->provider_unavailable($scope, $key, $fence, $dbh->errstr) unless $charge;
            my $body = decode_json($charge->{body});
            my $what = $charge->{status_code} == 200 ? "charge $body->{id}"
                     : $charge->{status_code} == 402 ? "card declined (charge $body->{error}{charge})"
                     : "status $charge->{status_code}";
            my $note = $charge->{provider_claim} eq 'new_claim' ? 'a new charge'
                     : 'the ORIGINAL outcome, nothing new charged';
            $self->emit(kind => 'charge', provider_claim => $charge->{provider_claim},
                        provider_status => $charge->{status_code},
                        charge_id => $body->{id} // $body->{error}{charge},
                        provider_key => $charge->{provider_key},
                        text => sprintf('provider <- charge order #%d, key %.24s...: %s -> %s, %s',
                            $charge->{order_id}, $charge->{provider_key},
                            $charge->{provider_claim}, $what, $note));
            $self->at_boundary('after_charge');
            if ($charge->{status_code} == 402) {
                my $failure = $dbh->selectrow_hashref(
                    q{SELECT status_code, body::text AS body
                        FROM shop.record_payment_failure(?, ?, ?, ?::jsonb)},
                    undef, $scope, $key, $fence, $charge->{body});
                $self->emit(kind => 'phase', phase => 3, outcome => 'failed_final',
                            text => 'phase 3: order payment_failed + key marked failed_final (402), one commit');
                return response($failure->{status_code}, $failure->{body});
            }
            return $self->provider_unavailable($scope, $key, $fence,
                                               "provider answered $charge->{status_code}")
                unless $charge->{status_code} == 200;
            $dbh->do('SELECT shop.record_charge(?, ?, ?, ?)', undef, $scope, $key, $fence, $body->{id});
            $point = 'charge_created';
            $self->emit(kind => 'phase', phase => 3, charge_id => $body->{id},
                        text => "phase 3: charge $body->{id} on the order + recovery point charge_created, one commit");
            $self->at_boundary('after_charge_recorded');
        }
        elsif ($point eq 'charge_created') {
            $dbh->begin_work;
            my ($job_id) = $dbh->selectrow_array('SELECT shop.stage_receipt(?, ?)', undef, $scope, $key);
            $self->emit(kind => 'stage', job_id => $job_id,
                        text => "phase 4: receipt job #$job_id staged (transaction still open)");
            $self->at_boundary('before_final_mark');
            my $done = $dbh->selectrow_hashref(
                'SELECT status_code, body::text AS body FROM shop.finish_order(?, ?, ?)',
                undef, $scope, $key, $fence);
            $dbh->commit;
            $self->emit(kind => 'phase', phase => 4, outcome => 'succeeded',
                        text => "phase 4: key marked succeeded with $done->{status_code} (recovery point finished), one commit with the job");
            return response($done->{status_code}, $done->{body});
        }
        else {
            die "unknown recovery point '$point'\n";
        }
    }
}

sub provider_unavailable {
    my ($self, $scope, $key, $fence, $detail) = @_;
    my $dbh = $self->{dbh};
    $detail //= 'unknown';
    $detail =~ s/^ERROR:\s*//;
    $detail =~ s/\s*\n.*//s;
    my $failure = $dbh->selectrow_hashref(
        q{SELECT status_code, body::text AS body FROM shop.record_provider_unavailable(?, ?, ?, ?)},
        undef, $scope, $key, $fence, $detail);
    $self->emit(kind => 'phase', phase => 3, outcome => 'failed_retryable',
                text => sprintf('provider unreachable (%s): key marked failed_retryable, recovery point kept -> 503',
                                $detail));
    return response($failure->{status_code}, $failure->{body});
}

1;
