# authsvc: make build | run | test | cover | fuzz | e2e | bench | model
GO       ?= go
FUZZTIME ?= 20s
# package:target, each target beside the parser it guards
FUZZ_TARGETS = internal/tokens:FuzzParseCredentials internal/httpapi:FuzzDecodeLogin \
	internal/httpapi:FuzzUsernameParam internal/httpapi:FuzzAccessLine internal/users/usersfile:FuzzParseUsers \
	internal/users:FuzzNormalizeUsername internal/users:FuzzAppendInfoJSON \
	internal/password:FuzzParsePasswordHash internal/password:FuzzDecodeHashJob \
	internal/secret:FuzzParseKeyFile internal/mfa:FuzzCheck internal/mfa:FuzzNormalizeRecoveryCode

.PHONY: build run test cover fuzz clean bench e2e model

build:
	$(GO) build -buildvcs=auto -o authsvc .

run:
	$(GO) run . serve

test:
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...

# e2e: a page from another origin logs in through headless Chromium (CORS); needs /usr/bin/chromium.
e2e:
	AUTHSVC_REQUIRE_E2E=1 $(GO) test -tags e2e -run Browser -count=1 -v ./integration

# model: longer model-based walks of real fleets than make test's budget (integration/walk_test.go):
# SEEDS walks of STEPS steps per topology from seed SEED (a new one each run unless given);
# TOPOLOGY=single|file+redis|file+redis-5ms|postgres+redis|file+cluster runs one topology.
SEED     ?= $(shell date +%s)
SEEDS    ?= 3
STEPS    ?= 200
TOPOLOGY ?=
model:
	AUTHSVC_MODEL_SEED=$(SEED) AUTHSVC_MODEL_SEEDS=$(SEEDS) AUTHSVC_MODEL_STEPS=$(STEPS) AUTHSVC_MODEL_TOPOLOGY=$(TOPOLOGY) \
		AUTHSVC_MODEL_SHRINK=5m $(GO) test -count=1 -timeout 2h -run TestModelFleet -v ./integration

cover:
	$(GO) test -coverprofile=cover.out $$($(GO) list ./... | grep -v /bench/)  # the service; bench/ is tooling
	$(GO) tool cover -func=cover.out | tail -n 1

fuzz:
	@for pt in $(FUZZ_TARGETS); do \
		pkg=$${pt%%:*}; target=$${pt#*:}; \
		echo "== $$pkg $$target ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; \
	done

clean:
	rm -f authsvc cover.out

# bench: authsvc against a bare net/http baseline side by side, login against the raw hash rate,
# a 1M-user file and PostgreSQL with 100k users; every target of issue #14 in one table (about 6 min).
bench:
	GO=$(GO) bash bench/run.sh
