package app_test

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/internal/giteatest"
)

// The package's Gitea (giteatest.Shared) is stopped before goleak looks.
func TestMain(m *testing.M) { giteatest.Main(m, func() error { return goleak.Find() }) }
