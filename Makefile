# authsvc: make build | run | test | cover | fuzz | e2e | bench
GO       ?= go
FUZZTIME ?= 20s
# package:target, each target beside the parser it guards
FUZZ_TARGETS = internal/tokens:FuzzParseCredentials internal/httpapi:FuzzDecodeLogin \
	internal/httpapi:FuzzUsernameParam internal/httpapi:FuzzAccessLine internal/users:FuzzParseUsers \
	internal/users:FuzzNormalizeUsername internal/users:FuzzAppendInfoJSON \
	internal/password:FuzzParsePasswordHash internal/password:FuzzDecodeHashJob \
	internal/secret:FuzzParseKeyFile internal/mfa:FuzzCheck internal/mfa:FuzzNormalizeRecoveryCode

.PHONY: build run test cover fuzz clean bench e2e

build:
	$(GO) build -buildvcs=auto -o authsvc .

run:
	$(GO) run . serve

test:
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...

# e2e: a page from another origin logs in through headless Chromium (CORS); needs /usr/bin/chromium.
e2e:
	AUTHSVC_REQUIRE_E2E=1 $(GO) test -tags e2e -run Browser -count=1 -v .

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
