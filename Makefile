# Warren's front door. `make demo` runs the main job, `make test` runs every test suite.
CARGO ?= cargo
WARREN := target/release/warren

.PHONY: build test lint demo demo-local bench bench-allreduce bench-recordio clean

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

## demo: a 4-worker training job, undisturbed and then with a worker killed: same model
demo: demo-local

demo-local: build
	WARREN=$(WARREN) bash scripts/demo-local.sh

## bench: the allreduce comparison against XGBoost and Open MPI (installs the references)
bench: bench-allreduce

bench-allreduce: build
	bash bench/setup.sh
	WARREN=$(WARREN) bash bench/allreduce.sh

bench-recordio:
	bash bench/recordio_read.sh

clean:
	$(CARGO) clean

include jvm/jvm.mk
