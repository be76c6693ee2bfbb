package index

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads the time bound of a Filter as operators type it (a CLI
// flag, a console query): RFC 3339, a date (2006-01-02, local time), or a
// duration meaning that long before now ("24h", "7d"). "" is the zero
// time: no bound.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return now.Add(-time.Duration(d) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, 2006-01-02) nor a duration ago (24h, 7d)", s)
}
