# The differential test (test/t/088_engine_differential.pl) with the
# portable engine installed through pg_tle: CREATE EXTENSION idem by a role
# granted pgtle_admin, not a superuser, in a cluster of the portable
# installation with pg_tle preloaded, against the C++ engine in a cluster of
# the C++ installation (IDEM_CPP_BIN). 60 sequences by default, to keep the
# portable group short (088 runs 200 through the SQL file, and the engine's
# bodies are the same); IDEM_DIFF_SEQUENCES and 088's other settings apply.
use strict;
use warnings;

$ENV{IDEM_DIFF_PORTABLE_VIA} = 'pgtle';
$ENV{IDEM_DIFF_SEQUENCES} //= 60;
my $file = ($ENV{IDEM_TREE} // '.') . '/test/t/088_engine_differential.pl';
defined(do $file) or die "$file: " . ($@ || $!);
