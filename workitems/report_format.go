package workitems

// ReportFormat is the format of a test report: what a done check's `format:` may say, what
// `outerloop verify --format` takes and what the verifier reads. A value here is one the
// verifier has a parser for, and so one the config accepts.
type ReportFormat string

// The report formats.
const (
	FormatAuto     ReportFormat = "auto" // detected from the content
	FormatGoJSON   ReportFormat = "gojson"
	FormatJUnit    ReportFormat = "junit"
	FormatTAP      ReportFormat = "tap"
	FormatJestJSON ReportFormat = "jestjson" // `jest --json`, `vitest --reporter=json`
)

// AllReportFormats lists the report formats, auto first.
func AllReportFormats() []ReportFormat {
	return []ReportFormat{FormatAuto, FormatGoJSON, FormatJUnit, FormatTAP, FormatJestJSON}
}
