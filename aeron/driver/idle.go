package driver

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// IdleStrategy is how an agent waits when a duty cycle did no work
// (Agrona IdleStrategy; aeron_idle_strategy.c). Idle(0) backs off,
// Idle(n>0) resets. Not safe for concurrent use: one per agent.
type IdleStrategy interface {
	Idle(workCount int)
	Reset()
}

// NewIdleStrategy builds the C driver's named strategies: "backoff"
// (spin, yield, then park from 1 µs doubling to 1 ms), "spin"/"busy_spin",
// "yield", "noop" and "sleep-ns" with an optional ",<ns>" ("sleep-ns,1000").
func NewIdleStrategy(name string) (IdleStrategy, error) {
	n, arg, _ := strings.Cut(name, ",")
	switch strings.ToLower(n) {
	case "backoff", "":
		return &backoffIdle{}, nil
	case "spin", "busy_spin":
		return spinIdle{}, nil
	case "yield":
		return yieldIdle{}, nil
	case "noop":
		return noopIdle{}, nil
	case "sleep-ns", "sleeping":
		d := time.Millisecond
		if arg != "" {
			v, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("idle strategy %q: sleep period %q is not a positive number of ns", name, arg)
			}
			d = time.Duration(v)
		}
		return sleepIdle(d), nil
	}
	return nil, fmt.Errorf("idle strategy %q: want backoff, spin, yield, noop or sleep-ns[,ns]", name)
}

// backoffIdle mirrors aeron_idle_strategy_backoff_idle with the C
// defaults: 10 spins, 20 yields, then parks from 1 µs up to 1 ms.
type backoffIdle struct {
	spins, yields int
	park          time.Duration
}

func (b *backoffIdle) Idle(work int) {
	if work > 0 {
		b.Reset()
		return
	}
	switch {
	case b.spins < 10:
		b.spins++
	case b.yields < 20:
		b.yields++
		runtime.Gosched()
	default:
		if b.park == 0 {
			b.park = time.Microsecond
		}
		time.Sleep(b.park)
		b.park = min(2*b.park, time.Millisecond)
	}
}

func (b *backoffIdle) Reset() { *b = backoffIdle{} }

type spinIdle struct{}

func (spinIdle) Idle(int) {}
func (spinIdle) Reset()   {}

type yieldIdle struct{}

func (yieldIdle) Idle(work int) {
	if work == 0 {
		runtime.Gosched()
	}
}
func (yieldIdle) Reset() {}

type noopIdle struct{}

func (noopIdle) Idle(int) {}
func (noopIdle) Reset()   {}

type sleepIdle time.Duration

func (s sleepIdle) Idle(work int) {
	if work == 0 {
		time.Sleep(time.Duration(s))
	}
}
func (sleepIdle) Reset() {}
