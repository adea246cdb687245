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

.PHONY: test api-check api fmt vet staticcheck allocs race compare-build modules pool go-work bench compare

# test runs every step and names every step that failed at the end: a
# failure in one must not hide the state of the others. The core's quick
# checks come first, one after the other; then the core's race tests, the
# comparison module and the nested modules run as one pool (see pool).
CHECKS := api-check fmt vet staticcheck allocs

test: $(GOBIN)/staticcheck
	@failed=""; for step in $(CHECKS); do \
		echo "== make $$step"; \
		$(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	$(MAKE) --no-print-directory pool || failed="$$failed $$(cat .make-failed-jobs 2>/dev/null || echo pool)"; \
	rm -f .make-failed-jobs; \
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

# go vet and staticcheck build what they check as the race tests do
# (-race; staticcheck through GOFLAGS, which the go command it asks for
# packages reads): from empty caches every package is then compiled once,
# not once for the checks and again for the tests. Only the allocation
# tests and the comparison module build without the race detector.
RACE_GOFLAGS := $(strip $(shell go env GOFLAGS) -race)

vet:
	go vet -race ./...

$(GOBIN)/staticcheck:
	go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(GOBIN)/staticcheck
	GOFLAGS="$(RACE_GOFLAGS)" $(GOBIN)/staticcheck ./...

# The allocation tests also run without the race detector, under which
# sync.Pool drops a share of what is put back (and the guard's pooled entries
# would be counted as allocations); under -race they are skipped. Only the
# packages that have some are built for it: ALLOC_PACKAGES lists them, in
# the module of the current directory.
ALLOC_PACKAGES = for d in $$(go list -f "{{.Dir}}" ./...); do grep -qs "^func Test[A-Za-z]*Allocat" "$$d"/*_test.go && echo "./$$(realpath --relative-to=. "$$d")"; done

# NORACE_RUN also picks the tests too slow under the race detector, which
# skip themselves there: the guard's million keys a second in its bound.
NORACE_RUN := Allocat|FitTheBound

allocs:
	@p=$$($(ALLOC_PACKAGES)); echo go test -count=1 -run "$(NORACE_RUN)" $$p; go test -count=1 -run "$(NORACE_RUN)" $$p

race:
	go test -race -count=1 ./...

# The comparison module has its own go.mod; building and testing it keeps it in
# step with the library's API, and its accuracy test checks our limiter's bound
# beside x/time/rate's and sentinel-golang's.
compare-build:
	cd benchmarks/compare && go vet ./... && go test -count=1 ./...

# Each nested module as the core: vet, staticcheck, the allocation tests
# without the race detector (in the packages that have some), then every
# test with it. The etcd rule source's tests start Debian's etcd
# (etcd-server).
modules: $(GOBIN)/staticcheck go-work
	@$(MAKE) --no-print-directory pool POOL="$(MODULES)"

# Each module must be in go.work.
go-work:
	@for m in $(MODULES) benchmarks/compare; do \
		grep -qx "	\./$$m" go.work || { echo "go.work lacks ./$$m: run go work use ./$$m"; exit 1; }; \
	done

# pool runs the jobs of POOL, JOBS at a time, the longest first: each a
# step of this Makefile (race, compare-build) or a nested module
# (MODULE_TEST). Their tests wait on servers they start (Redis, etcd, a
# browser) and on the clock as much as they compute, and from empty
# caches one compiles while another tests. A job's output is printed whole
# once it is done; the jobs that failed are named in .make-failed-jobs.
# The longest jobs, measured from empty caches: the core's race tests;
# then the modules whose tests start servers or whose dependencies take
# long to compile (chromedp, etcd's client, Envoy's API, gin), in that order.
JOBS ?= 3
SLOW_MODULES := cmd/slidegate dashboard/browsertest etcdrules redisflow envoyrls middleware/ginguard
POOL := race $(foreach m,$(SLOW_MODULES),$(filter $(m),$(MODULES))) compare-build $(filter-out $(SLOW_MODULES),$(MODULES))

pool: $(GOBIN)/staticcheck go-work
	@mkdir -p .make-logs; rm -f .make-failed-jobs; printf '%s\n' $(POOL) | xargs -P $(JOBS) -I{} sh -c '\
		log=".make-logs/$$(echo {} | tr / _).log"; \
		case {} in race|compare-build) $(MAKE) --no-print-directory {} ;; *) $(MODULE_TEST) ;; esac > "$$log" 2>&1; s=$$?; \
		printf "== %s\n%s\n" "{}" "$$(cat "$$log")"; rm -f "$$log"; \
		[ $$s -eq 0 ] || echo "{}" >> .make-failed-jobs; exit 0'
	@rmdir .make-logs 2>/dev/null || true
	@if [ -s .make-failed-jobs ]; then echo "== FAILED: $$(sort .make-failed-jobs | tr '\n' ' ')"; exit 1; fi

MODULE_TEST = (cd {} && go vet -race ./... && GOFLAGS="$(RACE_GOFLAGS)" $(GOBIN)/staticcheck ./... && \
	{ p=$$($(ALLOC_PACKAGES)); [ -z "$$p" ] || go test -count=1 -run "$(NORACE_RUN)" $$p; } && \
	go test -race -count=1 ./...)

# Benchmarks of the library, baselines included, six runs for benchstat.
bench:
	go test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt
	go run golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) bench.txt

# The side-by-side table against go-zero, sentinel-golang, hystrix-go,
# x/time/rate, uber-go/ratelimit, x/sync/semaphore and sony/gobreaker.
compare:
	cd benchmarks/compare && go run ./cmd/comparetable -count 3
