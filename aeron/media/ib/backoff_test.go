package ib

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	var b backoff
	require.Equal(t, ResolveRetry, b.wait(), "the first attempt waits ResolveRetry")
	var got []time.Duration
	for range 8 {
		b.failed()
		got = append(got, b.wait())
	}
	require.Equal(t, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, DialBackoffMax, DialBackoffMax, DialBackoffMax, DialBackoffMax}, got)
	b.reset()
	require.Equal(t, ResolveRetry, b.wait(), "an attempt that found the peer alive starts again at ResolveRetry")

	// a bound below ResolveRetry never makes the wait shorter than it
	old := DialBackoffMax
	defer func() { DialBackoffMax = old }()
	DialBackoffMax = time.Millisecond
	b.failed()
	require.Equal(t, ResolveRetry, b.wait())
}
