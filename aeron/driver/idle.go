package driver

import (
	"errors"
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
func NewIdleStrategy(name string) (IdleStrategy, error) { return NewIdleStrategyArgs(name, "") }

// NewIdleStrategyArgs is NewIdleStrategy with the strategy's parameters as
// the C driver's AERON_*_IDLE_STRATEGY_INIT_ARGS give them
// (aeron_agent.c): for sleep-ns the period, a number of ns or a duration
// with a unit ("10us"); for backoff "spins-yields-minpark-maxpark"
// ("10-20-1us-1ms", parks as durations); the others take none and ignore
// them, as C does. Empty args keep the defaults (or sleep-ns's ",ns").
func NewIdleStrategyArgs(name, args string) (IdleStrategy, error) {
	n, arg, _ := strings.Cut(name, ",")
	if args != "" {
		arg = args
	}
	switch strings.ToLower(n) {
	case "backoff", "":
		b := &backoffIdle{maxSpins: 10, maxYields: 20, minPark: time.Microsecond, maxPark: time.Millisecond}
		if arg != "" {
			f := strings.Split(arg, "-")
			if len(f) != 4 {
				return nil, fmt.Errorf("idle strategy %q: init args %q: want spins-yields-minpark-maxpark, e.g. 10-20-1us-1ms", name, arg)
			}
			spins, err1 := strconv.ParseUint(f[0], 10, 32)
			yields, err2 := strconv.ParseUint(f[1], 10, 32)
			minPark, err3 := parseIdleDuration(f[2])
			maxPark, err4 := parseIdleDuration(f[3])
			if err := errors.Join(err1, err2, err3, err4); err != nil || minPark <= 0 || maxPark < minPark {
				return nil, fmt.Errorf("idle strategy %q: init args %q: want spins-yields-minpark-maxpark with 0 < minpark <= maxpark: %v", name, arg, err)
			}
			b.maxSpins, b.maxYields, b.minPark, b.maxPark = int(spins), int(yields), minPark, maxPark
		}
		return b, nil
	case "spin", "busy_spin":
		return spinIdle{}, nil
	case "yield":
		return yieldIdle{}, nil
	case "noop":
		return noopIdle{}, nil
	case "sleep-ns", "sleeping":
		d := time.Millisecond
		if arg != "" {
			v, err := parseIdleDuration(arg)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("idle strategy %q: sleep period %q is not a positive duration (ns, or with a unit: 10us)", name, arg)
			}
			d = v
		}
		return sleepIdle(d), nil
	}
	return nil, fmt.Errorf("idle strategy %q: want backoff, spin, yield, noop or sleep-ns[,ns]", name)
}

// parseIdleDuration reads a number of ns, or a number with a unit (ns,
// us, ms, s), as aeron_parse_duration_ns does.
func parseIdleDuration(s string) (time.Duration, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(v), nil
	}
	return time.ParseDuration(s)
}

// backoffIdle mirrors aeron_idle_strategy_backoff_idle, by default with
// the C defaults: 10 spins, 20 yields, then parks from 1 µs up to 1 ms.
type backoffIdle struct {
	maxSpins, maxYields int
	minPark, maxPark    time.Duration
	spins, yields       int
	park                time.Duration
}

func (b *backoffIdle) Idle(work int) {
	if work > 0 {
		b.Reset()
		return
	}
	switch {
	case b.spins < b.maxSpins:
		b.spins++
	case b.yields < b.maxYields:
		b.yields++
		runtime.Gosched()
	default:
		if b.park == 0 {
			b.park = b.minPark
		}
		time.Sleep(b.park)
		b.park = min(2*b.park, b.maxPark)
	}
}

func (b *backoffIdle) Reset() { b.spins, b.yields, b.park = 0, 0, 0 }

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
