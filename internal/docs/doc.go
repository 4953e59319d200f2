// Package docs holds the documentation checks: tests that read README.md, docs/*.md and the
// other Markdown documents of the repository and hold them to the code. Every relative link
// must name a file that exists (and, into a Markdown file, a heading that makes its anchor),
// and every `outerloop …` command the documents show must be a command of the real CLI, with
// only flags that command has.
package docs
