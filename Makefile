# ibgo: see README.md. Every build and test runs with CGO_ENABLED=0.
GO      ?= go
KERNEL  ?= 6.1
# Kernels the VM tier runs on in `make test`.
KERNELS ?= 6.1 6.12
FUZZTIME ?= 60s
VM       = $(GO) run ./hwtest/vm

export CGO_ENABLED = 0

.PHONY: hwtest-bin all build test test-unit test-race boundary archdoc test-vm test-vm-one chaos-vm soak-vm demo bench-vm count-vm kcount-vm levels-vm threads-vm sysmon-vm tbcount-vm lint cross fuzz image clean

all: build

## build: compile everything and put the static ibgo binary in bin/
build:
	$(GO) build ./...
	$(GO) build -trimpath -o bin/ibgo ./cmd/ibgo

## test: unit tests, the unit tier again under the race detector, then the VM tier
## (soft-RoCE in qemu) on each of $(KERNELS)
test: test-unit test-race test-vm test-image test-image-vm

## test-unit: every package's tests on this machine (VM-tier tests skip and say why);
## includes the architecture check (internal/archtest, see `make boundary`)
test-unit:
	$(GO) test -count=1 ./...

## test-race: the unit tier under the race detector. The race detector needs cgo:
## this is the one place cgo is enabled (gcc; .ci/run installs it).
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

## boundary: only the architecture check: the layer rules, the kernel boundary and
## docs/architecture.md's generated tables (internal/archtest/rules.go)
boundary:
	$(GO) test -count=1 -run 'TestBoundary|TestArchitectureDoc' ./internal/archtest

## archdoc: regenerate docs/architecture.md's rule tables and import graph from the tree
archdoc:
	$(GO) test -count=1 -run TestArchitectureDoc ./internal/archtest -update

## test-vm: the VM tier; REQUIRE_VM=1 turns any VM-tier skip into a failure.
## One guest on each of $(KERNELS), then two guests (two-node tests) on $(KERNEL). The chaos
## suite's one-guest faults (hwtest/chaos, `make chaos-vm`) run on $(KERNEL) only, to keep
## make test inside CI's time.
test-vm:
	@for k in $(KERNELS); do \
		echo "== VM tier, kernel $$k, one guest"; \
		REQUIRE_VM=1 $(VM) test -kernel $$k $$( [ "$$k" = "$(KERNEL)" ] || echo "-skip TestChaosOneGuest" ) || exit 1; \
	done
	@echo "== VM tier, kernel $(KERNEL), two guests"
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) -topo two

## test-vm-one: the VM tier on one kernel only: make test-vm-one KERNEL=6.12 [RUN=regex] [PKG=./uverbs]
test-vm-one:
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) $(if $(RUN),-run '$(RUN)') $(PKG)

## chaos-vm: the fault-injection suite (issue 33, docs/reliability.md): every fault of one guest and of two
## guests on aeron:udp, aeron:ib UD and RC, a row each ("chaos|" lines), then the verbs destroy-under-load
## test under the race detector. make test runs the same tests without -race.
chaos-vm:
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) -run 'TestChaosOneGuest' ./hwtest/chaos
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) -topo two -run 'TestChaosTwoGuests' ./hwtest/chaos
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) -race -run 'TestVerbsDestroyUnderLoad' ./hwtest/chaos

## soak-vm: publications and subscriptions of every medium coming and going for DURATION (30m), the
## drivers' RSS, threads, fds, goroutines and the kernel's RDMA objects sampled every INTERVAL (1m)
## ("soak|" lines); fails if any grows after the first interval (docs/reliability.md)
soak-vm:
	REQUIRE_VM=1 $(VM) test -kernel $(KERNEL) -timeout 4h -test.timeout 4h -env IBGO_SOAK_DURATION=$(or $(DURATION),30m) -env IBGO_SOAK_INTERVAL=$(or $(INTERVAL),1m) -run 'TestSoak' ./hwtest/chaos

## demo: boot the soft-RoCE VM and run ibgo against it beside Debian's C tools
demo:
	$(VM) run -kernel $(KERNEL) -script hwtest/vm/demo.sh

## bench-vm: Debian's perftest against itself and ibgo perf against itself in the VM, side by side
## (BENCH_BEFORE=<dir with an ibgo-before binary> adds that build to the rotation; BENCH_ROUNDS=5;
## BENCH_ONLY=<regex of case names>; BENCH_MIX=1 adds C-server/ibgo-client and ibgo-server/C-client pairs)
bench-vm:
	$(VM) run -kernel $(KERNEL) $(if $(BENCH_BEFORE),-out $(BENCH_BEFORE)) -env BENCH_ROUNDS=$(or $(BENCH_ROUNDS),5) $(if $(BENCH_ONLY),-env 'BENCH_ONLY=$(BENCH_ONLY)') $(if $(BENCH_MIX),-env BENCH_MIX=$(BENCH_MIX)) -script hwtest/vm/bench-vm.sh

## count-vm: count, per message, what Debian's perftest and ibgo perf do for one test in the VM: read/write
## calls (the rxe doorbell is a write), context switches per process and thread, faults, rxe counters, IPIs
## and softirqs (COUNT_TEST=send_bw COUNT_ARGS='-c UD -s 1024 -n 20000' COUNT_IMPLS='c go c go')
count-vm:
	$(VM) run -kernel $(KERNEL) $(if $(COUNT_TEST),-env 'COUNT_TEST=$(COUNT_TEST)') $(if $(COUNT_ARGS),-env 'COUNT_ARGS=$(COUNT_ARGS)') $(if $(COUNT_IMPLS),-env 'COUNT_IMPLS=$(COUNT_IMPLS)') -script hwtest/vm/count-vm.sh

## kcount-vm: count the calls of every rdma_rxe function (kprobes) while Debian's perftest pair and then ibgo's
## run one test in the VM: does ibgo ask the kernel for other work? (issue 16; KCOUNT_TEST=send_bw
## KCOUNT_ARGS='-c UD -s 1024 -n 20000')
kcount-vm:
	$(VM) run -kernel $(KERNEL) $(if $(KCOUNT_TEST),-env 'KCOUNT_TEST=$(KCOUNT_TEST)') $(if $(KCOUNT_ARGS),-env 'KCOUNT_ARGS=$(KCOUNT_ARGS)') -script hwtest/vm/kcount-vm.sh

## levels-vm: Debian's send_lat pair and ibgo's in turn with -U, pinned; prints the median of every
## 1000 iterations of each run, then per implementation the windows per usec, the median inside each band,
## the median of the per-round ratios to C and the drift within runs (issue 9; LEVELS_ROUNDS=8
## LEVELS_ARGS='-s 2 -n 10000' LEVELS_BANDS='13.8-15.8 17.3-20.5' LEVELS_IMPLS='c go' (cs, gs: mixed pairs;
## gnp: GODEBUG=asyncpreemptoff=1; go0: LEVELS_BEFORE=<an earlier static ibgo>))
levels-vm:
	@d=$$(mktemp -d) && $(if $(LEVELS_BEFORE),cp $(LEVELS_BEFORE) $$d/ibgo-before &&) \
	$(VM) run -kernel $(KERNEL) -out $$d $(if $(VM_KARGS),-kargs '$(VM_KARGS)') -env ROUNDS=$(or $(LEVELS_ROUNDS),8) $(if $(LEVELS_ARGS),-env 'LEVELS_ARGS=$(LEVELS_ARGS)') $(if $(LEVELS_BANDS),-env 'BANDS=$(LEVELS_BANDS)') $(if $(LEVELS_IMPLS),-env 'IMPLS=$(LEVELS_IMPLS)') -script hwtest/vm/levels-vm.sh; \
	rc=$$?; rm -rf $$d; exit $$rc

## threads-vm: Debian's send_bw UD pair and ibgo's, pinned; for one second of each run, every thread's run time,
## wait for its vCPU and schedulings, the kernel threads on the same vCPUs included (issues 9 and 16;
## THREADS_ROUNDS=2 THREADS_TEST=send_bw THREADS_ARGS='-c UD -s 1024 -D 5' THREADS_IMPLS='c go' (cs, gs: mixed
## pairs); VM_KARGS=... adds guest kernel arguments)
threads-vm:
	$(VM) run -kernel $(KERNEL) $(if $(VM_KARGS),-kargs '$(VM_KARGS)') -env ROUNDS=$(or $(THREADS_ROUNDS),2) $(if $(THREADS_TEST),-env 'THREADS_TEST=$(THREADS_TEST)') $(if $(THREADS_ARGS),-env 'THREADS_ARGS=$(THREADS_ARGS)') $(if $(THREADS_IMPLS),-env 'IMPLS=$(THREADS_IMPLS)') -script hwtest/vm/threads-vm.sh

## sysmon-vm: Debian's send_bw UD pair with and without a 10 ms waker thread preloaded (the rate of the Go
## runtime's sysmon), beside ibgo's pair, pinned, interleaved (issue 16; needs gcc on the host for the waker;
## SYSMON_ROUNDS=30 SYSMON_PIN=1 SYSMON_TEST=send_bw, or a *_lat test such as send_lat; SYSMON_BEFORE=<an
## earlier static ibgo> adds it to every round as go0, an A/B of two builds; SYSMON_IMPLS='c cw go' picks the
## pairs: cs a C server with an ibgo client, gs the reverse, cws/cwc the waker in one C side only, go0;
## SYSMON_ARGS replaces the test's flags, e.g. '-c UD -s 1024 -n 50000'; VM_KARGS adds kernel arguments)
sysmon-vm:
	@d=$$(mktemp -d) && gcc -O2 -shared -fPIC -o $$d/waker.so hwtest/experiments/waker.c -lpthread && \
	$(if $(SYSMON_BEFORE),cp $(SYSMON_BEFORE) $$d/ibgo-before &&) \
	$(VM) run -kernel $(KERNEL) -out $$d $(if $(VM_KARGS),-kargs '$(VM_KARGS)') -env ROUNDS=$(or $(SYSMON_ROUNDS),30) -env PIN=$(or $(SYSMON_PIN),1) -env TEST=$(or $(SYSMON_TEST),send_bw) $(if $(SYSMON_IMPLS),-env 'IMPLS=$(SYSMON_IMPLS)') $(if $(SYSMON_ARGS),-env 'SYSMON_ARGS=$(SYSMON_ARGS)') -script hwtest/vm/sysmon-vm.sh; \
	rc=$$?; rm -rf $$d; exit $$rc

## tbcount-vm: count every translated block the guest runs (a qemu TCG plugin, hwtest/experiments/tbcount.c)
## over a window of Debian's send_lat pair and of ibgo's, pinned, and print per round trip the instructions each
## executes in user space and in the kernel (issue 9; needs gcc on the host and a qemu that takes plugin API
## version 1, as Debian 12's 7.2 does; TB_ROUNDS=2 TB_TEST=send_lat TB_ARGS='-s 2 -n 100000'; TB_FLAGS='-lines -top 60'
## passes flags to the analysis, here ibgo's counts by source line)
tbcount-vm:
	@d=$$(mktemp -d) && gcc -O2 -Wall -shared -fPIC -fvisibility=hidden -o $$d/tbcount.so hwtest/experiments/tbcount.c -lpthread && \
	$(VM) run -kernel $(KERNEL) -out $$d -plugin "$$d/tbcount.so,ctl=$$d/tbcmd,dir=$$d" -env ROUNDS=$(or $(TB_ROUNDS),2) -env TEST=$(or $(TB_TEST),send_lat) $(if $(TB_ARGS),-env 'TB_ARGS=$(TB_ARGS)') -script hwtest/vm/tbcount-vm.sh && \
	$(GO) run ./hwtest/vm/tbcount $(TB_FLAGS) $$d; \
	rc=$$?; rm -rf $$d; exit $$rc

## image: build (or show the cached) guest image
image:
	$(VM) image -kernel $(KERNEL)

## hwtest-bin: static test binaries for a ConnectX host (docs/hardware.md), amd64 and arm64
hwtest-bin:
	@for arch in amd64 arm64; do \
		mkdir -p bin/hwtest/$$arch; \
		for pkg in hwtest uverbs mlx5 perftest; do \
			GOOS=linux GOARCH=$$arch $(GO) test -c -trimpath -o bin/hwtest/$$arch/$$pkg.test ./$$pkg || exit 1; \
		done; \
		GOOS=linux GOARCH=$$arch $(GO) build -trimpath -o bin/hwtest/$$arch/ibgo ./cmd/ibgo || exit 1; \
		echo "bin/hwtest/$$arch: $$(ls bin/hwtest/$$arch | tr '\n' ' ')"; \
	done

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## cross: build and vet (which compiles the tests) for linux/arm64 and darwin/arm64
## (on macOS the verbs packages must build and fail only at run time, so that
## programs using the aeron packages build there)
cross:
	GOOS=linux GOARCH=arm64 $(GO) build ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...

## fuzz: run every Fuzz target for $(FUZZTIME) each, one at a time
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s $$pkg || exit 1; \
		done; \
	done

clean: clean-dist
	rm -rf bin

# Release artefacts: make dist, make image-oci, make test-image (docs/deploy.md).
include mk/ship.mk
include mk/aeron.mk
