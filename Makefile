# idem: PGXS build of a C++17 extension.
EXTENSION = idem
MODULE_big = idem
OBJS = $(patsubst %.cpp,%.o,$(wildcard src/*.cpp))
DATA = $(wildcard sql/idem--*.sql)
DOCS = README.md
PG_CONFIG ?= pg_config

# -Wno-unused-parameter: PostgreSQL's own headers (ilist.h, bufpage.h) have unused
# parameters in static inline functions; everything else of -Wextra stays on.
PG_CXXFLAGS = -std=c++17 -Wno-register -Wall -Wextra -Wno-unused-parameter
SHLIB_LINK += -lstdc++ -lcrypto

# pg_regress: inputs in sql/ (beside the extension scripts), outputs in
# expected/, the classic PGXS layout. Isolation specs live in test/specs with
# their outputs in test/expected. Both run against a temporary instance that
# preloads idem (test/installcheck.conf), as pg_cron does, so
# `make installcheck` needs no running server; it must not run as root
# (initdb refuses).
REGRESS = $(filter-out idem--%,$(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --temp-config=test/installcheck.conf --temp-instance=tmp_check/regress
ISOLATION = $(basename $(notdir $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=output_iso \
	--temp-config=test/installcheck.conf --temp-instance=tmp_check/isolation
# pg_regress makes the temp instance's directory but not its parent.
REGRESS_PREP = tmp_check_dir

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Debian's PGXS also compiles C++ to LLVM bitcode with clang, which ignores
# PG_CXXFLAGS and would default to C++14.
BITCODE_CXXFLAGS += -std=c++17 -Wno-register

$(OBJS): $(wildcard src/*.hpp)

# `make prove_installcheck`: the Perl TAP files (PostgreSQL::Test::Cluster)
# against the installed server, each starting its own clusters (logs in
# tmp_check/log); like installcheck it must not run as root. The recipe is
# spelled out (as pgvector does) rather than PGXS's macro, which is a mere
# message when the server was configured without --enable-tap-tests (the
# assert build), names the log directory differently per major (TESTDIR in
# 15, TESTLOGDIR/TESTDATADIR from 16) and resets PROVE_FLAGS.
# PROVE_TESTS=test/t/x.pl runs some files; PROVE_FLAGS=-v shows every assertion.
PROVE_TESTS ?= $(wildcard test/t/*.pl)
ifeq ($(PROVE),)
PROVE = prove
endif

.PHONY: tmp_check_dir prove_installcheck
tmp_check_dir:
	$(MKDIR_P) tmp_check

prove_installcheck:
	rm -rf '$(CURDIR)'/tmp_check
	$(MKDIR_P) '$(CURDIR)'/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' TESTLOGDIR='$(CURDIR)/tmp_check/log' \
	  TESTDATADIR='$(CURDIR)/tmp_check' IDEM_TREE='$(CURDIR)' PATH="$(bindir):$$PATH" \
	  PGPORT='6$(DEF_PGPORT)' PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
	  $(PROVE) $(PG_PROVE_FLAGS) -I test/t $(PROVE_FLAGS) $(PROVE_TESTS)
