# Release artefacts (docs/deploy.md). Included from the Makefile:
#     include mk/ship.mk
# Standalone: make -f Makefile -f mk/ship.mk dist
GO ?= go

VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The build date is the commit's time (or SOURCE_DATE_EPOCH), not the clock's,
# so building one commit twice gives byte-identical tarballs and image digests.
BUILD_DATE ?= $(shell if [ -n "$$SOURCE_DATE_EPOCH" ]; then date -u -d "@$$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ; \
	else TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ; fi)
SOURCE_URL ?= https://github.com/ibgo/ibgo
DIST       ?= dist
DIST_ARCHS ?= amd64 arm64
KERNEL     ?= 6.1
# The image's tag: the version with what a tag cannot hold replaced (deploy/ship Tag).
IMAGE_TAG   = $(shell printf '%s' '$(VERSION)' | tr -c 'A-Za-z0-9_.-' '-' | sed 's/^[.-]/v&/' | cut -c1-128)
# -s -w drop the symbol table and DWARF (panics still print file:line).
DIST_LDFLAGS = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)
SHIP = CGO_ENABLED=0 $(GO) run ./deploy/ship

.PHONY: dist dist-bin dist-docs image-oci test-image test-image-vm clean-dist

## dist: static ibgo for linux/{amd64,arm64} with version/commit/date embedded,
## tarballs with the perftest links, and $(DIST)/SHA256SUMS
dist: dist-bin dist-docs
	$(SHIP) dist -version $(VERSION) -date $(BUILD_DATE) -out $(DIST) \
		-extra share/man/man1/ibgo.1=$(DIST)/share/ibgo.1 \
		-extra share/bash-completion/completions/ibgo=$(DIST)/share/ibgo.bash \
		-extra share/zsh/site-functions/_ibgo=$(DIST)/share/_ibgo \
		-extra share/fish/vendor_completions.d/ibgo.fish=$(DIST)/share/ibgo.fish \
		$(foreach a,$(DIST_ARCHS),-bin linux/$(a)=$(DIST)/linux-$(a)/ibgo)

# The man page and completion scripts, from this machine's ibgo (they are
# the same for every architecture).
dist-docs:
	@mkdir -p $(DIST)/share
	CGO_ENABLED=0 $(GO) build -trimpath -o $(DIST)/share/ibgo-host ./cmd/ibgo
	$(DIST)/share/ibgo-host man > $(DIST)/share/ibgo.1
	$(DIST)/share/ibgo-host completion bash > $(DIST)/share/ibgo.bash
	$(DIST)/share/ibgo-host completion zsh > $(DIST)/share/_ibgo
	$(DIST)/share/ibgo-host completion fish > $(DIST)/share/ibgo.fish
	@rm -f $(DIST)/share/ibgo-host

dist-bin:
	@for a in $(DIST_ARCHS); do \
		echo "== ibgo $(VERSION) linux/$$a"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' \
			-o $(DIST)/linux-$$a/ibgo ./cmd/ibgo || exit 1; \
	done

## image-oci: multi-arch OCI image (from scratch, user 65532) as the layout
## $(DIST)/ibgo-oci and the archive $(DIST)/ibgo-$(VERSION)-oci.tar, no daemon
image-oci: dist-bin
	$(SHIP) image -version $(VERSION) -revision $(COMMIT) -source $(SOURCE_URL) -date $(BUILD_DATE) \
		-layout $(DIST)/ibgo-oci -archive $(DIST)/ibgo-$(VERSION)-oci.tar \
		$(foreach a,$(DIST_ARCHS),-bin linux/$(a)=$(DIST)/linux-$(a)/ibgo)

## test-image: build the image, then inspect it with skopeo and unpack it with
## umoci (Debian packages skopeo, umoci); REQUIRE_IMAGE_TOOLS=1 fails if missing
test-image: image-oci
	IBGO_OCI_LAYOUT=$(CURDIR)/$(DIST)/ibgo-oci IBGO_OCI_VERSION=$(VERSION) IBGO_OCI_REVISION=$(COMMIT) \
		REQUIRE_IMAGE_TOOLS=1 CGO_ENABLED=0 $(GO) test -count=1 -run 'TestImage' ./deploy/ship

## test-image-vm: unpack the amd64 image (skopeo + umoci) and run its ib_write_bw
## against Debian's C perftest in the soft-RoCE VM (heavy: takes the VM lock)
test-image-vm: image-oci
	rm -rf $(DIST)/vm && mkdir -p $(DIST)/vm
	skopeo copy --quiet --override-arch amd64 oci:$(DIST)/ibgo-oci:$(IMAGE_TAG) oci:$(DIST)/vm/amd64:$(IMAGE_TAG)
	umoci unpack --rootless --image $(DIST)/vm/amd64:$(IMAGE_TAG) $(DIST)/vm/bundle
	mv $(DIST)/vm/bundle/rootfs $(DIST)/vm/rootfs
	flock /tmp/ibgo-vm.lock $(GO) run ./hwtest/vm run -kernel $(KERNEL) -out $(DIST)/vm \
		-env IBGO_IMAGE_VERSION=$(VERSION) -script deploy/image-vm.sh

## clean-dist: remove everything make dist / image-oci wrote
clean-dist:
	rm -rf $(DIST)
