package Orders::Setup;
# Creates the example's two databases on the cluster in PGHOST/PGPORT: the
# shop (the orders API) and the payment provider, each with its own idem
# store, and wires the shop to the provider through a dblink_fdw server.
use strict;
use warnings;
use DBI;

sub connect_to {
    my ($db) = @_;
    return DBI->connect("dbi:Pg:dbname=$db", '', '',
        {AutoCommit => 1, RaiseError => 1, PrintError => 0});
}

sub load_file {
    my ($db, $file) = @_;
    local $ENV{PGOPTIONS} = '-c client_min_messages=warning';
    system('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $db, '-f', $file) == 0
        or die "loading $file into $db failed\n";
}

# shop_db, provider_db: database names (dropped first if they exist);
# dir: the directory holding shop.sql and provider.sql.
sub create {
    my (%args) = @_;
    my $admin = connect_to('postgres');
    $admin->do('SET client_min_messages = warning');
    for my $db (@args{qw(provider_db shop_db)}) {
        my $name = $admin->quote_identifier($db);
        $admin->do("DROP DATABASE IF EXISTS $name WITH (FORCE)");
        $admin->do("CREATE DATABASE $name");
    }
    $admin->disconnect;
    load_file($args{provider_db}, "$args{dir}/provider.sql");
    load_file($args{shop_db}, "$args{dir}/shop.sql");

    # The provider lives on this same cluster; the server tells where it
    # listens, whatever the client's environment says.
    my $shop = connect_to($args{shop_db});
    my ($socket_dir, $port) = $shop->selectrow_array(
        q{SELECT trim(split_part(current_setting('unix_socket_directories'), ',', 1)),
                 current_setting('port')});
    my $host = length $socket_dir ? $socket_dir : 'localhost';
    $shop->do(sprintf('CREATE SERVER payment_provider FOREIGN DATA WRAPPER dblink_fdw '
                      . 'OPTIONS (host %s, port %s, dbname %s)',
                      map { $shop->quote($_) } $host, $port, $args{provider_db}));
    # Name the role: libpq inside the server would otherwise log in as the
    # operating-system user the server runs as.
    my ($role) = $shop->selectrow_array('SELECT current_user');
    $shop->do(sprintf('CREATE USER MAPPING FOR CURRENT_USER SERVER payment_provider OPTIONS (user %s)',
                      $shop->quote($role)));
    $shop->disconnect;
}

1;
