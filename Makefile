# make test   everything CI checks (starts Redis and Postgres, installs Chromium and promtool, if needed)
# make test-unit  every test that needs no service, in seconds: before each commit
# make run    the service against local Redis and Postgres (fake provider; needs SMSGW_SECRET)
# make dev    the service with no outside services
# make bench  limiter and HTTP benchmarks against their baselines
# make bench-http  wrk against the built binary and two baselines (installs wrk if missing)
# make bench-flood  wrk floods the built binary with refusals, shape by shape: audit MB/hour (WAL included), every answer counted
# make bench-pumping  the SMS pumping simulation: attacks next to real users, smsgw against three baselines
# make bench-regions  three regions with 70 ms between them: sends a second and latency, local and remote homes

GO        ?= go
# A count, not a time: a time-bounded fuzz run can fail with "context
# deadline exceeded" when its deadline lands mid-input on a busy machine.
FUZZTIME  ?= 8000x
BENCHTIME ?= 3s
export SMSGW_TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0
export SMSGW_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/smsgw_test?sslmode=disable
# make test starts what it needs, so a missing service is a failure, never a skip.
export CI ?= true

# Fuzz targets, as package:Target, or package:Target:count for a count of
# its own. Each runs for FUZZTIME (or its count) in make test.
# FuzzMatchesReferenceModel runs up to 400 steps on Redis per input: 2000x
# took 23 s once built at load 10 (8000x: 41 s at load 12).
FUZZ_TARGETS = ./otp:FuzzParsePhone ./otp:FuzzParsePhoneTrailing ./otp:FuzzCodeComparison ./api:FuzzDecodeSend ./api:FuzzDecodeVerify ./api:FuzzClientIP \
	./pumping:FuzzMatchesReferenceModel:2000x

# staticcheck at a pinned version, built into bin/ on first use.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = bin/staticcheck-$(STATICCHECK_VERSION)

.PHONY: test test-unit services tools vet staticcheck deploy-check fuzz run dev bench bench-http bench-flood bench-pumping bench-regions build
test: services tools vet staticcheck deploy-check
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) --no-print-directory fuzz

services:
	@bash .ci/services

# The packages whose tests need a service (Redis, Postgres, Chromium, the
# built binary), as a pattern of import paths under smsgw/. Every other
# package is in make test-unit, run with both services pointed at a closed
# port and CI=true: a test there that reaches for one fails, never skips, so
# a new package that needs a service must be named here.
SERVICE_PKGS = admission|api|audit|codestore|console|e2e|events|internal/app/apptest|internal/benchhttp|internal/luascript|internal/redisbatch|internal/redistopo|migrations|pumping|ratelimit|region|sender/twilio|verification
test-unit:
	@pkgs=$$($(GO) list ./... | grep -vxE 'smsgw/($(SERVICE_PKGS))') && \
	  SMSGW_TEST_REDIS_URL=redis://127.0.0.1:1/0 \
	  SMSGW_TEST_DATABASE_URL='postgres://nobody@127.0.0.1:1/none?sslmode=disable' CI=true \
	  $(GO) test -count=1 $$pkgs

# Chromium for the console's browser test, promtool for deploy/.
tools:
	@bash .ci/tools

# The alert rules parse and their unit tests pass.
deploy-check:
	promtool check rules deploy/alerts.yml
	cd deploy && promtool test rules alerts_test.yml

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

$(STATICCHECK):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin/.staticcheck $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/.staticcheck/staticcheck $@ && rmdir bin/.staticcheck

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; time=$(FUZZTIME); \
	  case $$name in *:*) time=$${name#*:}; name=$${name%%:*};; esac; \
	  echo "fuzz $$pkg $$name for $$time"; \
	  $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $$time $$pkg; \
	done

build:
	$(GO) build -o bin/smsgw ./cmd/smsgw

# make run texts nobody: the fake provider, named by RUN_CONFIG (its codes
# at GET /v1/fake/messages with the admin token). Point RUN_CONFIG at your
# own file to run with a real provider.
RUN_CONFIG ?= examples/fake-provider.toml
run: services
	$(GO) run ./cmd/smsgw -config $(RUN_CONFIG)

dev:
	$(GO) run ./cmd/smsgw -dev

# wrk as its own process against the built binary (shipped defaults, durable
# audit) and two baselines, interleaved rounds, medians (internal/benchhttp).
bench-http: services
	@command -v wrk >/dev/null || { apt-get update && apt-get install -y wrk; }
	$(GO) test -run '^$$' -bench BenchmarkWrk -benchtime 1x -timeout 60m -v ./internal/benchhttp | grep -v '^=== '

# The audit store's growth under three flood shapes, one replica, shipped
# defaults (internal/benchhttp, BenchmarkFlood).
bench-flood: services
	@command -v wrk >/dev/null || { apt-get update && apt-get install -y wrk; }
	$(GO) test -run '^$$' -bench BenchmarkFlood -benchtime 1x -timeout 30m -v ./internal/benchhttp | grep -v '^=== '

bench: services
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./ratelimit
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/redisbatch
	$(GO) test -run '^$$' -bench . -benchtime 1x -v ./api | grep -v '^=== '

# SIM_SCALE scales the real traffic (1 = 0.6 users/s, about 52,000 a day).
SIM_SCALE ?= 0.3
bench-pumping: services
	SMSGW_SIM_SCALE=$(SIM_SCALE) $(GO) test -run '^$$' -bench BenchmarkPumpingSimulation -benchtime 1x -timeout 60m ./pumping

# Three regions on this machine (two Redis of their own and a Cluster, three
# databases, three processes, 70 ms proxies between them) next to one
# single-region process: sends a second, p50/p99 and cross-region requests
# per send, for numbers homed locally and elsewhere (internal/benchhttp/regions_test.go).
bench-regions: services
	$(GO) test -run '^$$' -bench BenchmarkRegions -benchtime 1x -timeout 30m -v ./internal/benchhttp | grep -v '^=== '
