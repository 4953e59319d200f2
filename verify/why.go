package verify

import (
	"fmt"
	"regexp"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// WhyLines is how many of the failing command's last output lines a decision keeps: enough to
// show the error a person needs, few enough for an inbox card and a notification.
const WhyLines = 8

// sandboxCause is one way the sandbox shows in a command's output, and what to change.
type sandboxCause struct {
	what    string         // what the sandbox did, in words
	pattern *regexp.Regexp // in the output tail or the exit message
	advise  func(s config.Sandbox) string
}

// sandboxCauses are matched in order; the first that appears names the cause. The patterns are
// the messages the usual tools print (Go, git, curl, npm, pip, the shell, the kernel's own
// errno text) and the proxy's and the runner's own refusals.
var sandboxCauses = []sandboxCause{
	{
		what: "the sandbox's network refused a connection",
		pattern: regexp.MustCompile(`(?i)egress: [^ ]+ (is not in the sandbox's allow list|resolves only to addresses)|` +
			`dial tcp: lookup [^ ]+|could not resolve host|` +
			`temporary failure in name resolution|getaddrinfo (ENOTFOUND|EAI_AGAIN)|network is unreachable|` +
			`name or service not known|proxyconnect tcp`),
		advise: networkAdvice,
	},
	{
		what:    "a resource limit of the sandbox stopped the command",
		pattern: regexp.MustCompile(`(?i)\blimit (memory|processes|cpu_time|file_size)\b|exceeded the sandbox's [a-z_]+ limit`),
		advise: func(config.Sandbox) string {
			return "raise it in the template's sandbox: {limits: {memory: …, processes: …, cpu_time: …, file_size: …}} (docs/sandbox-limits.md)"
		},
	},
	{
		what:    "the sandbox's filesystem is read-only there",
		pattern: regexp.MustCompile(`(?i)read-only file system|EROFS`),
		advise: func(config.Sandbox) string {
			return "only the workspace, /tmp and the item's caches are writable in the sandbox; write inside the workspace, or set sandbox: {mode: off} for this template"
		},
	},
	{
		what:    "the sandbox could not start",
		pattern: regexp.MustCompile(`sandbox unavailable`),
		advise: func(config.Sandbox) string {
			return "install bubblewrap on the worker (docs/containers.md) or set sandbox: {mode: off}"
		},
	},
}

// networkAdvice names the setting that would let a command reach what it could not.
func networkAdvice(s config.Sandbox) string {
	switch s.Network {
	case "none":
		return "the template's sandbox has network: none; network: registries reaches the package registries through the worker's proxy (allow: [host] adds hosts), network: host reaches everything"
	case "host":
		return "the template's sandbox has network: host, so the host itself could not reach it"
	}
	return "add the host to the template's sandbox: {allow: [host]} (registries mode reaches only the listed hosts), or set network: host"
}

// why explains a failure for a person: the failing command's last output lines and, when the
// failure is the sandbox's doing, what it did and the setting that would allow it. Both are
// empty when nothing failed.
func why(f *Facts) (cause, output string) {
	text, msg := "", f.Exit.Message
	switch {
	case f.Exit.Reason != workitems.ExitCompleted && f.Exit.Reason != "":
		text = f.Exit.LastMessage
	case len(f.Reports) > 0:
		// The verdict's failed tests and first error say it better than raw report lines.
	default:
		for _, c := range f.Commands {
			if !c.OK() {
				text, msg = c.Tail, fmt.Sprintf("%q exit %d", c.Command, c.ExitCode)
				break
			}
		}
	}
	if text == "" && msg == "" {
		return "", ""
	}
	output = lastLines(text, WhyLines)
	var sb config.Sandbox
	if f.Template != nil {
		sb = f.Template.Sandbox
	}
	if sb.Mode == "off" {
		return "", output
	}
	if len(f.NetworkRefused) > 0 {
		// The proxy's own record: the tools' messages ("Forbidden", "tunnel failed") name no host.
		return fmt.Sprintf("the sandbox refused connections to %s: %s", strings.Join(f.NetworkRefused, ", "), networkAdvice(sb)), output
	}
	for _, c := range sandboxCauses {
		m := c.pattern.FindString(msg + "\n" + text)
		if m == "" {
			continue
		}
		return fmt.Sprintf("%s (%q): %s", c.what, strings.TrimSpace(m), c.advise(sb)), output
	}
	return "", output
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimRight(lines[i], "\r "); l != "" {
			out = append(out, l)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return shorten.Clip(strings.Join(out, "\n"), 2048)
}

// explain adds the why to a decision that does not close: the cause leads the summary (what a
// person reads first, in the inbox and the notification), the output goes with it.
func explain(d *workitems.Decision, f *Facts) {
	if d.Outcome == workitems.OutcomeClose {
		return
	}
	cause, output := why(f)
	d.Cause, d.Output = cause, output
	if cause != "" && d.Summary != "" {
		d.Summary = shorten.Clip(cause+"; "+d.Summary, 1000)
	} else if cause != "" {
		d.Summary = shorten.Clip(cause, 1000)
	}
}
