# idem: PGXS build of a C++17 extension.
EXTENSION = idem
MODULE_big = idem
OBJS = $(patsubst %.cpp,%.o,$(wildcard src/*.cpp))
DATA = $(wildcard sql/idem--*.sql)
PG_CONFIG ?= pg_config

PG_CXXFLAGS = -std=c++17 -Wno-register -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
SHLIB_LINK += -lstdc++ -lcrypto

# pg_regress suites: inputs in test/sql, expected outputs in test/expected.
REGRESS = $(basename $(notdir $(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test --outputdir=build/regress
ISOLATION = $(basename $(notdir $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=build/isolation

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Debian's PGXS also compiles C++ to LLVM bitcode with clang, which ignores
# PG_CXXFLAGS and would default to C++14.
BITCODE_CXXFLAGS += -std=c++17 -Wno-register

$(OBJS): $(wildcard src/*.hpp)
