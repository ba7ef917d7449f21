package Orders::Relay;
# Runs idem's relay (clients/relay/idem-relay) from the shop's outbox to the
# provider's receipts until the outbox is drained. The first relay is killed
# with SIGKILL as soon as it has delivered one receipt, leaving whatever it
# had leased; the second one re-leases those events once their 2-second
# leases run out, and the provider's consume_once drops any it had already
# delivered. Either way: exactly one receipt per paid order.
use strict;
use warnings;
use Time::HiRes qw(time sleep);

sub path {
    my ($dir) = @_;    # examples/orders
    return $ENV{IDEM_RELAY} // "$dir/../../clients/relay/idem-relay";
}

sub command {
    my (%args) = @_;    # dir, shop_db, provider_db
    return (path($args{dir}), '--source', "dbi:Pg:dbname=$args{shop_db}",
            '--target', "dbi:Pg:dbname=$args{provider_db}", '--consumer', 'shop-receipts',
            '--deliver', 'psp.send_receipt', '--lease', '2 seconds',
            '--batch', '4', '--poll', '0.2', '--quiet');
}

# Returns a line of what happened; dies when the relay fails.
sub drain {
    my (%args) = @_;    # dir, shop_db, provider_db, ledger
    my @cmd = command(%args);
    my $pid = fork // die "fork: $!";
    if (!$pid) { exec @cmd or die "exec $cmd[0]: $!" }
    my $deadline = time + 60;
    my ($delivered) = (0);
    while (time < $deadline) {
        ($delivered) = $args{ledger}->receipts;
        last if $delivered > 0;
        sleep 0.05;
    }
    kill 'KILL', $pid;
    waitpid $pid, 0;
    my $killed_after = $delivered;
    system(@cmd, '--until-empty') == 0 or die "idem-relay failed: $?\n";
    return "relay killed with SIGKILL after $killed_after receipt(s); a second relay drained the outbox";
}

1;
