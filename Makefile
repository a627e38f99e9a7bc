# Warren's front door. `make demo` runs the main job, `make test` runs every test suite.
CARGO ?= cargo
WARREN := target/release/warren

.PHONY: build test lint demo demo-local bench bench-allreduce bench-recordio bench-master bench-spark clean

build:
	$(CARGO) build --release --workspace

## test: formatting, lints, every Rust test suite (unit, real sockets, real processes,
## the JNI mapping in an embedded JVM), then the JVM suites (plain and under -Xcheck:jni)
test: lint
	$(CARGO) test --workspace
	$(MAKE) jvm

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## demo: logistic regression on Spark (spark-submit, local-cluster[3,1,1024], 100k rows x 20
## features) with one executor JVM halted at iteration 8: prints the loss per iteration, the
## accuracy and MODEL_HASH, the same as without the failure (DEMO_ARGS= for a clean run).
## Installs Spark 4.3 (pyspark) once through scripts/setup-spark.sh.
JVM_JARS := jvm/warren-core/target/warren-core-0.1.0-SNAPSHOT.jar,jvm/warren-spark/target/warren-spark_2.13-0.1.0-SNAPSHOT.jar
DEMO_ARGS ?= --kill-executor 8
demo: jvm-native
	mvn -B -q -f jvm/pom.xml -Dwarren.native.dir=$(abspath target/release) -DskipTests package
	export SPARK_HOME="$$(scripts/setup-spark.sh | sed -n 's/^SPARK_HOME=//p')" SPARK_LOCAL_IP=127.0.0.1 && \
	"$$SPARK_HOME/bin/spark-submit" --master 'local-cluster[3,1,1024]' --conf spark.ui.enabled=false \
		--class io.warren.examples.LogisticRegression --jars $(JVM_JARS) \
		jvm/spark-examples/target/warren-spark-examples_2.13-0.1.0-SNAPSHOT.jar \
		--workers 3 --rows 100000 --features 20 --iters 20 $(DEMO_ARGS)

## demo-local: a 4-worker training job (no JVM), undisturbed and then with a worker killed
## by kill -9: the same model, bit for bit
demo-local: build
	WARREN=$(WARREN) bash scripts/demo-local.sh

## bench: the allreduce comparison against XGBoost and Open MPI (installs the references)
bench: bench-allreduce

bench-allreduce: build
	bash bench/setup.sh
	WARREN=$(WARREN) bash bench/allreduce.sh

## bench-master: the data master through its network service: file store, etcd store (a real
## etcd started on free ports and stopped) and the snapshot-on-every-change store, 1/8/32
## clients, 100,000 tasks; WARREN_REF=<other warren binary> adds its runs and the new/ref
## ratios (docs/benchmarks-master.md)
bench-master: build
	WARREN=$(WARREN) bash bench/master_service.sh

## bench-regression: allreduce of this tree against an earlier build of Warren in the same run
## (plain and robust mode, N = 2 and 4, 4 B to 64 MiB): REF=<commit> (default HEAD~1) is built
## into .bench-ref/; the table of new/ref ratios goes to docs/benchmarks.md
.PHONY: bench-regression
REF ?= HEAD~1
bench-regression: build
	REF=$(REF) DOCS=docs/benchmarks.md WARREN=$(WARREN) bash bench/regression.sh

bench-recordio:
	bash bench/recordio_read.sh

## bench-spark: the logistic-regression example vs Spark MLlib per iteration (1M rows x 100
## features, 4 executors), and a halted executor under retry-one and fail-all, in one
## spark-submit run on local-cluster; results in docs/benchmarks-spark.md (about 10 minutes)
bench-spark: jvm-native
	mvn -B -q -f jvm/pom.xml -Dwarren.native.dir=$(abspath target/release) -DskipTests package
	bash bench/spark.sh

clean:
	$(CARGO) clean

include jvm/jvm.mk
