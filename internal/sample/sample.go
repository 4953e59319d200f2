// Package sample writes the small Go module that the demo and the end-to-end tests work on:
// package calc, whose TestAdd fails until Add adds instead of subtracting. The bug is one
// token, so a script can fix it with FixCommand and a test can fix it with Fix.
package sample

import (
	"os"
	"path/filepath"
)

// FixCommand is a shell command that fixes the bug, run in the module's directory.
const FixCommand = "sed -i 's/a - b/a + b/' calc.go"

const (
	goMod    = "module calc\n\ngo 1.26\n"
	broken   = "package calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a - b }\n"
	fixed    = "package calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a + b }\n"
	calcTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n"
)

// Write puts the module with the bug into dir (which must exist).
func Write(dir string) error {
	for name, body := range map[string]string{"go.mod": goMod, "calc.go": broken, "calc_test.go": calcTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Fix writes the fixed calc.go into dir, as a person would.
func Fix(dir string) error {
	return os.WriteFile(filepath.Join(dir, "calc.go"), []byte(fixed), 0o644)
}
