package Orders::Client;
# The API client: sends POST /orders with an Idempotency-Key and retries like
# a careful client - after a lost connection and after a 409 (honouring
# Retry-After) it sends the same key and the same body again, until it gets
# an answer that is final.
#
# Every attempt is served by a fresh API server worker: a forked process with
# its own database connection, as a load balancer would hand the retry to
# any server. A worker that crashes takes only its own connection down.
use strict;
use warnings;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time sleep);
use Orders::Server;

my $MAX_ATTEMPTS = 6;

# dsn, lock_timeout, timeline (array ref that collects events), label ('' or
# a twin's letter), before_retry (optional sub, given the last response or
# undef for a lost connection, run before each retry: what the operator or
# the world does meanwhile, e.g. a sweep).
sub new {
    my ($class, %args) = @_;
    return bless {label => '', attempts => 0, %args}, $class;
}

sub note {
    my ($self, %event) = @_;
    push @{$self->{timeline}},
        {t => time, who => 'client', tag => "$self->{label}$self->{attempts}", %event};
}

# Starts one attempt in a worker process. start_at (epoch seconds) makes the
# worker connect first and then wait, so twins claim at the same instant;
# crash_at, stall_at, stall_for and max_wait go to the server (Orders::Server).
# The returned attempt's pid is the worker's: SIGUSR1 ends its stall.
sub start {
    my ($self, $scope, $key, $request, %opt) = @_;
    $self->{attempts}++;
    $self->note(kind => 'send', text => "POST /orders  Idempotency-Key: $key  $request");
    pipe(my $reader, my $writer) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $reader;
        $writer->autoflush(1);
        my $emit = sub { print {$writer} encode_json({t => time, %{$_[0]}}), "\n" };
        my $server = Orders::Server->new(dsn => $self->{dsn}, lock_timeout => $self->{lock_timeout},
                                         emit => $emit, map { $_ => $opt{$_} } qw(crash_at stall_at stall_for max_wait));
        eval {
            $server->connect;
            my $wait = ($opt{start_at} // 0) - time;
            sleep($wait) if $wait > 0;
            my $response = $server->handle($scope, $key, $request);
            $emit->({kind => 'response', %$response});
        };
        $emit->({kind => 'worker_error', who => 'server', text => "worker failed: $@"}) if $@;
        POSIX::_exit(0);
    }
    close $writer;
    return {pid => $pid, fh => $reader, tag => "$self->{label}$self->{attempts}"};
}

# The attempt's next event from its worker, or undef once the worker has
# closed its end. A deadline (epoch seconds) bounds the wait: past it this
# dies. Lines are cut from a buffer of our own, so a partial line read before
# a deadline is kept for the next call.
sub next_event {
    my ($self, $attempt, $deadline) = @_;
    my $fh = $attempt->{fh};
    $attempt->{buffer} //= '';
    while ($attempt->{buffer} !~ /\n/) {
        return undef if $attempt->{eof};
        if (defined $deadline) {
            my $left = $deadline - time;
            die "attempt $attempt->{tag}: no event from its server before the deadline\n" if $left <= 0;
            my $bits = '';
            vec($bits, fileno($fh), 1) = 1;
            next unless select(my $ready = $bits, undef, undef, $left) > 0;
        }
        my $n = sysread($fh, my $chunk, 65536);
        die "attempt $attempt->{tag}: read: $!\n" unless defined $n;
        $attempt->{eof} = 1 if $n == 0;
        $attempt->{buffer} .= $chunk;
    }
    $attempt->{buffer} =~ s/^([^\n]*)\n//;
    return decode_json($1);
}

# Reads the attempt's events into the timeline until one of the given kind
# comes (returned), or dies at the deadline or when the worker ended first.
sub wait_for_event {
    my ($self, $attempt, $kind, $deadline) = @_;
    while (my $event = $self->next_event($attempt, $deadline)) {
        push @{$self->{timeline}}, {%$event, tag => $attempt->{tag}};
        return $event if $event->{kind} eq $kind;
    }
    die "attempt $attempt->{tag}: its server ended without a '$kind' event\n";
}

# Waits for the attempt's worker; returns its response, or undef when the
# connection was lost before an answer came.
sub finish {
    my ($self, $attempt) = @_;
    my $response;
    while (my $event = $self->next_event($attempt)) {
        if ($event->{kind} eq 'response') {
            $response = $event;
        } else {
            push @{$self->{timeline}}, {%$event, tag => $attempt->{tag}};
        }
    }
    close $attempt->{fh};
    waitpid($attempt->{pid}, 0);
    return $response;
}

# Sends a request until its answer is final; returns
# {final => response, responses => [every response], attempts => n}.
# crash_at applies to the first attempt only; started is a first attempt
# already under way (twins).
sub request {
    my ($self, $scope, $key, $request, %opt) = @_;
    my @responses;
    my $attempt = $opt{started} // $self->start($scope, $key, $request, crash_at => $opt{crash_at});
    while (1) {
        my $response = $self->finish($attempt);
        if (!$response) {
            $self->note(kind => 'lost', text => 'connection lost, no answer: the client will retry the same request');
        } else {
            push @responses, $response;
            my $replayed = $response->{headers}{'Idempotent-Replayed'} ? ' (Idempotent-Replayed)' : '';
            $self->note(kind => 'answer', code => $response->{code}, t => $response->{t},
                        text => "<- $response->{code}$replayed $response->{body}");
            my $retry_after = $response->{headers}{'Retry-After'};
            if ($response->{code} == 409 && $retry_after) {
                $self->note(kind => 'wait', text => "waits Retry-After: $retry_after s, then retries");
                sleep($retry_after);
            } elsif ($response->{code} != 503) {
                return {final => $response, responses => \@responses, attempts => $self->{attempts}};
            }
        }
        if ($self->{attempts} >= $MAX_ATTEMPTS) {
            my @said = map { $_->{text} } grep { $_->{who} eq 'server' } @{$self->{timeline}};
            die "request $key: no final answer after $MAX_ATTEMPTS attempts; the server said:\n  "
                . join("\n  ", @said > 3 ? @said[-3 .. -1] : @said) . "\n";
        }
        $self->{before_retry}->($response) if $self->{before_retry};
        $attempt = $self->start($scope, $key, $request);
    }
}

1;
