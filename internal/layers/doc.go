// Package layers holds the check that outerloop's folders stack into floors: a test that reads
// the import graph (go list) and fails when an import points to a higher floor, so that a
// folder-level import cycle cannot creep back in. It has no code of its own; see layers_test.go
// for the precise definition of a folder, a floor and an arrow pointing up.
package layers
