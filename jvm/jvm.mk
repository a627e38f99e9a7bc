# JVM targets. The root Makefile includes this file (`include jvm/jvm.mk`); until then run
# `make -f jvm/jvm.mk <target>` from the repository root.
#
#   make jvm        cargo build --release -p warren-jni, then the Maven build with its tests
#                   (the suite runs twice: plainly and under -Xcheck:jni)
#   make test-jvm   the Rust-side JNI test (embedded JVM, -Xcheck:jni), then `make jvm`
#   make bench-jvm  JVM vs Rust allreduce at 16 MiB with 2 workers, and the JNI call overhead
#                   (docs/benchmarks-jvm.md); the tables also go to bench/results/jvm.md
#
# Maven works offline after the first build (`MVN_FLAGS='-B -q -o'`); plugin versions are pinned.

JVM_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
WARREN_ROOT := $(abspath $(JVM_MK_DIR)/..)
WARREN_NATIVE_DIR ?= $(WARREN_ROOT)/target/release
CARGO ?= cargo
MVN ?= mvn
MVN_FLAGS ?= -B -q
BENCH_JVM_ARGS ?= 5 30

.PHONY: jvm jvm-native test-jvm bench-jvm

jvm-native:
	cd $(WARREN_ROOT) && $(CARGO) build --release -p warren-jni

jvm: jvm-native
	$(MVN) $(MVN_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -Dwarren.native.dir=$(WARREN_NATIVE_DIR) verify

test-jvm:
	cd $(WARREN_ROOT) && $(CARGO) test -p warren-jni
	$(MAKE) -f $(WARREN_ROOT)/jvm/jvm.mk jvm

bench-jvm:
	cd $(WARREN_ROOT) && $(CARGO) build --release -p warren-jni -p warren-cli
	mkdir -p $(WARREN_ROOT)/bench/results
	$(MVN) $(MVN_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -pl warren-core -DskipTests \
		-Dwarren.native.dir=$(WARREN_NATIVE_DIR) test-compile exec:exec@bench \
		-Dbench.args="$(BENCH_JVM_ARGS)" | tee $(WARREN_ROOT)/bench/results/jvm.md
