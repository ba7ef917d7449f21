#!/usr/bin/env perl
# The layering of src/ (docs/internals.md, "Source layout"): each folder has
# a rank, and a file may include idem's headers from its own folder or from
# a folder ranked below it, never above. An include names an idem header
# when src/ has that file; anything else (postgres.h, utils/guc.h,
# common/hashfn.h) is a Postgres or system header and is not judged here.
# Two rules of src/pg/ are checked with it: a Postgres header is included
# only after an idem header that brings in src/pg/pg.hpp (so postgres.h
# comes first and pg.hpp's poisoned names hold), and no PostgreSQL version
# test (#if ... PG_VERSION_NUM) stands outside src/pg/compat.hpp, which
# keeps every difference between majors.
#
#   scripts/check-includes.pl [--root DIR]
#
# Prints each climbing include as "file:line -> target", each file in a
# folder without a rank, each version test out of place, then a summary
# line; exits 1 when it printed any of them, 0 otherwise.
use strict;
use warnings;
use File::Basename qw(dirname);
use Getopt::Long;

# The ranks, bottom to top: the one place they are stated.
my @ranks = (
  'pure',      # C++ only: no Postgres header reaches it (pure/pure.hpp)
  'pg',        # the Postgres boundary: guard, SPI, kept statements, catalog cache, settings
  'base',      # helpers every subsystem uses: argument checks, counters
  'policy',    # scope policies and scope owners
  'waits',     # the wait table, the session registry, request durations
  'keys',      # claims, outcomes, the operator's key tools, key maintenance
  'messages',  # inbox and outbox
  'worker',    # the background worker, run_maintenance, the completers
  'module',    # _PG_init: settings, workers, shared memory and hooks wired together
);
my %rank;
@rank{@ranks} = (1 .. @ranks);

my $root = dirname(dirname(__FILE__));
GetOptions('root=s' => \$root) or die "usage: $0 [--root DIR]\n";
my $src = "$root/src";
-d $src or die "$0: no src/ under $root\n";

my @files = sort grep { -f } glob("$src/*/*.cpp $src/*/*.hpp $src/*.cpp $src/*.hpp $src/*/*/*.cpp $src/*/*/*.hpp");

# Whether an idem header (a path under src/) brings in pg/pg.hpp, itself or
# through the idem headers it includes.
my %reaches_pg;
sub reaches_pg {
  my ($header) = @_;
  return $reaches_pg{$header} if exists $reaches_pg{$header};
  $reaches_pg{$header} = $header eq 'pg/pg.hpp' ? 1 : 0;  # also ends a cycle
  return 1 if $reaches_pg{$header};
  open my $in, '<', "$src/$header" or return 0;
  while (<$in>) {
    next unless /^\s*#\s*include\s*"([^"]+)"/ && -f "$src/$1";
    if (reaches_pg($1)) { $reaches_pg{$header} = 1; last; }
  }
  close $in;
  return $reaches_pg{$header};
}
my ($includes, $problems) = (0, 0);
my %arrows;
for my $file (@files) {
  (my $name = $file) =~ s{^\Q$root\E/}{};
  my ($folder) = $name =~ m{^src/([^/]+)/[^/]+$};
  if (!defined $folder || !$rank{$folder}) {
    print "$name: in a folder without a rank (scripts/check-includes.pl lists them)\n";
    $problems++;
    next;
  }
  open my $in, '<', $file or die "$0: $file: $!\n";
  my $after_pg = $name eq 'src/pg/pg.hpp';
  while (my $line = <$in>) {
    my $at = $.;  # reaches_pg reads other files, which moves $.
    if ($line =~ /^\s*#\s*(?:if|elif)\b.*\bPG_VERSION_NUM\b/ && $name ne 'src/pg/compat.hpp') {
      print "$name:$at: a PostgreSQL version test outside src/pg/compat.hpp\n";
      $problems++;
    }
    next unless $line =~ /^\s*#\s*include\s*"([^"]+)"/;
    my $target = $1;
    if (!-f "$src/$target") {
      next if $after_pg;
      print "$name:$at -> $target: a Postgres header before any idem header that includes pg/pg.hpp\n";
      $problems++;
      next;
    }
    $after_pg ||= reaches_pg($target);
    $includes++;
    my ($to) = $target =~ m{^([^/]+)/[^/]+$};
    if (!defined $to || !$rank{$to}) {
      print "$name:$at -> $target: a folder without a rank\n";
      $problems++;
      next;
    }
    next if $to eq $folder;
    $arrows{"$folder -> $to"} = 1;
    if ($rank{$to} > $rank{$folder}) {
      print "$name:$at -> $target: climbs from $folder ($rank{$folder}) to $to ($rank{$to})\n";
      $problems++;
    }
  }
  close $in;
}
printf "includes: %d files, %d idem includes, %d folder arrows, %d problems (ranks: %s)\n",
  scalar @files, $includes, scalar keys %arrows, $problems, join(' < ', @ranks);
exit($problems ? 1 : 0);
