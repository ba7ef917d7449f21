package Orders::Ledger;
# What an auditor sees: the rows in the shop and at the provider, per
# idempotency key and in total, and whether the two sides reconcile.
use strict;
use warnings;
use DBI;

sub new {
    my ($class, %args) = @_;    # shop_db, provider_db
    my %attrs = (AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1);
    return bless {
        shop     => DBI->connect("dbi:Pg:dbname=$args{shop_db}", '', '', \%attrs),
        provider => DBI->connect("dbi:Pg:dbname=$args{provider_db}", '', '', \%attrs),
    }, $class;
}

sub shop { $_[0]{shop} }

# The idem row of a key: status, recovery point, fence, attempts, and how
# long its lock still runs (negative: expired).
sub key_state {
    my ($self, $scope, $key) = @_;
    return $self->{shop}->selectrow_hashref(
        q{SELECT status, recovery_point, fence, attempt_count, failure_code, claimed_by,
                 round(extract(epoch FROM locked_until - clock_timestamp())::numeric, 1) AS lock_left,
                 locked_until IS NOT NULL AND locked_until <= clock_timestamp() AS lock_expired
            FROM idem.idempotency_request WHERE scope = ? AND key = ?}, undef, $scope, $key);
}

# Rows an intent produced: orders, audit rows, receipt jobs in the shop,
# charges at the provider (found by the order ids they were made for).
sub counts_for_key {
    my ($self, $scope, $key) = @_;
    my $shop = $self->{shop};
    my $order_ids = $shop->selectcol_arrayref(
        'SELECT id FROM shop.orders WHERE idempotency_scope = ? AND idempotency_key = ? ORDER BY id',
        undef, $scope, $key);
    my ($audit) = $shop->selectrow_array(
        'SELECT count(*) FROM shop.audit_log WHERE order_id = ANY(?)', undef, $order_ids);
    my ($jobs) = $shop->selectrow_array(
        q{SELECT count(*) FROM idem.outbox_event
            WHERE event_type = 'receipt' AND (payload->>'order_id')::bigint = ANY(?)},
        undef, $order_ids);
    my ($charges) = $self->{provider}->selectrow_array(
        q{SELECT count(*) FROM psp.charges WHERE (metadata->>'order_id')::bigint = ANY(?)},
        undef, $order_ids);
    return {orders => scalar @$order_ids, order_ids => $order_ids, audit_rows => $audit,
            receipt_jobs => $jobs, charges => $charges};
}

sub totals {
    my ($self) = @_;
    my ($orders, $keys, $paid, $jobs) = $self->{shop}->selectrow_array(
        q{SELECT (SELECT count(*) FROM shop.orders),
                 (SELECT count(DISTINCT (idempotency_scope, idempotency_key)) FROM shop.orders),
                 (SELECT count(*) FROM shop.orders WHERE status = 'paid'),
                 (SELECT count(*) FROM idem.outbox_event WHERE event_type = 'receipt')});
    my ($charges) = $self->{provider}->selectrow_array('SELECT count(*) FROM psp.charges');
    return {orders => $orders, keys => $keys, paid_orders => $paid, receipt_jobs => $jobs,
            charges => $charges};
}

# After the relay ran: receipts the provider received, and the paid orders
# without exactly one (none, when all is well).
sub receipts {
    my ($self) = @_;
    my $paid = $self->{shop}->selectcol_arrayref(
        q{SELECT id FROM shop.orders WHERE status = 'paid' ORDER BY id});
    my $got = $self->{provider}->selectall_hashref(
        'SELECT order_id, count(*) AS n FROM psp.receipts GROUP BY order_id', 'order_id');
    my @wrong = map { "order $_: " . ($got->{$_}{n} // 0) . ' receipts' }
                grep { ($got->{$_}{n} // 0) != 1 } @$paid;
    my %paid = map { $_ => 1 } @$paid;
    push @wrong, map { "receipt for unpaid order $_" } grep { !$paid{$_} } sort keys %$got;
    my ($total) = $self->{provider}->selectrow_array('SELECT count(*) FROM psp.receipts');
    return ($total, \@wrong);
}

# Receipts the provider received for one order.
sub receipts_for_order {
    my ($self, $order_id) = @_;
    my ($n) = $self->{provider}->selectrow_array(
        'SELECT count(*) FROM psp.receipts WHERE order_id = ?', undef, $order_id);
    return $n;
}

# Brandur's advice for the window no store closes: diff your records against
# the provider's. Returns the discrepancies (none, when all is well).
sub reconcile {
    my ($self) = @_;
    my $orders = $self->{shop}->selectall_hashref(
        'SELECT id, status, charge_id, amount_cents FROM shop.orders', 'id');
    my $charges = $self->{provider}->selectall_arrayref(
        q{SELECT id, status, amount_cents, (metadata->>'order_id')::bigint AS order_id
            FROM psp.charges}, {Slice => {}});
    my (@problems, %charges_of);
    for my $charge (@$charges) {
        push @{$charges_of{$charge->{order_id} // ''}}, $charge;
        my $order = $orders->{$charge->{order_id} // ''};
        if (!$order) {
            push @problems, "charge $charge->{id} has no order";
        } elsif ($charge->{amount_cents} != $order->{amount_cents}) {
            push @problems, "charge $charge->{id} amount differs from order $order->{id}";
        } elsif ($charge->{status} eq 'succeeded' && ($order->{charge_id} // '') ne $charge->{id}) {
            push @problems, "charge $charge->{id} succeeded but order $order->{id} does not record it";
        }
    }
    for my $order (values %$orders) {
        my $n = scalar @{$charges_of{$order->{id}} // []};
        push @problems, "order $order->{id} has $n charges" if $n > 1;
        push @problems, "order $order->{id} is paid without a charge" if $order->{status} eq 'paid' && !$n;
    }
    return \@problems;
}

# The operator's (or pg_cron's, or idem's worker's) zombie sweep.
sub sweep {
    my ($self) = @_;
    my ($n) = $self->{shop}->selectrow_array('SELECT idem.sweep_stale()');
    return $n;
}

1;
