package verify

// Redact replaces secret-looking text with the kind of secret, as every failure summary and
// output tail the verifier records is redacted, for other packages that record output (the
// worker's live output tails).
func Redact(s string) string { return redact(s) }
