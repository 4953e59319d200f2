package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is what the runner writes before a guarded command starts: enough for a later
// worker on this host to find and kill the command's group if the execution that started it
// died (Reap), and nothing that could hit an unrelated process (boot id and the guard's start
// time must still match).
type Record struct {
	Key       string `json:"key"`
	Pgid      int    `json:"pgid"`
	BootID    string `json:"boot_id"`
	StartTime uint64 `json:"start_time"` // the guard's, in clock ticks since boot (/proc/PID/stat)
}

// bootID returns this boot's id ("" when unknown).
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// startTime returns pid's start time in clock ticks since boot.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// recordName is the file name of a record: the key made safe, and the group.
func recordName(key string, pgid int) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, key)
	return safe + "~" + strconv.Itoa(pgid) + ".json"
}

// writeRecord records a guarded command's group before it starts; it returns the file ("" when
// records are off or the write failed: the guard still holds).
func (r *Runner) writeRecord(key string, pgid int) string {
	if r == nil || r.Records == "" {
		return ""
	}
	st, _ := startTime(pgid)
	b, _ := json.Marshal(Record{Key: key, Pgid: pgid, BootID: bootID(), StartTime: st})
	if err := os.MkdirAll(r.Records, 0o700); err != nil {
		return ""
	}
	p := filepath.Join(r.Records, recordName(key, pgid))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return ""
	}
	return p
}

func removeRecord(p string) {
	if p != "" {
		_ = os.Remove(p)
	}
}

// Records returns the records of key ("" → all).
func (r *Runner) ListRecords(key string) ([]Record, error) {
	if r == nil || r.Records == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(r.Records)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("proc: records: %w", err)
	}
	var out []Record
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(r.Records, e.Name()))
		if err != nil {
			continue
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		if key == "" || rec.Key == key {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Reap kills what the records of key say is still running on this boot (an earlier
// execution of the same attempt that died with its guard), and removes the records. It
// returns how many groups it killed. Call it before a resumed execution starts anything.
func (r *Runner) Reap(key string) (int, error) {
	recs, err := r.ListRecords(key)
	if err != nil {
		return 0, err
	}
	boot, killed := bootID(), 0
	for _, rec := range recs {
		if rec.BootID == boot && rec.Pgid > 1 {
			if st, ok := startTime(rec.Pgid); ok && st == rec.StartTime {
				KillTree(rec.Pgid, 10*time.Second)
				killed++
			} else if !ok {
				// The guard is gone; members of its group may not be.
				if syscall.Kill(-rec.Pgid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		}
		removeRecord(filepath.Join(r.Records, recordName(rec.Key, rec.Pgid)))
	}
	return killed, nil
}

// Sweep reaps every record (at worker start: no execution of this worker runs yet, and one
// work dir belongs to one worker process at a time).
func (r *Runner) Sweep() (int, error) { return r.Reap("") }
