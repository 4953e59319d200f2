package execloop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// lookPath resolves bin against the PATH of env (not the worker's own), relative to dir for
// paths with a slash.
func lookPath(bin, dir string, env []string) (string, error) {
	if strings.Contains(bin, "/") {
		p := bin
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, bin)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not in PATH: %w", bin, exec.ErrNotFound)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", p, os.ErrPermission)
	}
	return nil
}

// exitCode returns the process exit status, -1 when killed by a signal or not run.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
