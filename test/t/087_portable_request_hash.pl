# idem.request_hash(jsonb) of the portable engine against the C++ engine's:
# one cluster, the C++ extension in one database, the SQL-file install
# (dist/idem-portable.sql, written by `make portable`, run by a database
# owner who is not superuser) in another; the same documents go to both,
# and every answer must be the same hex, or the same error (SQLSTATE,
# message, detail, hint). The documents: the canonicalizer's fuzz corpus
# (test/fuzz/corpus), numbers at the edges of double precision (0, -0,
# 1e21, 1e-7, 5e-324, the largest double, halfway values such as 1e23,
# integers past 2^53, too many digits, overflow and underflow), random
# doubles written with 15 to 18 digits from a fixed seed, member names that
# sort differently by code point and by UTF-16 code unit (supplementary
# characters against U+E000..U+FFFF), escapes and control characters, and
# nesting around the portable engine's switch to its loop (64 levels) and
# the C++ parser's limit (1000), with an inexact number before and after.
use strict;
use warnings;
use utf8;
use FindBin;
use Encode qw(encode decode);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tree = $ENV{IDEM_TREE} // "$FindBin::RealBin/../..";
my $portable = "$tree/dist/idem-portable.sql";
plan skip_all => "$portable is absent (make portable writes it)" unless -f $portable;

my $seed = $ENV{PORTABLE_HASH_SEED} // 20261125;
my $random_numbers = $ENV{PORTABLE_HASH_NUMBERS} // 3000;
srand($seed);

my $node = PostgreSQL::Test::Cluster->new('portable_hash');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE cpp');
$node->safe_psql('cpp', 'CREATE EXTENSION idem');
$node->safe_psql('postgres', 'CREATE ROLE portable_owner LOGIN; CREATE DATABASE port OWNER portable_owner');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-U', 'portable_owner', '-d', 'port', '-f', $portable ],
	'the SQL-file install runs as the database owner');

# ---- the documents --------------------------------------------------------

my @docs;

# The fuzz corpus: one JSON text a file (the invalid ones fail the jsonb
# cast, alike in both databases).
for my $file (sort glob("$tree/test/fuzz/corpus/*.json")) {
	open my $fh, '<:raw', $file or die "$file: $!";
	local $/;
	my $text = decode('UTF-8', <$fh>, Encode::FB_DEFAULT);
	close $fh;
	push @docs, $text unless $text =~ /\0/;
}

# Numbers at the edges.
push @docs, qw(
  0 -0 0.0 -0.0 1 -1 1.0 1.50 100 1e0 1E+0 10e-1
  1e21 1e20 999999999999999999999 1e22 1e23 -1e23 2e23 1e24 1e25 7e22 3e23
  9.999999999999999e22 99999999999999991611392 1e39 1e40 1.2676506002282294e30
  1e-6 0.000001 1e-7 0.0000001 1.5e-7 -1.5e-10 0.1 0.2 0.3 0.30000000000000004
  0.10000000000000001 1.0000000000000002 123.4500
  5e-324 4.9e-324 2e-324 3e-324 1e-324 2.2250738585072014e-308 2.225073858507201e-308
  1.7976931348623157e308 1.7976931348623158e308 1.7976931348623159e308 1e308 1e309 1e-400 1e400
  9007199254740992 9007199254740993 9007199254740994 18014398509481985
  18446744073709551616 1.8446744073709552e19 295147905179352830000
  123456789012345678 123456789012345680 12345678901234567 1234567890123456.7
  1.23456789012345678 0.1234567890123456789 8.98846567431158e307
  1e1000000 -1e-1000000
);

# Random doubles, written the shortest way and with 15 to 18 digits: the
# shortest and the 15-digit forms are accepted, longer ones often not.
sub random_double {
	my $r = rand();
	if ($r < 0.3) {
		my $d = unpack('d', pack('Q', int(rand(2**32)) * 2**32 + int(rand(2**32))));
		return ($d != $d || $d * 0 != 0) ? 1.5 : $d;    # no NaN, no infinity
	}
	return (rand() * 2 - 1) * 10**(int(rand(76)) - 30) if $r < 0.6;
	return int(rand(2**62)) * (rand() < 0.5 ? -1 : 1);
}
for (1 .. $random_numbers) {
	my $d = random_double();
	my $digits = (15, 16, 17, 17, 18)[ int(rand(5)) ];
	my $text = sprintf("%.${digits}g", $d);
	$text = sprintf('%de%d', 1 + int(rand(9)), 15 + int(rand(26))) if rand() < 0.05;
	$text = sprintf('%de%d', 10 + int(rand(90)), -330 + int(rand(30))) if rand() < 0.05;
	$text =~ s/^(-?)\./${1}0./;
	push @docs, $text, "[$text, {\"n\": $text}]";
}

# Member names: UTF-16 order differs from code point order between
# supplementary characters and U+E000..U+FFFF; escapes and controls.
my @chars = ('a', 'b', 'A', 'é', "\x{E000}", "\x{FFFF}", "\x{D7FF}", "\x{FB33}", '😀', "\x{10000}",
	"\x{10FFFF}", '€', ' ', "\x{1}", "\x{1F}", "\x{7F}", '"', '\\', "\n", "\t", "\b", "\f", "\r", '/');
sub json_string {
	my ($s) = @_;
	my %esc = ('"' => '\\"', '\\' => '\\\\', "\n" => '\\n', "\t" => '\\t', "\b" => '\\b', "\f" => '\\f', "\r" => '\\r');
	$s =~ s/(["\\\n\t\x08\f\r])/$esc{$1}/g;
	$s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord $1)/ge;
	# Some characters written as escapes, supplementary ones as surrogate pairs.
	$s =~ s/([^\x00-\x7f])/rand() < 0.5 ? $1 : escape_char($1)/ge;
	return "\"$s\"";
}
sub escape_char {
	my $cp = ord $_[0];
	return sprintf('\\u%04x', $cp) if $cp < 0x10000;
	$cp -= 0x10000;
	return sprintf('\\u%04x\\u%04X', 0xD800 + ($cp >> 10), 0xDC00 + ($cp & 0x3FF));
}
for (1 .. 600) {
	my %seen;
	my @members;
	for (1 .. 1 + int(rand(7))) {
		my $name = join '', map { $chars[ int(rand(@chars)) ] } 1 .. int(rand(5));
		next if $seen{$name}++;
		my $value = (1, '"x"', 'null', 'true', 'false', '[1, {"z": 2, "a": []}]', json_string($name), '0.5', '-0')[ int(rand(9)) ];
		push @members, json_string($name) . ': ' . $value;
	}
	push @docs, '{' . join(', ', @members) . '}';
}
push @docs, '{"\ue000": 1, "\ud83d\ude00": 2, "\uffff": 3, "a": 4, "\ud7ff": 5, "\ud800\udc00": 6, "": 7}';
# Two bad numbers: the one first in jsonb's order (shorter names first) is
# reported, though RFC 8785's order puts the other first.
push @docs, '{"b": 1e400, "aa": 123456789012345678}', '{"aa": 1e400, "b": 123456789012345678}',
  '[{"b": [1, 0.10000000000000001], "aa": 1e-400}]';
push @docs, '"\u0001\u001f\u007f\"\\\/\b\f\n\r\t é€😀"';

# Nesting: the recursive writer's limit (64), the loop, the C++ limit (1000),
# and which error comes first.
for my $d (63, 64, 65, 100, 999, 1000, 1001, 1500) {
	push @docs, ('[' x $d) . '1' . (']' x $d);
	push @docs, ('{"a": ' x $d) . '[1.5, "x", {"b": 0.1, "a": 1e21}]' . ('}' x $d);
}
push @docs, '[1e400, ' . ('[' x 1001) . (']' x 1001) . ']';
push @docs, '[' . ('[' x 1001) . (']' x 1001) . ', 1e400]';
push @docs, '{"b é": "ü", "a": ' . ('[' x 1001) . (']' x 1001) . '}';
push @docs, '[' . join(', ', map { "{\"k$_\": [$_, {\"z\": 1, \"a\": []}]}" } 1 .. 200) . ']';
push @docs, '[' . ('{"a": [1, 2, {"b": "\"[{"}], "c": ' x 70) . '1' . ('}]' x 70) . ']';

# ---- both engines, one answer each -----------------------------------------

my $load = "CREATE TABLE hash_docs (n integer PRIMARY KEY, doc text NOT NULL);\n"
  . "CREATE FUNCTION hash_or_error(doc text) RETURNS text LANGUAGE plpgsql AS \$\$\n"
  . "DECLARE st text; msg text; det text; hnt text;\n"
  . "BEGIN\n"
  . "  RETURN idem.request_hash(doc::jsonb);\n"
  . "EXCEPTION WHEN OTHERS THEN\n"
  . "  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;\n"
  . "  RETURN st || ' ' || msg || ' | ' || det || ' | ' || hnt;\n"
  . "END \$\$;\n";
my $n = 0;
for my $doc (@docs) {
	$n++;
	(my $quoted = $doc) =~ s/'/''/g;
	$load .= "INSERT INTO hash_docs VALUES ($n, '$quoted');\n";
}
# Hashed by a role that owns nothing and is granted nothing: request_hash is
# PUBLIC's, and runs as its caller.
$node->safe_psql('postgres', 'CREATE ROLE hash_caller');
$load .= "GRANT SELECT ON hash_docs TO hash_caller;\n";
my %answers;
for my $db ('cpp', 'port') {
	$node->safe_psql($db, encode('UTF-8', $load));
	my $out = $node->safe_psql($db,
		q{SET ROLE hash_caller; SELECT n || ' ' || replace(hash_or_error(doc), E'\n', ' ') FROM hash_docs ORDER BY n});
	$answers{$db} = [ split /\n/, decode('UTF-8', $out) ];
}
is(scalar @{ $answers{port} }, scalar @docs, 'the portable engine answered every document');
is(scalar @{ $answers{cpp} }, scalar @docs, 'the C++ engine answered every document');

my (@differ, %kinds);
for my $i (0 .. $#docs) {
	my ($c, $p) = ($answers{cpp}[$i] // '', $answers{port}[$i] // '');
	my ($kind) = $c =~ /^\d+ (\S+)/;
	$kinds{ length($kind // '') == 64 ? 'hash' : ($kind // 'none') }++;
	push @differ, $i if $c ne $p;
}
for my $i (@differ[ 0 .. ($#differ < 9 ? $#differ : 9) ]) {
	my $shown = length($docs[$i]) > 200 ? substr($docs[$i], 0, 200) . '...' : $docs[$i];
	diag(encode('UTF-8', "document: $shown\n  C++:      $answers{cpp}[$i]\n  portable: $answers{port}[$i]"));
}
is(scalar @differ, 0, sprintf('the same answer for all %d documents (%s)', scalar @docs,
	join(', ', map { "$_ $kinds{$_}" } sort keys %kinds)));
# The documents reach every outcome the comparison is about.
ok(($kinds{hash} // 0) > 1000, 'many documents hashed');
ok(($kinds{P4005} // 0) > 100, 'many numbers refused as inexact (P4005)');
ok(($kinds{'54001'} // 0) >= 4, 'documents nested too deeply (54001)');

# request_hash is PARALLEL SAFE: the documents that hash, hashed again by
# parallel workers alone (its bodies must do nothing a worker may not, such
# as starting a subtransaction), give the same hex.
my @hashed = map { $_ + 1 } grep { ($answers{cpp}[$_] // '') =~ /^\d+ [0-9a-f]{64}$/ } 0 .. $#docs;
my $parallel = $node->safe_psql('port', "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0;
	SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = off;
	ALTER TABLE hash_docs SET (parallel_workers = 2);
	SELECT n || ' ' || idem.request_hash(doc::jsonb) FROM hash_docs WHERE n = ANY ('{" . join(',', @hashed) . "}') ORDER BY n");
my $serial = join "\n", grep { /^\d+ [0-9a-f]{64}$/ } @{ $answers{cpp} };
is($parallel, $serial, sprintf('%d documents hashed by parallel workers', scalar @hashed));
like($node->safe_psql('port', "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0;
	SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
	EXPLAIN SELECT idem.request_hash(doc::jsonb) FROM hash_docs"), qr/Gather/, 'the plan is parallel');

# bytea: the digest of the bytes themselves.
for my $bytes ("''", "'\\x00ff'", "convert_to('é€😀', 'UTF8')", "decode(repeat('ab', 100000), 'hex')") {
	my $sql = encode('UTF-8', "SELECT idem.request_hash(${bytes}::bytea)");
	is($node->safe_psql('port', $sql), $node->safe_psql('cpp', $sql), encode('UTF-8', "request_hash(bytea) of $bytes"));
}

# The outbox's delivery key, request_hash of [scope, key, event_type], which
# the portable outbox_put writes out without the canonicalizer.
my $puts = join "\n", map {
	my ($scope, $key, $type) = map { my $t = $_; $t =~ s/'/''/g; "'$t'" } @$_;
	"SELECT idem.outbox_put($scope, $key, $type, '{}');"
} (['orders', 'k1', 'receipt'], ["q\"uote", "back\\slash", "ctl\x{1}\x{1F}\x{7F}\t\n"],
	['😀', "\x{E000}\x{FFFF}", 'a/b'], ["'", 'é€', ' ']);
my $keys = q{SELECT string_agg(delivery_key, ' ' ORDER BY id) FROM idem.outbox_event};
$node->safe_psql($_, encode('UTF-8', $puts)) for ('cpp', 'port');
is($node->safe_psql('port', $keys), $node->safe_psql('cpp', $keys), 'outbox delivery keys are the same');

$node->stop;
done_testing();
