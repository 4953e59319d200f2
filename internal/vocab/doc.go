// Package vocab holds, in its tests, the repository-wide checks of outerloop's vocabularies
// that no single package can make: every event type (workitems.AllEventTypes) and every event
// kind (workitems.AllEventKinds) any package's code writes is listed. The tests type-check the
// repository's non-test code (golang.org/x/tools/go/packages) and fail naming the file and
// line of a value outside its list.
package vocab
