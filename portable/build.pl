#!/usr/bin/perl
# Writes the portable engine's install files from the C++ engine's scripts.
#
# The schema is written once: the C++ extension's scripts (the 1.1 base
# script make builds from the released 1.0 and 1.0--1.1 files, then every
# sql/idem--X--Y.sql after it) are copied statement by statement, and each
# function declared `AS 'MODULE_PATHNAME', '<symbol>' LANGUAGE C` keeps its
# header (name, arguments, defaults, result, volatility, strictness,
# SECURITY DEFINER, PARALLEL, ROWS, SET) and gets the body written in
# portable/functions/<symbol>.sql. So the two engines share every table,
# type, index, view, grant and signature by construction, and a C function
# without a portable body stops the build.
#
#   perl portable/build.pl [--check]     (from the project's root; make portable)
#
# Writes build/portable/ (pg_tle extension scripts per version and update,
# and the SQL-file install of every version) and dist/ (what users run:
# idem-pgtle.sql, idem-portable.sql, idem-portable--X--Y.sql). --check
# writes into a temporary directory and fails when dist/ differs from it.
use strict;
use warnings;
use File::Path qw(make_path);
use File::Temp qw(tempdir);

my $check = grep { $_ eq '--check' } @ARGV;
my $first = '1.1';    # the first version the portable engine has

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "portable/build.pl: cannot read $path: $!\n";
    local $/;
    my $text = <$fh>;
    close $fh;
    return $text;
}

sub spew {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "portable/build.pl: cannot write $path: $!\n";
    print $fh $text;
    close $fh;
}

# The SQLSTATEs the C++ engine names (namespace idem::sqlstate in these
# headers). A portable file writes each of idem's codes as
# {{sqlstate::name}}, with the C++ name, and gets the headers' code here,
# so the two engines cannot give one condition two codes. A name no header
# has stops the build, and so does a class P4 code written by hand.
# PostgreSQL's codes for conditions the C++ engine raises with
# PostgreSQL's own ERRCODE_* (a setting's bad value, a privilege on a
# function, a cancel) are written as they are: PostgreSQL fixes those.
my @sqlstate_headers = ('src/pure/errors.hpp', 'src/pure/row_invariants.hpp');
my %sqlstate;
for my $header (@sqlstate_headers) {
    my @blocks = slurp($header) =~ /^namespace sqlstate \{\n(.*?)^\}/msg
        or die "$header: no `namespace sqlstate {` (portable/build.pl reads idem's SQLSTATEs there)\n";
    for my $block (@blocks) {
        while ($block =~ /^inline constexpr char (\w+)\[\] = "([0-9A-Z]{5})";/mg) {
            die "$header: sqlstate::$1 is $2 here and $sqlstate{$1} in another header\n"
                if exists $sqlstate{$1} && $sqlstate{$1} ne $2;
            $sqlstate{$1} = $2;
        }
    }
}

# The text of a file of portable/, each {{sqlstate::name}} in it replaced by its code.
sub source {
    my ($path) = @_;
    my $text = slurp($path);
    my $at = sub { "$path:" . (1 + (substr($text, 0, $_[0]) =~ tr/\n//)) };
    if ($text =~ /\bP4[0-9]{3}\b/) {
        die $at->($-[0]) . ": $&: write idem's SQLSTATE as {{sqlstate::name}}, its name in "
            . "@sqlstate_headers, not by hand\n";
    }
    while ($text =~ /\{\{\s*sqlstate\b[^}]*\}\}/g) {
        my ($written, $where) = ($&, $at->($-[0]));
        my ($name) = $written =~ /\A\{\{sqlstate::(\w+)\}\}\z/
            or die "$where: `$written`: write {{sqlstate::name}}\n";
        exists $sqlstate{$name} or die "$where: `$written`: no SQLSTATE of that name in @sqlstate_headers\n";
    }
    $text =~ s/\{\{sqlstate::(\w+)\}\}/$sqlstate{$1}/g;
    return $text;
}

# The update chain from $first: sql/idem--1.1--1.2.sql, then 1.2--1.3, ...
sub updates {
    my @chain;
    my $from = $first;
    while (1) {
        my @next = grep { m{^sql/idem--\Q$from\E--([0-9.]+)\.sql$} } glob('sql/idem--*--*.sql');
        last unless @next;
        die "portable/build.pl: more than one update from $from: @next\n" if @next > 1;
        my ($to) = $next[0] =~ m{--([0-9.]+)\.sql$};
        push @chain, [$from, $to, $next[0]];
        $from = $to;
    }
    return @chain;
}

# A body file: comment lines, `LANGUAGE plpgsql|sql`, then `AS $function$
# ... $function$`. Returns (language, text to put before LANGUAGE).
sub body_of {
    my ($symbol) = @_;
    my $path = "portable/functions/$symbol.sql";
    -f $path or die "portable/build.pl: no portable body for C function $symbol (write $path)\n";
    my $text = source($path);
    my ($head, $lang, $body) = $text =~ /\A(.*?)^LANGUAGE (plpgsql|sql)[ \t]*\n(AS \$function\$\n.*^\$function\$)\s*\z/ms
        or die "$path: expected comments, a line `LANGUAGE plpgsql` (or sql), then AS \$function\$ ... \$function\$\n";
    lint($path, $body);
    my $unpinned = $head =~ /^-- portable: unpinned$/m;
    lint_unpinned($path, $body) if $unpinned;
    return ($lang, $head . $body . "\n", $unpinned);
}

# An "unpinned" body (a line `-- portable: unpinned` above LANGUAGE) runs
# without SET search_path: a pinned path costs a settings save and restore
# at every call, which a function run at every write of the key table
# should not pay. Allowed only where the caller's search_path can steer
# nothing: the function is not SECURITY DEFINER (checked at its header),
# so it runs with its caller's rights, and its body looks up no name
# through the path: every operator written OPERATOR(pg_catalog.x) (so no
# bare operator character is left), no construct that looks an operator up
# by name (IN, BETWEEN, IS DISTINCT FROM, NULLIF, LIKE, ANY/ALL, a CASE
# with an operand), every function call and cast schema-qualified, no
# declared variable (a type name is looked up too) and no dynamic SQL.
sub lint_unpinned {
    my ($path, $body) = @_;
    my $code = $body;
    $code =~ s/\A\s*AS \$function\$//;
    $code =~ s/\$function\$\s*\z//;
    $code =~ s/--[^\n]*//g;
    $code =~ s/'(?:[^']|'')*'/''/g;
    my $refuse = sub { die "$path: an unpinned body $_[0] (portable/build.pl, lint_unpinned)\n" };
    $refuse->("declares a variable") if $code =~ /\bDECLARE\b/i;
    $refuse->("runs dynamic SQL") if $code =~ /\b(?:EXECUTE|format)\b/i;
    $refuse->("uses `$1`, which looks an operator up by name")
        if $code =~ /\b(IN|BETWEEN|DISTINCT|NULLIF|LIKE|ILIKE|SIMILAR|ANY|ALL|SOME|OVERLAPS)\b/i;
    $refuse->("has a CASE with an operand (compared by a looked-up `=`)") if $code =~ /\bCASE\b(?!\s+WHEN\b)/i;
    $code =~ s/\bOPERATOR\(pg_catalog\.[^\s()\w]+\)/ /g;
    while ($code =~ /::\s*([\w.]+)/g) {
        my $type = $1;
        $refuse->("casts to `$type` without its schema") unless $type =~ /^(?:pg_catalog|idem)\.\w+$/;
    }
    $code =~ s/::\s*[\w.]+/ /g;
    $refuse->("has an operator `$1` not written OPERATOR(pg_catalog.x)") if $code =~ m{([=<>!~+\-*/%^&|#@?])};
    my %syntax = map { $_ => 1 } qw(if elsif and or not then when else return coalesce);
    while ($code =~ /(\.?)\b([a-z_][a-z0-9_]*)\s*\(/gi) {
        my ($dot, $name) = ($1, lc $2);
        next if $dot || $syntax{$name};
        my $pre = substr($code, 0, $-[2]);
        next if $pre =~ /\b(?:pg_catalog|idem)\.$/i;
        $refuse->("calls `$name(` without its schema");
    }
    while ($code =~ /\b([a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*\s*\(/gi) {
        $refuse->("calls a function of schema `$1`") unless $1 =~ /^(?:pg_catalog|idem)$/i;
    }
}

# Relations are looked up in pg_temp after pg_catalog under the pinned
# search_path, so a body names every relation with its schema. Names a
# body defines itself (CTEs, and the aliases that follow a qualified name)
# are allowed; anything else after FROM/JOIN/UPDATE/INTO/TABLE is refused.
sub lint {
    my ($path, $body) = @_;
    my $code = $body;
    $code =~ s/--[^\n]*//g;                     # comments
    $code =~ s/'(?:[^']|'')*'//g;               # string literals
    my %local = map { lc($_) => 1 } $code =~ /\b([a-z_][a-z0-9_]*)\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(/gi;
    my %words = map { $_ => 1 } qw(only lateral select strict unnest generate_series jsonb_each
        jsonb_array_elements jsonb_object_keys jsonb_each_text jsonb_array_elements_text
        json_each regexp_matches regexp_split_to_table string_to_table pg_catalog idem);
    while ($code =~ /\b(FROM|JOIN|UPDATE|INTO|TABLE)\s+([a-z_][a-z0-9_]*)\b(\s*[.(])?/gi) {
        my ($kw, $name, $after) = (uc $1, lc $2, $3);
        my $pre = substr($code, 0, $-[0]);
        next if defined $after;                 # qualified, or a function call
        next if $local{$name} || $words{$name};
        next if $kw eq 'FROM' && $pre =~ /\bDISTINCT\s*$/i;
        next if $kw eq 'FROM' && $pre =~ /\b(?:extract|substring|trim|overlay|position)\s*\([^()]*$/i;
        next if $kw eq 'INTO' && $pre !~ /\bINSERT\s*$/i;              # SELECT ... INTO a variable
        next if $kw eq 'UPDATE' && $pre =~ /\b(?:FOR|KEY|DO)\s*$/i;     # FOR [NO KEY] UPDATE, DO UPDATE
        next if $kw eq 'TABLE' && $pre !~ /\b(?:LOCK|TRUNCATE|ALTER)\s*$/i;
        die "$path: `$kw $name`: name the relation with its schema (idem.$name, pg_catalog.$name)\n";
    }
}

# The portable bodies are not versioned: a database installed from an
# older idem has older bodies under the same headers. So every update
# script first re-creates, with today's bodies, each function the versions
# before it gave a portable body (name and C symbol => the last CREATE
# statement; a DROP FUNCTION forgets the name) and the support files: the
# database becomes a fresh install of the version it is at, and the
# update proper runs on that.
my %refresh;         # "name symbol" => CREATE OR REPLACE statement
my @refresh_order;   # keys of %refresh in the order first created
# CREATE OR REPLACE resets every attribute its statement does not name, so
# an update script's ALTER FUNCTION of a refreshed function (1.2 made
# typical_duration SECURITY DEFINER) is replayed after the refresh too:
# [name, statement], in order. The base script's ALTERs are not needed:
# they pin search_path, which each refreshed statement names already.
my @refresh_alters;
my $collect_alters = 0;   # set while the update scripts are read

sub remember {
    my ($name, $symbol, $statement) = @_;
    my $key = "$name $symbol";
    push @refresh_order, $key unless exists $refresh{$key};
    $statement =~ s/\ACREATE FUNCTION\b/CREATE OR REPLACE FUNCTION/;
    $refresh{$key} = $statement;
}

sub forget {
    my ($name) = @_;
    for my $key (grep { /^\Q$name\E / } keys %refresh) { delete $refresh{$key}; }
    @refresh_order = grep { exists $refresh{$_} } @refresh_order;
    @refresh_alters = grep { $_->[0] ne $name } @refresh_alters;
}

# One C++ script made portable: every LANGUAGE C function gets its body,
# and every portable function its pinned search_path.
sub portable_script {
    my ($source, $text, %insert) = @_;
    my @out;
    my @lines = split /\n/, $text, -1;
    pop @lines if @lines && $lines[-1] eq '';
    my $cxx_only = 0;
    for (my $i = 0; $i < @lines; $i++) {
        my $line = $lines[$i];
        next if $line =~ /^\\echo /;            # psql's guard; pg_tle runs plain SQL
        # A block for the C++ engine alone (its library's functions, the
        # search_path its proven statements do without): the portable
        # engine's bodies are PL/pgSQL and keep their pin.
        if ($line =~ /^-- ==== C\+\+ engine only: /) {
            $cxx_only = 1;
            pop @out while @out && $out[-1] eq '';   # its blank line before
        }
        if ($cxx_only) {
            $cxx_only = 0 if $line =~ /^-- ==== end C\+\+ engine only ====$/;
            next;
        }
        forget($1) if $line =~ /^DROP FUNCTION (?:IF EXISTS )?([\w.]+)\(/;
        if ($line =~ /^AS 'MODULE_PATHNAME', '(\w+)'$/) {
            my $symbol = $1;
            my ($lang, $body, $unpinned) = body_of($symbol);
            my $next = $lines[++$i] // '';
            $next =~ /^LANGUAGE C\b(.*)$/ or die "$source: `$line` is not followed by LANGUAGE C\n";
            my @rest = ("LANGUAGE $lang$1");
            # The statement ends at the first line ending in ';'.
            until ($rest[-1] =~ /;\s*$/) {
                $i++ < $#lines or die "$source: unterminated CREATE FUNCTION for $symbol\n";
                push @rest, $lines[$i];
            }
            if ($unpinned) {
                # Nothing may pin or raise its rights after the fact either.
                die "$source: $symbol is unpinned but SECURITY DEFINER or has a SET clause\n"
                    if grep { /\bSECURITY DEFINER\b|\bSET\b/ } @rest;
            } elsif (!grep { /\bSET search_path\b/ } @rest) {
                $rest[-1] =~ s/;\s*$//;
                push @rest, 'SET search_path = pg_catalog, pg_temp;';
            }
            push @out, $body . join("\n", @rest);
            my ($start) = grep { $out[$_] =~ /^CREATE (?:OR REPLACE )?FUNCTION / } reverse 0 .. $#out;
            defined $start && $out[$start] =~ /^CREATE (?:OR REPLACE )?FUNCTION ([\w.]+)\(/
                or die "$source: no CREATE FUNCTION before the body of $symbol\n";
            my $name = $1;
            die "$source: $symbol is unpinned but an ALTER FUNCTION $name gives it a setting or SECURITY DEFINER\n"
                if $unpinned && $text =~ /^ALTER FUNCTION \Q$name\E\([^;]*\b(?:SET|SECURITY DEFINER)\b/m;
            remember($name, $symbol, join("\n", @out[$start .. $#out]) . "\n");
            next;
        }
        my ($altered) = $collect_alters ? $line =~ /^ALTER FUNCTION ([\w.]+)\(/ : ();
        if (defined $altered && grep { /^\Q$altered\E / } keys %refresh) {
            my @statement = ($line);
            for (my $j = $i; $statement[-1] !~ /;\s*$/; ) { push @statement, $lines[++$j]; }
            push @refresh_alters, [$altered, join("\n", @statement)];
        }
        push @out, $line;
        if (defined $insert{after} && $line =~ $insert{after}[0]) {
            # The anchor statement ends at the first line ending in ';'.
            while ($lines[$i] !~ /;\s*$/) { push @out, $lines[++$i]; }
            push @out, '', $insert{after}[1];
            delete $insert{after};
        }
    }
    die "$source: the anchor of the support files placed 'after' was not found\n" if defined $insert{after};
    push @out, '', $insert{end} if defined $insert{end};
    my $script = join("\n", @out) . "\n";
    die "$source: a LANGUAGE C function is left in the portable script\n" if $script =~ /^LANGUAGE C\b/m;
    return $script;
}

# The helpers the portable bodies share, one file per topic
# (portable/support-<topic>.sql), in the order each version's script
# creates them. Each row: the version whose script creates the piece,
# where ('after': right after the statement that creates idem.claim, where
# the key table, its sequence and the claim type exist and before the
# functions whose SQL bodies call a helper; 'end': at the script's end),
# and the file. A file with pieces of more than one version marks each
# with a line `-- portable: version X.Y` (the text above the first mark
# goes with the first piece); a file without a mark is one piece.
my @support_table = (
    # version  where    file
    ['1.1', 'after', 'support-keys.sql'],
    ['1.1', 'after', 'support-owners.sql'],          # stand-ins: every scope may be used
    ['1.1', 'end',   'support-request-hash.sql'],
    ['1.1', 'end',   'support-messages.sql'],
    ['1.1', 'end',   'support-maintenance.sql'],     # the relations maintenance works on
    ['1.2', 'end',   'support-maintenance.sql'],
    ['1.2', 'end',   'support-completers.sql'],
    ['1.2', 'end',   'support-owners.sql'],          # the check against idem.scope_owner
);

# Every support file's pieces: file => { version => text }, the version ''
# for a file without a mark.
my %pieces;
for my $path (glob('portable/support-*.sql')) {
    (my $name = $path) =~ s{\Aportable/}{};
    my @parts = split /^-- portable: version ([0-9.]+)[ \t]*\n/m, source($path);
    my %piece;
    if (@parts == 1) {
        %piece = ('' => $parts[0]);
    } else {
        my $head = shift @parts;
        while (my ($version, $text) = splice(@parts, 0, 2)) {
            die "$path: two pieces marked version $version\n" if exists $piece{$version};
            $piece{$version} = $head . $text;
            $head = '';
        }
    }
    s/\s*\z/\n/ for values %piece;
    $pieces{$name} = \%piece;
}
{
    my %listed;
    for my $row (@support_table) {
        my ($version, $where, $name) = @$row;
        die "portable/build.pl: the support table's `$where` is neither 'after' nor 'end'\n" unless $where =~ /\A(?:after|end)\z/;
        my $piece = $pieces{$name} or die "portable/build.pl: the support table names portable/$name, which is missing\n";
        die "portable/build.pl: the support table gives portable/$name, which has no `-- portable: version` mark, two rows\n"
            if exists $piece->{''} && $listed{$name}++;
        die "portable/$name: no piece marked `-- portable: version $version`\n"
            unless exists $piece->{''} || exists $piece->{$version};
        die "portable/build.pl: the support table places portable/$name 'after' in $version; only ${first}'s script has the anchor\n"
            if $where eq 'after' && $version ne $first;
        $listed{"$name $version"} = 1;
    }
    for my $name (sort keys %pieces) {
        for my $version (sort keys %{$pieces{$name}}) {
            die "portable/$name" . ($version eq '' ? '' : "'s piece for $version")
                . " is not in portable/build.pl's support table\n"
                unless $listed{$version eq '' ? $name : "$name $version"};
        }
    }
}

my @supports;    # [file, text] of the pieces the versions so far inserted
my %supported;   # the functions those pieces created

# A support piece may replace (CREATE OR REPLACE) a function an earlier
# piece created: a later version's schema gives it more to decide (1.1's
# stand-ins for what 1.2's tables decide), and the update scripts
# re-create the pieces in order, so the later one wins there too.
sub support {
    my ($name, $text) = @_;
    my $path = "portable/$name";
    for my $statement (statements_of($text)) {
        die "$path: a support file holds only functions and their grants, not `$statement`\n"
            unless $statement =~ /\A(?:CREATE (?:OR REPLACE )?FUNCTION|REVOKE|GRANT|COMMENT ON FUNCTION) /;
        if ($statement =~ /\ACREATE (OR REPLACE )?FUNCTION ([\w.]+)\(/) {
            my ($replace, $function) = ($1, $2);
            die "$path: CREATE OR REPLACE FUNCTION $function, which no earlier support piece created\n"
                if $replace && !$supported{$function};
            die "$path: CREATE FUNCTION $function, which an earlier support piece created (CREATE OR REPLACE it)\n"
                if !$replace && $supported{$function};
            $supported{$function} = 1;
        }
    }
    push @supports, [$name, $text];
    return "-- ==== portable engine: $name ====\n" . $text;
}

# What a version's script inserts: (after, end), each undef when nothing.
sub support_of {
    my ($version) = @_;
    my %at;
    for my $row (grep { $_->[0] eq $version } @support_table) {
        my (undef, $where, $name) = @$row;
        my $piece = $pieces{$name};
        push @{$at{$where}}, support($name, exists $piece->{''} ? $piece->{''} : $piece->{$version});
    }
    return map { $at{$_} ? join("\n", @{$at{$_}}) : undef } qw(after end);
}

# A support file's statements with their bodies and comments left out,
# to check what kinds of statement it has.
sub statements_of {
    my ($text) = @_;
    $text =~ s/\$(\w*)\$.*?\$\1\$//gs;
    $text =~ s/--[^\n]*//g;
    return grep { /\S/ } map { s/\A\s+|\s+\z//gr } split /;/, $text;
}

# What an update script starts with: the functions and support files of
# the versions before it, re-created with today's bodies.
sub refresh_block {
    my ($from) = @_;
    my $block = "-- ==== portable engine: ${from}'s functions with this release's bodies ====\n";
    for my $piece (@supports) {
        my ($name, $text) = @$piece;
        $text =~ s/^CREATE FUNCTION /CREATE OR REPLACE FUNCTION /mg;
        $block .= "-- ---- $name\n$text\n";
    }
    $block .= "-- ---- the bodies of the C++ engine's LANGUAGE C functions\n";
    $block .= "$refresh{$_}\n" for @refresh_order;
    if (@refresh_alters) {
        $block .= "-- ---- attributes the updates gave them after their CREATE\n";
        $block .= "$_->[1]\n" for @refresh_alters;
    }
    return $block . "-- ==== the update proper ====\n";
}

# The SQL-file install: no extension, so no configuration-dump marks (a
# plain pg_dump dumps the tables' rows anyway).
sub as_file {
    my ($script) = @_;
    $script =~ s/^SELECT pg_catalog\.pg_extension_config_dump\([^\n]*\);\n//mg;
    return $script;
}

sub generated_by {
    my ($what) = @_;
    return "-- idem's portable engine: $what\n"
         . "-- Generated by `make portable` (portable/build.pl) from the C++ engine's scripts\n"
         . "-- (sql/) and the portable bodies (portable/); edit those, not this file.\n";
}

my $base = 'sql/idem--1.1.sql';
-f $base or die "portable/build.pl: $base is missing (make builds it)\n";
my %script;      # version => pg_tle extension script
my %update;      # "from--to" => pg_tle update script
my ($after, $end) = support_of($first);
$script{$first} = portable_script($base, slurp($base),
    after => [qr/^CREATE TYPE idem\.claim AS \(/, $after // ''],
    defined $end ? (end => $end) : ());
my $newest = $first;
$collect_alters = 1;
for my $u (updates()) {
    my ($from, $to, $path) = @$u;
    my $refreshed = refresh_block($from);
    my (undef, $end) = support_of($to);     # only $first's script has the anchor of 'after'
    my $proper = portable_script($path, slurp($path), defined $end ? (end => $end) : ());
    $update{"$from--$to"} = $refreshed . $proper;
    $script{$to} = $script{$from} . "\n" . $proper;
    $newest = $to;
}
for my $row (@support_table) {
    die "portable/build.pl: the support table names version $row->[0], which neither sql/idem--$first.sql nor an update makes\n"
        unless exists $script{$row->[0]};
}

my $out = $check ? tempdir(CLEANUP => 1) : '.';
make_path("$out/build/portable", "$out/dist");
for my $v (sort keys %script) {
    spew("$out/build/portable/idem--$v.sql", $script{$v});
}
for my $u (sort keys %update) {
    spew("$out/build/portable/idem--$u.sql", $update{$u});
}

# pg_tle: registers what is missing, so the file can be run again (after a
# later release adds versions) without touching what is registered.
my $description = 'Stripe-style idempotency-key store (portable engine: SQL and PL/pgSQL)';
sub quoted {
    my ($text, $tag) = @_;
    die "portable/build.pl: \$$tag\$ occurs in a script\n" if index($text, "\$$tag\$") >= 0;
    return "\$$tag\$\n$text\$$tag\$";
}
my $tle = generated_by('registration with pg_tle (Trusted Language Extensions)')
    . "--\n-- Run by a role granted pgtle_admin, in the database that will use idem:\n"
    . "--   psql -v ON_ERROR_STOP=1 -f dist/idem-pgtle.sql\n"
    . "-- then CREATE EXTENSION idem; (and ALTER EXTENSION idem UPDATE after a newer file).\n"
    . "BEGIN;\n"
    . "SELECT pgtle.install_extension('idem', '$newest', '$description',\n"
    . quoted($script{$newest}, 'idem_script') . ",\n    NULL, 'idem')\n"
    . " WHERE NOT EXISTS (SELECT FROM pgtle.available_extensions() WHERE name = 'idem');\n";
for my $v (sort keys %script) {
    next if $v eq $newest;
    $tle .= "SELECT pgtle.install_extension_version_sql('idem', '$v',\n"
          . quoted($script{$v}, 'idem_script') . ")\n"
          . " WHERE NOT EXISTS (SELECT FROM pgtle.available_extension_versions()\n"
          . "                    WHERE name = 'idem' AND version = '$v');\n";
}
for my $u (sort keys %update) {
    my ($from, $to) = split /--/, $u;
    $tle .= "SELECT pgtle.install_update_path('idem', '$from', '$to',\n"
          . quoted($update{$u}, 'idem_script') . ")\n"
          . " WHERE NOT EXISTS (SELECT FROM pgtle.extension_update_paths('idem')\n"
          . "                    WHERE source = '$from' AND target = '$to' AND path IS NOT NULL);\n";
}
$tle .= "SELECT pgtle.set_default_version('idem', '$newest');\nCOMMIT;\n";
spew("$out/dist/idem-pgtle.sql", $tle);

# The SQL-file install: one transaction, the schema, every object, and the
# version it installed (idem.installed_version; upgrade files check it).
my $version_table = <<'SQL';
-- What this SQL-file install is at: one row, moved by each upgrade file.
CREATE TABLE idem.installed_version (
    version      text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE UNIQUE INDEX installed_version_one_row ON idem.installed_version ((true));
COMMENT ON TABLE idem.installed_version IS
    'The version of idem''s portable engine this SQL-file install is at (dist/idem-portable--X--Y.sql move it).';
REVOKE ALL ON TABLE idem.installed_version FROM PUBLIC;
GRANT SELECT ON TABLE idem.installed_version TO PUBLIC;
SQL
for my $v (sort keys %script) {
    my $file = generated_by("install of version $v as one SQL file, without CREATE EXTENSION")
        . "--\n-- Run by the database's owner (no superuser needed):\n"
        . "--   psql -v ON_ERROR_STOP=1 -f dist/idem-portable.sql\n"
        . "BEGIN;\nCREATE SCHEMA idem;\n"
        . as_file($script{$v}) . "\n" . $version_table
        . "INSERT INTO idem.installed_version (version) VALUES ('$v');\nCOMMIT;\n";
    spew("$out/build/portable/idem-portable--$v.sql", $file);
    spew("$out/dist/idem-portable.sql", $file) if $v eq $newest;
}
for my $u (sort keys %update) {
    my ($from, $to) = split /--/, $u;
    my $file = generated_by("upgrade of a SQL-file install from $from to $to")
        . "--\n-- Run by the database's owner:\n"
        . "--   psql -v ON_ERROR_STOP=1 -f dist/idem-portable--$u.sql\n"
        . "BEGIN;\n"
        . "DO \$\$\nBEGIN\n"
        . "    IF (SELECT version FROM idem.installed_version) IS DISTINCT FROM '$from' THEN\n"
        . "        RAISE EXCEPTION 'this file upgrades idem $from to $to, and this database has %',\n"
        . "            coalesce((SELECT version FROM idem.installed_version), 'no idem.installed_version')\n"
        . "            USING ERRCODE = '55000',\n"
        . "                  HINT = 'Run the upgrade files in order, from the version idem.installed_version names.';\n"
        . "    END IF;\nEND\n\$\$;\n"
        . as_file($update{$u})
        . "UPDATE idem.installed_version SET version = '$to', installed_at = pg_catalog.now();\nCOMMIT;\n";
    spew("$out/dist/idem-portable--$u.sql", $file);
}

if ($check) {
    my $diff = system('diff', '-r', '-q', "$out/dist", 'dist');
    if ($diff != 0) {
        print STDERR "dist/ is not what `make portable` writes from sql/, portable/ and @sqlstate_headers: run make portable and commit dist/\n";
        exit 1;
    }
    print "dist/ is current\n";
}
