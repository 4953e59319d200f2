package verify_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"outerloop/verify"
)

// ParseReport reads any supported report; the format is detected from the content.
func ExampleParseReport() {
	tap := "TAP version 14\n1..3\nok 1 - adds\nnot ok 2 - divides\n  ---\n  message: division by zero\n  ...\nok 3 - rounds # SKIP no floats\n"
	r, err := verify.ParseReport(strings.NewReader(tap), "math.tap", verify.FormatAuto, verify.Limits{})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Summary())
	fmt.Println("failing:", r.Failing(), "first error:", r.FirstError)
	fmt.Println("green:", r.Green())
	// Output:
	// tap math.tap: 3 tests, 1 passed, 1 failed, 0 errors, 1 skipped
	// failing: [divides] first error: divides: division by zero
	// green: false
}

// RunCLI is what `outerloop verify --report FILE...` prints; the exit code is 0 only for close.
func ExampleRunCLI() {
	code, err := verify.RunCLI(context.Background(), os.Stdout, []string{"testdata/gojson/rerun.json"}, verify.CLIOptions{})
	fmt.Println("exit", code, err)
	// Output:
	// gojson testdata/gojson/rerun.json: 2 tests, 2 passed, 0 failed, 0 errors, 0 skipped, 1 flaky
	//   FLAKY fixtures/flaky.TestSometimes (failed, then passed)
	// decision: close — all green (2 tests); flaky, no diff to relate them to: fixtures/flaky.TestSometimes
	// exit 0 <nil>
}
