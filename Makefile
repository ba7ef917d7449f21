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

# `make prove_installcheck`: the Perl TAP files (PostgreSQL::Test::Cluster)
# against the installed server, each starting its own clusters.
PROVE_TESTS = $(wildcard test/t/*.pl)
PROVE_FLAGS = -I test/t

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Debian's PGXS also compiles C++ to LLVM bitcode with clang, which ignores
# PG_CXXFLAGS and would default to C++14.
BITCODE_CXXFLAGS += -std=c++17 -Wno-register

$(OBJS): $(wildcard src/*.hpp)

.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)

# The PGXN release zip, NAME-VERSION.zip from META.json (scripts/make_dist.sh).
.PHONY: dist
dist:
	scripts/make_dist.sh
