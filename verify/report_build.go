package verify

import "outerloop/workitems"

// NewReport starts the Report of a parser of another format: nothing declared, no tests yet.
// The parser appends Tests (and sets Declared's fields the format states, Complete when the
// report ended properly), then calls Tally once.
func NewReport(source string, format workitems.ReportFormat) *Report {
	return &Report{Source: source, Format: format, Declared: unknownCounts()}
}

// Tally sets Observed and Listed from Tests (each test counted once, by its final outcome).
func (r *Report) Tally() { r.tally(Counts{}) }
