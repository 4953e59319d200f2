package notify

// WithClaimForTest returns d as if claimed with token (tests of the claim guard).
func WithClaimForTest(d Delivery, token string) Delivery { d.claim = token; return d }
