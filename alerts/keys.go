package alerts

import (
	"crypto/sha256"
	"encoding/hex"
)

// keys builds every Redis key of the package, under the store's prefix.
type keys struct{ p string }

// group is the set of item ids a receiver's alert group made (TTL GroupIndexTTL, renewed at
// each firing): its resolved notification finds them here. Group keys are Alertmanager's
// (long, any characters): hashed to a fixed length.
func (k keys) group(receiver, groupKey string) string {
	h := sha256.Sum256([]byte(groupKey))
	return k.p + "alerts:group:" + receiver + ":" + hex.EncodeToString(h[:16])
}
