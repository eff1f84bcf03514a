# The two commands: `make run` (the quickstart) and `make test` (everything CI checks).
# Both install what a fresh Debian/Ubuntu machine lacks first.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: deps build run test fmt lint bench clean

deps:
	@./scripts/install-deps.sh

build: deps
	$(CARGO) build --workspace --release --bins

# The quickstart recipe: reno against cubic in the simulator over a loss sweep, then over UDP on
# loopback with the real agent; prints the path of the HTML report at the end.
run: build
	./target/release/ccp-exp run experiments/recipes/quickstart.yaml --out results/quickstart --fresh

test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	$(CARGO) build --workspace --release --bins
	$(CARGO) test --workspace --release

fmt:
	$(CARGO) fmt --all

bench: build
	$(CARGO) bench -p ccp-engine --bench engine
	$(CARGO) bench -p ccp-algorithms --bench controllers
	$(CARGO) bench -p ccp-tests --bench agent_rtt
	$(CARGO) bench -p ccp-bpf --bench loopback   # root only (BPF struct_ops); says so otherwise

clean:
	$(CARGO) clean
