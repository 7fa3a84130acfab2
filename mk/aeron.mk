# Aeron interoperability and benchmark targets (docs/aeron.md, docs/perf.md).
#
#   make interop-aeron AERON_C_BIN=DIR   Aeron's C samples against ibgo driver
#                                        and ibgo's samples against aeronmd
#   make bench-aeron [AERON_C_BIN=DIR]   IPC throughput and ping-pong latency,
#                                        ibgo vs Aeron C, interleaved rounds
#   make bench-aeron BENCH_AERON_MEDIA=udp
#                                        the same over aeron:udp on loopback,
#                                        2 MiB socket buffers and window
#   make interop-aeron-java AERON_JAVA_CP=DIR
#                                        Aeron's Java samples and driver with
#                                        ibgo driver (docs/aeron.md)
#   make lifecycle-aeron AERON_C_BIN=DIR the lifecycle scenarios against ibgo's
#                                        driver and aeronmd side by side
#   make bench-ib-vm                     aeron:ib UD, aeron:udp and aeron:ib RC
#                                        side by side in the soft-RoCE guest,
#                                        ratios to aeron:udp (docs/perf.md)
#
# AERON_C_BIN is a directory with a build of Aeron's C driver and samples.
# Nothing of Aeron is part of this repository: build it yourself from Aeron's
# public source (github.com/aeron-io/aeron) with cmake, samples on (the
# default; e.g. cmake -DCMAKE_BUILD_TYPE=Release -DAERON_TESTS=OFF, then
# make aeronmd basic_publisher basic_subscriber streaming_publisher
# streaming_exclusive_publisher rate_subscriber cping cpong AeronStat
# ErrorStat), and point AERON_C_BIN at its binaries/ directory. Aeron 1.48 asks
# for CMake 3.30; Debian 12's 3.25 builds aeronmd once the minimum and policy
# version in your copy's top CMakeLists.txt say 3.25 (lifecycle-aeron needs
# only aeronmd).

AERON_C_BIN ?=
BENCH_AERON_ROUNDS ?= 3
BENCH_AERON_MESSAGES ?= 10000000
BENCH_AERON_MEDIA ?= ipc
BENCH_AERON_PRETOUCH ?= false

AERON_JAVA_CP ?=
JAVA ?= java

.PHONY: interop-aeron interop-aeron-java lifecycle-aeron bench-aeron bench-ib-vm bench-write-vm

define AERON_C_BIN_HELP
interop-aeron: FAIL: AERON_C_BIN is not set.
  It needs a directory of Aeron C binaries (aeronmd, basic_publisher, basic_subscriber,
  streaming_publisher, streaming_exclusive_publisher, rate_subscriber, cping, cpong,
  AeronStat, ErrorStat). Build them outside this repository from Aeron's public source
  (github.com/aeron-io/aeron) with cmake (Release, samples on, about 15 minutes), then run
    make interop-aeron AERON_C_BIN=/path/to/aeron/build/binaries
endef
export AERON_C_BIN_HELP

## interop-aeron: the interop matrix with Aeron's C driver and samples (needs AERON_C_BIN)
interop-aeron:
	@if [ -z "$(AERON_C_BIN)" ]; then echo "$$AERON_C_BIN_HELP" >&2; exit 2; fi
	@mkdir -p bin
	$(GO) build -o bin/ibgo ./cmd/ibgo
	hwtest/aeron-interop.sh bin/ibgo "$(AERON_C_BIN)"

## interop-aeron-java: Aeron's Java samples, AeronStat, ErrorStat and Java driver with ibgo driver (needs
## AERON_JAVA_CP: Agrona and Aeron's client, driver and samples, built outside this repository; docs/aeron.md)
interop-aeron-java:
	@if [ -z "$(AERON_JAVA_CP)" ]; then echo "interop-aeron-java: FAIL: AERON_JAVA_CP is not set: a class path holding Agrona and Aeron's Java client, driver and samples, built outside this repository (docs/aeron.md, make interop-aeron-java)" >&2; exit 2; fi
	@mkdir -p bin
	$(GO) build -o bin/ibgo ./cmd/ibgo
	JAVA="$(JAVA)" hwtest/aeron-java-interop.sh bin/ibgo "$(AERON_JAVA_CP)"

## lifecycle-aeron: the lifecycle scenarios (aeron/media/udp/lifecycle_test.go) against ibgo's driver and
## Aeron's C driver side by side (needs AERON_C_BIN: aeronmd or its directory)
lifecycle-aeron:
	@if [ -z "$(AERON_C_BIN)" ]; then echo "$$AERON_C_BIN_HELP" >&2; exit 2; fi
	AERON_C_BIN="$(AERON_C_BIN)" $(GO) test -count=1 -v -run 'TestLifecycle' ./aeron/media/udp/

## bench-aeron: IPC (or BENCH_AERON_MEDIA=udp) 256-byte throughput and ping-pong, ibgo vs Aeron C when AERON_C_BIN is set,
## Aeron's Java samples on both drivers when AERON_JAVA_CP is set; BENCH_AERON_PRETOUCH=true pre-touches every client's logs
bench-aeron:
	@mkdir -p bin
	$(GO) build -o bin/ibgo ./cmd/ibgo
	ROUNDS=$(BENCH_AERON_ROUNDS) MESSAGES=$(BENCH_AERON_MESSAGES) MEDIA=$(BENCH_AERON_MEDIA) PRETOUCH=$(BENCH_AERON_PRETOUCH) \
		JAVA_CP="$(AERON_JAVA_CP)" JAVA="$(JAVA)" hwtest/aeron-bench.sh bin/ibgo "$(AERON_C_BIN)"

## bench-write-vm: in the soft-RoCE VM, aeron:ib ib-mode=write vs ib-mode=send vs aeron:udp between two drivers:
## throughput, the receiving driver's and the guest's CPU per message, RTT; BENCH_ROUNDS=3 BENCH_MESSAGES=5000000
## BENCH_DRIVER_ENV='AERON_...' (default: SHARED threading, sleep-ns idle)
bench-write-vm:
	$(VM) run -kernel $(KERNEL) -env BENCH_ROUNDS=$(or $(BENCH_ROUNDS),3) $(if $(BENCH_MESSAGES),-env BENCH_MESSAGES=$(BENCH_MESSAGES)) \
		$(if $(BENCH_PINGS),-env BENCH_PINGS=$(BENCH_PINGS)) $(if $(BENCH_DRIVER_ENV),-env 'BENCH_DRIVER_ENV=$(BENCH_DRIVER_ENV)') \
		-script hwtest/vm/bench-write-vm.sh

## bench-ib-vm: in the soft-RoCE VM, 256-byte Aeron throughput and ping-pong over aeron:ib UD, aeron:udp and
## aeron:ib RC (same MTU and window, same run), ratios to aeron:udp; BENCH_ROUNDS=3 BENCH_MESSAGES=200000
## BENCH_PINGS=2000 BENCH_MTU=4096 BENCH_WINDOW=2m BENCH_IB_CHANNELS='NAME:MEDIA:|extra ...';
## BENCH_TOPO=two runs it across two guests (bench-ib-two.sh: node 2 subscribes and pongs, and reports its driver's CPU
## per message); BENCH_DRIVER_ENV='AERON_...' sets the drivers' settings
bench-ib-vm:
	$(VM) run -kernel $(KERNEL) $(if $(filter two,$(BENCH_TOPO)),-topo two) -env BENCH_ROUNDS=$(or $(BENCH_ROUNDS),3) $(if $(BENCH_MESSAGES),-env BENCH_MESSAGES=$(BENCH_MESSAGES)) \
		$(if $(BENCH_PINGS),-env BENCH_PINGS=$(BENCH_PINGS)) $(if $(BENCH_MTU),-env BENCH_MTU=$(BENCH_MTU)) \
		$(if $(BENCH_WINDOW),-env BENCH_WINDOW=$(BENCH_WINDOW)) $(if $(BENCH_IB_CHANNELS),-env 'BENCH_IB_CHANNELS=$(BENCH_IB_CHANNELS)') \
		$(if $(BENCH_DRIVER_ENV),-env 'BENCH_DRIVER_ENV=$(BENCH_DRIVER_ENV)') \
		-script hwtest/vm/$(if $(filter two,$(BENCH_TOPO)),bench-ib-two.sh,bench-ib-vm.sh)
