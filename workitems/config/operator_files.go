package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Operator files are the files a template's commands name outside the workspace: a stop hook
// `sh /etc/outerloop/hooks/check.sh`, a done check `/opt/ci/run-tests`, a step
// `python3 /srv/scripts/bump.py`. The sandbox shows the system directories and hides the
// config directory (it may hold secrets), so such a file could be invisible inside; each is
// bound read-only at its own path instead (Template.OperatorFiles, filled by LoadConfig), the hidden
// directory around it staying hidden.
//
// Which words are paths: every word of a command line (quotes trimmed, a leading redirection
// or --opt= removed) that is an absolute path of an existing file or directory, outside /dev,
// /proc and /sys. A relative word is the workspace's: commands run in the workspace, so the
// shell resolves `sh hooks/check.sh` there. A script next to the config is written by its
// absolute path; validate refuses a relative script word that exists next to the config and
// not in the (local) repo, naming the absolute path to write (OperatorFileProblems).

// CommandPath is one path-like word of a command line.
type CommandPath struct {
	Field string // the template field, e.g. "loop.stop_hooks[0]"
	Line  string // the command line
	Word  string // the word as the shell sees it
	// Program says it is the program a command of the line starts; Script that it is the
	// script an interpreter is given (`sh x.sh`, `python3 -u x.py`).
	Program, Script bool
}

// interpreters run the script named by their first non-option argument.
var interpreters = []string{"sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "perl", "ruby", "php"}

// commandWords splits a command line into shell words roughly: on blanks, a word's surrounding
// quotes trimmed, a leading redirection (>, 2>, <) or --opt= dropped. Operators (&&, ;, |)
// start a new command. Words with $, ` or glob characters are left out: their value is known
// only at run time.
func commandWords(line string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range strings.Fields(line) {
		switch w {
		case "&&", "||", ";", "|", "&":
			if len(cur) > 0 {
				cmds = append(cmds, cur)
			}
			cur = nil
			continue
		}
		end := strings.TrimRight(w, ";")
		w = strings.Trim(end, `'"`)
		if i := strings.IndexAny(w, "<>"); i >= 0 && i <= 2 {
			w = strings.TrimLeft(w[i:], "<>&")
		}
		if strings.HasPrefix(w, "-") {
			if _, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(v, "/") {
				w = v
			}
		}
		if w == "" || strings.ContainsAny(w, "$`*?[") {
			cur = append(cur, "\x00") // a word all the same: positions still count
		} else {
			cur = append(cur, w)
		}
	}
	if len(cur) > 0 {
		cmds = append(cmds, cur)
	}
	return cmds
}

// linePaths returns the words of one command line that may be paths.
func linePaths(field, line string) []CommandPath {
	var out []CommandPath
	for _, words := range commandWords(line) {
		first := 0
		for first < len(words) && strings.Contains(words[first], "=") && !strings.HasPrefix(words[first], "/") {
			first++ // VAR=value before the command
		}
		script := -1
		if first < len(words) && slices.Contains(interpreters, filepath.Base(words[first])) {
			for i := first + 1; i < len(words); i++ {
				if words[i] == "-c" || words[i] == "-e" || words[i] == "-m" {
					break // inline code or a module: no script file
				}
				if !strings.HasPrefix(words[i], "-") {
					script = i
					break
				}
			}
		}
		for i, w := range words {
			if w == "\x00" || (i != script && i != first && !strings.Contains(w, "/")) {
				continue
			}
			out = append(out, CommandPath{Field: field, Line: line, Word: w, Program: i == first, Script: i == script})
		}
	}
	return out
}

// CommandPaths returns the path-like words of every command line of t: the script loop's
// steps, the agent's stop hooks, an exec agent's command and the done check's commands.
func CommandPaths(t *Template) []CommandPath {
	var out []CommandPath
	for i, c := range t.Loop.Commands {
		out = append(out, linePaths(fmt.Sprintf("loop.commands[%d]", i), c)...)
	}
	for i, c := range t.Loop.StopHooks {
		out = append(out, linePaths(fmt.Sprintf("loop.stop_hooks[%d]", i), c)...)
	}
	if c := t.Loop.Command; c != "" {
		out = append(out, CommandPath{Field: "loop.command", Line: c, Word: c, Program: true})
	}
	for i, c := range t.DoneCheck.Commands {
		out = append(out, linePaths(fmt.Sprintf("done_check.commands[%d]", i), c)...)
	}
	return out
}

// kernelDirs are never bound from the host: the sandbox has its own.
var kernelDirs = []string{"/dev", "/proc", "/sys"}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// OperatorFiles returns the absolute paths t's commands name that exist on this host, for
// binding read-only into its sandbox. A directory holding the config directory (dir) is left
// out: binding it would show what the config directory hides (validate refuses it).
func OperatorFiles(t *Template, dir string) []string {
	var out []string
	for _, p := range CommandPaths(t) {
		if !filepath.IsAbs(p.Word) {
			continue
		}
		abs := filepath.Clean(p.Word)
		if abs == "/" || slices.ContainsFunc(kernelDirs, func(d string) bool { return under(abs, d) }) || slices.Contains(out, abs) {
			continue
		}
		fi, err := os.Stat(abs)
		if err != nil || (fi.IsDir() && dir != "" && under(dir, abs)) {
			continue
		}
		out = append(out, abs)
	}
	return out
}

// ResolveOperatorFiles fills every template's OperatorFiles (LoadConfig calls it once Dir is
// known).
func (c *Config) ResolveOperatorFiles() {
	for i := range c.Templates {
		c.Templates[i].OperatorFiles = OperatorFiles(&c.Templates[i], c.Dir)
	}
}

// OperatorFileProblems names what t's commands refer to that the sandbox cannot show: a
// script given by absolute path that does not exist here, a directory that holds the config
// directory, a relative script that exists next to the config (dir) but not in the local
// repo (localRepo; "" for a remote one). Each problem names the field, the command and the
// path.
func OperatorFileProblems(t *Template, dir, localRepo string) []string {
	var out []string
	for _, p := range CommandPaths(t) {
		bad := func(format string, args ...any) {
			out = append(out, fmt.Sprintf("%s: %q: ", p.Field, p.Line)+fmt.Sprintf(format, args...))
		}
		if filepath.IsAbs(p.Word) {
			abs := filepath.Clean(p.Word)
			fi, err := os.Stat(abs)
			switch {
			// A program that is missing is validate's binary check's (steps, done checks); a
			// stop hook's and a script given to an interpreter are checked here.
			case err != nil && (p.Script || (p.Program && strings.HasPrefix(p.Field, "loop.stop_hooks"))):
				bad("%s does not exist on this host (a script outside the workspace is shown read-only in the sandbox at the same path; create it or fix the path)", abs)
			case err == nil && fi.IsDir() && dir != "" && under(dir, abs):
				bad("%s holds the config directory %s, which the sandbox hides because it may hold secrets: name the files the command needs instead", abs, dir)
			}
			continue
		}
		if !(p.Script || p.Program) || dir == "" {
			continue
		}
		next := filepath.Join(dir, p.Word)
		if fi, err := os.Stat(next); err != nil || fi.IsDir() {
			continue
		}
		if localRepo != "" {
			if _, err := os.Stat(filepath.Join(localRepo, p.Word)); err == nil {
				continue // the repo's own file
			}
		}
		bad("%q is resolved in the workspace, where commands run, not next to the config: to run %s, write its absolute path (it is then shown read-only in the sandbox)", p.Word, next)
	}
	return out
}
