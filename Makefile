# Warren's front door. `make demo` runs the main job, `make test` runs every test suite.
CARGO ?= cargo
WARREN := target/release/warren

.PHONY: build check test lint lint-quick docs demo demo-local e2e notebook setup-docs setup-demo setup-test setup-notebook bench bench-allreduce bench-recordio bench-master bench-spark bench-flink bench-flink-spark clean

## setup-*: what a fresh machine lacks (Debian packages, Spark 4.3, mdBook and the Python test
## tools in .venv), installed once by scripts/setup.sh; `make docs`, `make demo`, `make test`
## and .ci/run call it.
setup-docs setup-demo setup-test setup-notebook: setup-%:
	@bash scripts/setup.sh $*

build:
	$(CARGO) build --release --workspace

## test: formatting, lints, every Rust test suite (unit, real sockets, real processes,
## the JNI mapping in an embedded JVM), the JVM suites (warren-core's under -Xcheck:jni, its
## plain pass being `make check`'s), the
## array tests on JDK 25 (where G1 pins arrays region by region: jvm/jvm.mk), the Spark 3.5
## and Scala 2.12 build with its recovery suites (test-spark35), then the end-to-end tests in
## tests/ (standalone cluster, notebook, docker/, Maven artifacts)
## TEST_THREADS: tests run at once per Rust test binary. Most of them wait on real processes,
## sockets and timeouts rather than the CPU (the process suite of warren-cli keeps under half a
## core busy on two threads), so four take a third off its time on a two-core machine, and
## the release build of the JNI library and the Python extension (jvm-native, which `make jvm`
## needs next) and then clippy run beside them: cargo locks target/debug, target/release and
## target/clippy apart. Their output goes to target/beside-tests.log, shown if they fail.
## Each step prints the time it starts.
TEST_THREADS ?= 4
STEP = @echo "== $$(date -u +%T) $(1)"
test: setup-test lint-quick
	$(call STEP,cargo test: build)
	$(CARGO) test --workspace --no-run
	$(call STEP,cargo test: run; jvm-native and clippy beside it)
	@($(JVM_NATIVE_BUILD) && $(CLIPPY)) > target/beside-tests.log 2>&1 & beside=$$!; \
	$(CARGO) test --workspace -- --test-threads=$(TEST_THREADS); tests=$$?; \
	wait $$beside || { cat target/beside-tests.log; echo "jvm-native or clippy failed"; exit 1; }; exit $$tests
	$(call STEP,jvm)
	$(MAKE) jvm JVM_TEST_FLAGS=-Dwarren.checkJniOnly=true
	$(call STEP,jvm-pinning)
	$(MAKE) jvm-pinning
	$(call STEP,test-spark35)
	$(MAKE) test-spark35
	$(call STEP,e2e)
	$(MAKE) e2e
	$(call STEP,done)

## e2e: tests/ with pytest (needs the jars of `make jvm`): a real Spark standalone cluster
## (SIGKILLed executor and Worker, --deploy-mode cluster), a real Flink standalone cluster
## (a SIGKILLed TaskManager, about 80 s), the Scala notebook run headless,
## docker/ linted and validated, and spark-submit --packages from a fresh Maven repository
PYTEST_ARGS ?=
e2e: setup-test
	cd tests && ../.venv/bin/pytest $(PYTEST_ARGS)

## check: the fast tier for everyday work (a few minutes on a built tree): formatting, lints,
## the Rust unit and property tests (no processes, no sockets between processes), and the
## JVM API's own tests (warren-core and warren-runner, without the -Xcheck:jni repeat).
## TESTING.md says what each suite covers and how to run one test.
check: setup-test lint
	$(CARGO) test --workspace --lib --bins
	$(MAKE) jvm-native
	$(MVN) $(MVN_FLAGS) -f jvm/pom.xml -pl warren-core,warren-runner -DskipCheckJni \
		-Dwarren.native.dir=$(abspath target/release) verify

## lint: the docs book (`make docs`, about two seconds), the module graph of warren and
## warren-cli (scripts/module_cycles.py: no cycle outside scripts/module_cycles.known),
## formatting (lint-quick: these three) and clippy, in its own target directory
## (target/clippy), so that it can run while cargo test holds target/debug
CLIPPY = $(CARGO) clippy --workspace --all-targets --target-dir $(abspath target/clippy) -- -D warnings
lint: lint-quick
	$(CLIPPY)
lint-quick: docs
	python3 scripts/module_cycles.py
	$(CARGO) fmt --all --check

## docs: the book under docs/, rendered by mdBook into target/book (open
## target/book/index.html), then checked: every page in docs/SUMMARY.md exists and every page
## is listed, every relative link and #anchor of the book and the READMEs resolves, in the
## Markdown and in the rendered HTML (a link that leaves the book fails), docs/settings.md
## lists the keys of native/warren-base/src/config.rs (python3 scripts/settings_doc.py --write
## renders it again), the pages carry no dates, issue numbers or work rounds outside generated
## sections, and bench/results keeps one file per benchmark. mdBook comes from scripts/setup.sh docs; tests/test_readme.py runs the
## same checks.
MDBOOK ?= .venv/bin/mdbook
docs: setup-docs
	@rm -rf target/book
	$(MDBOOK) build --dest-dir $(abspath target/book) docs
	python3 scripts/check_docs.py --book target/book

## demo: logistic regression on Spark (spark-submit, local-cluster[3,1,1024], 100k rows x 20
## features) with one executor JVM halted at iteration 8, quietly (Spark's log goes to
## target/demo/spark.log): Warren's progress and recovery lines, the loss per iteration, the
## accuracy and MODEL_HASH, and whether it equals the failure-free model recorded in
## spark-examples/demo-model-hash.txt. DEMO_ARGS='--kill-task 8' throws in a task instead,
## DEMO_ARGS= runs without a failure. Installs what is missing first (scripts/setup.sh demo).
DEMO_ARGS ?= --kill-executor 8
MVN_PACKAGE := mvn -B -q -Dstyle.color=never -f jvm/pom.xml -Dwarren.native.dir=$(abspath target/release) -DskipTests \
	-Dmaven.javadoc.skip=true -Dmaven.source.skip=true package
demo: setup-demo
	@$(MAKE) --no-print-directory jvm-native
	@$(MVN_PACKAGE)
	@DEMO_ARGS="$(DEMO_ARGS)" bash scripts/demo-spark.sh

## notebook: JupyterLab with the Scala kernel over Spark's spark-shell (notebooks/), on
## 127.0.0.1; installs it first (scripts/setup.sh notebook)
notebook: setup-notebook
	$(MAKE) jvm-native
	$(MVN_PACKAGE)
	.venv/bin/jupyter lab --ip 127.0.0.1 --no-browser --notebook-dir notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

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

## bench-regression: this tree against an earlier build of Warren in the same run, allreduce
## (plain and robust mode, N = 2 and 4, 4 B to 64 MiB) and the sparse parameter-server model
## with bags (async and sync): REF=<commit> (default HEAD~1) is built
## into .bench-ref/; the table of new/ref ratios goes to docs/benchmarks.md
.PHONY: bench-regression
REF ?= HEAD~1
bench-regression: build
	REF=$(REF) DOCS=docs/benchmarks.md WARREN=$(WARREN) bash bench/regression.sh

## bench-ps: the parameter server (docs/benchmarks-ps.md): dense push + pull of a 64 MiB model
## against the loopback TCP stream, sync vs SSP(k) vs async with 4 trainers, a killed server
## with a 64 MiB shard (time to resume), and the sparse embedding model against TensorFlow's
## ParameterServerStrategy (tensorflow-cpu installed into .bench-venv if missing)
.PHONY: bench-ps
bench-ps: build
	REPEAT=1 WARREN=$(WARREN) bash bench/ps_dense.sh
	WARREN=$(WARREN) bash bench/ps_modes.sh
	WARREN=$(WARREN) bash bench/ps_recovery.sh
	WARREN=$(WARREN) bash bench/ps_sparse.sh

## bench-resize: elastic resize latency: Warren (warren run --min-workers/--max-workers)
## against torchrun --nnodes=1:5 (c10d rendezvous, gloo) in one run: a worker added (4 -> 5) and
## a worker lost (5 -> 4), 64 MiB model; torch from PyPI into bench/resize/.venv (docs/benchmarks.md)
.PHONY: bench-resize
bench-resize: build
	bash bench/resize/setup.sh
	bench/resize/.venv/bin/python bench/resize/resize.py --warren $(WARREN)

bench-recordio:
	bash bench/recordio_read.sh

## bench-spark: the logistic-regression example vs Spark MLlib per iteration (1M rows x 100
## features, 4 executors), and a halted executor under retry-one, fail-all and elastic
## (spark.warren.elastic=true), in one spark-submit run on local-cluster; results in
## docs/benchmarks-spark.md (about 12 minutes; BENCH_SPARK_ARGS=--recovery-only: the failures alone)
bench-spark: jvm-native
	$(MVN_PACKAGE)
	bash bench/spark.sh

## bench-flink: the Flink logistic-regression example on one MiniCluster (3 TaskManagers x 1
## slot): a killed subtask under retry-one vs a full restart under fail-all, each against the
## same mode without a failure, in one run (docs/benchmarks-flink.md; about 2 minutes).
## BENCH_FLINK_ARGS: [repeats] [LogisticRegression arguments]
BENCH_FLINK_ARGS ?= 5
bench-flink: jvm-native
	$(MVN_PACKAGE)
	WARREN_MAIN=FlinkBench jvm/flink-examples/bin/run-lr $(BENCH_FLINK_ARGS) | tee bench/results/flink.md

## bench-flink-spark: ms per iteration of the logistic-regression example on a standalone Flink
## cluster (flink run, a TaskManager JVM per worker) vs on Spark (spark-submit, local-cluster, an
## executor JVM per worker), same data and workers, runs alternated, in one run
## (docs/benchmarks-flink.md; about 10 minutes). BENCH_FLINK_SPARK_ARGS: [repeats] [example arguments]
BENCH_FLINK_SPARK_ARGS ?= 5
bench-flink-spark: jvm-native
	$(MVN_PACKAGE)
	BENCH_FLINK_SPARK_ARGS="$(BENCH_FLINK_SPARK_ARGS)" bash bench/flink-vs-spark.sh

clean:
	$(CARGO) clean

include jvm/jvm.mk
