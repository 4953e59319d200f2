package metrics

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// gapHorizonDays is how far ahead scheduleMaxGap looks for the days a schedule ticks on: a
// year and a month, so monthly and yearly schedules show their gap.
const gapHorizonDays = 366 + 31

// starBit is robfig/cron's marker for a field written as * or ? (it changes how day of month and
// day of week combine).
const starBit = 1 << 63

// scheduleMaxGap returns the longest gap between two consecutive ticks of a cron spec in the
// schedule's wall-clock time: daylight-saving shifts are ignored, so a nightly schedule has a
// 24h gap all year (the alert rules use the gauge to tell "at least daily" from weekly). It
// works from the schedule's fields instead of walking its ticks, so it costs the same for an
// every-minute schedule as for a weekly one: the times of day a matching day ticks at, then the
// days over the next year and a month that match. A schedule that ticks less often than that
// (or on a date that never comes) reports the horizon, a lower bound. false: no schedule, or one
// that does not parse (config validation reports it).
func scheduleMaxGap(spec string, from time.Time) (time.Duration, bool) {
	if spec == "" {
		return 0, false
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, false
	}
	switch s := sched.(type) {
	case cron.ConstantDelaySchedule:
		return s.Delay, s.Delay > 0
	case *cron.SpecSchedule:
		return specMaxGap(s, from)
	}
	return 0, false // ParseStandard returns nothing else
}

func specMaxGap(s *cron.SpecSchedule, from time.Time) (time.Duration, bool) {
	secs, mins, hours := setBits(s.Second, 0, 59), setBits(s.Minute, 0, 59), setBits(s.Hour, 0, 23)
	if len(secs) == 0 || len(mins) == 0 || len(hours) == 0 {
		return 0, false
	}
	// Times of day are hours × minutes × seconds; the longest gap inside a day is between two
	// seconds of a minute, two minutes of an hour, or two hours.
	var inDay int
	spanS := secs[len(secs)-1] - secs[0]
	spanM := (mins[len(mins)-1]-mins[0])*60 + spanS
	inDay = max(inDay, maxStep(secs))
	if len(mins) > 1 {
		inDay = max(inDay, maxStep(mins)*60-spanS)
	}
	if len(hours) > 1 {
		inDay = max(inDay, maxStep(hours)*3600-spanM)
	}
	first := hours[0]*3600 + mins[0]*60 + secs[0]
	last := hours[len(hours)-1]*3600 + mins[len(mins)-1]*60 + secs[len(secs)-1]

	loc := s.Location
	if loc == nil {
		loc = time.Local
	}
	y, mo, d := from.In(loc).Date()
	wd := int(from.In(loc).Weekday())
	prev, matched, acrossDays := -1, 0, 0
	for i := range gapHorizonDays {
		if dayMatches(s, d, int(mo), wd) {
			if prev >= 0 {
				acrossDays = max(acrossDays, (i-prev)*86400-last+first)
			}
			prev = i
			matched++
		}
		d, wd = d+1, (wd+1)%7
		if d > daysIn(mo, y) {
			d, mo = 1, mo+1
			if mo > time.December {
				mo, y = time.January, y+1
			}
		}
	}
	if matched < 2 {
		// Less than once in the horizon (29 February), or never (30 February).
		return gapHorizonDays * 24 * time.Hour, true
	}
	gap := max(inDay, acrossDays)
	return time.Duration(gap) * time.Second, gap > 0
}

// dayMatches is robfig/cron's day rule: with * in day of month or day of week both must match,
// otherwise either may.
func dayMatches(s *cron.SpecSchedule, dom, month, dow int) bool {
	if s.Month&(1<<uint(month)) == 0 {
		return false
	}
	domOK := s.Dom&(1<<uint(dom)) != 0
	dowOK := s.Dow&(1<<uint(dow)) != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// setBits returns the set bits of field between lo and hi, ascending.
func setBits(field uint64, lo, hi int) []int {
	var out []int
	f := field &^ starBit
	for f != 0 {
		b := bits.TrailingZeros64(f)
		f &^= 1 << uint(b)
		if b >= lo && b <= hi {
			out = append(out, b)
		}
	}
	return out
}

// maxStep returns the largest difference between neighbours of an ascending list (0 for fewer
// than two).
func maxStep(xs []int) int {
	m := 0
	for i := 1; i < len(xs); i++ {
		m = max(m, xs[i]-xs[i-1])
	}
	return m
}
