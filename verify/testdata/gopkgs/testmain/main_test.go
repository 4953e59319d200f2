package testmain

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		fmt.Println("leak check: 1 goroutine still running after tests")
		code = 1
	}
	os.Exit(code)
}

func TestFine(t *testing.T) {}
