package workitems

// ReportFormat is the format of a test report: what a done check's `format:` may say, what
// `outerloop verify --format` takes and what the verifier reads. A value here is one the
// verifier has a parser for, and so one the config accepts: verify.BuiltinFormats registers a
// parser under each name but auto, in this order (a test in verify holds the two equal). A new
// format is its parser in verify, one line in BuiltinFormats and its name here.
type ReportFormat string

// The report formats.
const (
	FormatAuto     ReportFormat = "auto" // detected from the content
	FormatGoJSON   ReportFormat = "gojson"
	FormatJUnit    ReportFormat = "junit"
	FormatTAP      ReportFormat = "tap"
	FormatJestJSON ReportFormat = "jestjson" // `jest --json`, `vitest --reporter=json`
)

// AllReportFormats lists the report formats, auto first, then in the order auto asks them.
func AllReportFormats() []ReportFormat {
	return []ReportFormat{FormatAuto, FormatGoJSON, FormatJUnit, FormatTAP, FormatJestJSON}
}
