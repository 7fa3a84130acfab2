package main

import (
	"testing"

	"github.com/ibgo/ibgo/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
