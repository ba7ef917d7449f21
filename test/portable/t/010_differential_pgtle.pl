# The differential test (test/t/088_engine_differential.pl) with the
# portable engine installed through pg_tle: CREATE EXTENSION idem by a role
# granted pgtle_admin, not a superuser, in a cluster of the portable
# installation with pg_tle preloaded, against the C++ engine in a cluster of
# the C++ installation (IDEM_CPP_BIN). 088's settings apply
# (IDEM_DIFF_SEQUENCES, default 200: about 10 s here).
use strict;
use warnings;
# Loaded here, before 088 is: their INIT blocks (the port and log set-up)
# run only for modules loaded at compile time.
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{IDEM_DIFF_PORTABLE_VIA} = 'pgtle';
my $file = ($ENV{IDEM_TREE} // '.') . '/test/t/088_engine_differential.pl';
defined(do $file) or die "$file: " . ($@ || $!);
