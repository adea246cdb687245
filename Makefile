# The test target is what CI runs (see .ci/run and README.md).

STATICCHECK_VERSION := v0.8.2
BENCHSTAT_VERSION   := v0.0.0-20260908200009-22c9c6c9d4da
GOBIN               := $(shell go env GOPATH)/bin

# Every module is built and tested alone, from its own go.mod and go.sum, as
# its users build it: go.work, which ties the modules together, is for
# development (go run ./cmd/slidegate from the root), and would let a module
# lean on another's requirements.
export GOWORK := off

# The modules nested in the repository, each with a go.mod of its own: the
# integrations whose dependencies the core does not carry (etcd, the
# routers, OpenTelemetry). The comparison module is tested apart.
MODULES := $(filter-out benchmarks/compare,$(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path '*/testdata/*' | sort)))

.PHONY: test api-check api fmt vet staticcheck allocs race compare-build modules bench compare

# test runs every step, the core's first, whatever fails before it, and
# names every step that failed at the end: a failure in one module must not
# hide the state of the others.
STEPS := api-check fmt vet staticcheck allocs race compare-build modules

test:
	@failed=""; for step in $(STEPS); do \
		echo "== make $$step"; \
		$(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	if [ -n "$$failed" ]; then echo "== make test: FAILED:$$failed"; exit 1; fi; \
	echo "== make test: every step passed"

# The exported API of every module is recorded in api/, a file per module;
# api-check fails, naming each line, when the code and the record differ,
# so that every change to the API is seen in review. make api writes the
# record anew.
api-check:
	go run ./internal/apicheck

api:
	go run ./internal/apicheck -w

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

$(GOBIN)/staticcheck:
	go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(GOBIN)/staticcheck
	$(GOBIN)/staticcheck ./...

# The allocation tests also run without the race detector, under which
# sync.Pool drops a share of what is put back (and the guard's pooled entries
# would be counted as allocations); under -race they are skipped.
allocs:
	go test -count=1 -run 'Allocat' ./...

race:
	go test -race -count=1 ./...

# The comparison module has its own go.mod; building and testing it keeps it in
# step with the library's API, and its accuracy test checks our limiter's bound
# beside x/time/rate's and sentinel-golang's.
compare-build:
	cd benchmarks/compare && go vet ./... && go test -count=1 ./...

# Each nested module as the core: vet, staticcheck, the allocation tests
# without the race detector (in the modules that have some), then every
# test with it; and each must be in go.work. The etcd rule source's tests start Debian's etcd (etcd-server).
modules: $(GOBIN)/staticcheck
	@set -e; for m in $(MODULES) benchmarks/compare; do \
		grep -qx "	\./$$m" go.work || { echo "go.work lacks ./$$m: run go work use ./$$m"; exit 1; }; \
	done
	@rm -f .make-failed-modules; printf '%s\n' $(MODULES) | xargs -P $(JOBS) -I{} sh -c '( $(MODULE_TEST) ) > "{}/.make-test.log" 2>&1; s=$$?; \
		out=$$(cat "{}/.make-test.log"); rm -f "{}/.make-test.log"; printf "== %s\n%s\n" "{}" "$$out"; \
		[ $$s -eq 0 ] || echo "{}" >> .make-failed-modules; exit 0'
	@if [ -s .make-failed-modules ]; then echo "== modules FAILED: $$(sort .make-failed-modules | tr '\n' ' ')"; rm -f .make-failed-modules; exit 1; fi

# The modules are tested JOBS at a time: their tests wait on servers they
# start (Redis, etcd, a browser) as much as they compute. A module's output
# is printed whole once it is done.
JOBS ?= 2
MODULE_TEST = cd {} && go vet ./... && $(GOBIN)/staticcheck ./... && \
	{ ! grep -rqs --include=*_test.go "^func Test[A-Za-z]*Allocat" . || go test -count=1 -run Allocat ./...; } && \
	go test -race -count=1 ./...

# Benchmarks of the library, baselines included, six runs for benchstat.
bench:
	go test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt
	go run golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) bench.txt

# The side-by-side table against go-zero, sentinel-golang, hystrix-go,
# x/time/rate, uber-go/ratelimit, x/sync/semaphore and sony/gobreaker.
compare:
	cd benchmarks/compare && go run ./cmd/comparetable -count 3
