# konglet: the two commands a newcomer needs are `make demo` and `make test`.
GO       ?= go
# Expanded once: the image's binary and its label must name the same tree, even if it changes mid-build.
ifeq ($(origin VERSION),undefined)
VERSION  := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
LDFLAGS  := -s -w -X main.version=$(VERSION)
BIN      := .bin
IMAGE    ?= konglet:$(VERSION)
OCI_TAR  := $(BIN)/konglet.oci.tar

.PHONY: demo build test fuzz bench conformance lint tools image image-oci clean

## demo: print the Kong configuration and statuses for deploy/examples (no cluster, no Kong)
demo:
	$(GO) run ./cmd/konglet translate -f deploy/examples

## build: the konglet binary in .bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/konglet ./cmd/konglet

## tools: a real kube-apiserver and etcd, built from Go modules (about 4 minutes the first time)
tools: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver:
	cd test/tools/kube-apiserver && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.37.2" -o $(CURDIR)/$@ .

$(BIN)/etcd:
	cd test/tools/etcd && $(GO) build -o $(CURDIR)/$@ .

$(BIN)/kube-controller-manager:
	cd test/tools/kube-controller-manager && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.37.2" -o $(CURDIR)/$@ .

## test: formatting, vet, every test with the race detector against a real API server, the real Kong chart
## rendered (test/chart: ../shared/charts/kong or $$KONG_CHART, skipped without it), the OCI image, then the
## upstream conformance suite in both Kong router flavors (binds 127.0.1.N:80/443: root or CAP_NET_BIND_SERVICE)
test: lint tools image-oci
	$(GO) test -race -count=1 -timeout 20m ./...
	cd test/chart && $(GO) test -race -count=1 -timeout 10m .
	cd test/tools/image && KONGLET_OCI=$(CURDIR)/$(OCI_TAR) $(GO) test -race -count=1 .
	$(MAKE) conformance

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/conformance && $(GO) vet .
	cd test/chart && $(GO) vet .
	cd test/tools/image && $(GO) vet .
	$(GO) vet -tags bench ./test/bench

## fuzz: run the translation fuzzer for a while (the checked-in corpus runs in `make test`)
fuzz:
	$(GO) test ./sync/translate -run '^$$' -fuzz FuzzTranslate -fuzztime 2m -fuzzminimizetime 10s

## bench: translation, propagation, burst, memory, cold start, status-write (1 and 3 replicas) and fleet (1 and 20
## replicas) figures against their targets (not part of `make test`, about 10 minutes); writes test/bench/results/RESULTS.md
bench: tools
	$(GO) test -tags bench -run '^TestBench$$' -count=1 -timeout 30m -v ./test/bench

## conformance: the upstream Gateway API conformance suite (GATEWAY-HTTP, -GRPC, -TLS, -TCP, -UDP) against konglet,
## once per Kong router flavor (KONGLET_CONFORMANCE_ROUTER), a minute or two each; binds :80 and :443 on 127.0.1.N
## (root or CAP_NET_BIND_SERVICE); reports per flavor in test/conformance/reports/
CONFORMANCE_ROUTERS ?= expressions traditional_compatible
conformance: tools $(BIN)/kube-controller-manager
	for router in $(CONFORMANCE_ROUTERS); do \
		(cd test/conformance && KONGLET_CONFORMANCE_ROUTER=$$router $(GO) test -count=1 -timeout 30m -run TestConformance .) || exit 1; \
	done

## image-oci: the container image without a Docker engine, as an OCI layout tarball ($(OCI_TAR)):
## a static konglet on an empty base, user 65532, entrypoint /konglet. Load or push it with
## `docker load -i`, `podman load -i` or `crane push $(OCI_TAR) REGISTRY/konglet:TAG`
image-oci:
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/image/konglet ./cmd/konglet
	cd test/tools/image && $(GO) run . -binary $(CURDIR)/$(BIN)/image/konglet -version $(VERSION) \
		-created $$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z) -o $(CURDIR)/$(OCI_TAR)

## image: the same image on distroless with the Dockerfile (needs a Docker engine)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

clean:
	rm -rf $(BIN) bin
