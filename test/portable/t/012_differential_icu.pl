# The differential test (test/t/088_engine_differential.pl) with both
# databases made with the ICU collation cy-GB (the
# engines answer alike whatever the database's collation), the portable
# engine installed with the SQL file by the database's owner. 088's
# settings apply (IDEM_DIFF_SEQUENCES, default 200).
use strict;
use warnings;
# Loaded here, before 088 is: their INIT blocks (the port and log set-up)
# run only for modules loaded at compile time.
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{IDEM_DIFF_ICU_LOCALE} = 'cy-GB';
my $file = ($ENV{IDEM_TREE} // '.') . '/test/t/088_engine_differential.pl';
defined(do $file) or die "$file: " . ($@ || $!);
