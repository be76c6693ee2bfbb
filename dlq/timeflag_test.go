package dlq_test

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "", want: time.Time{}},
		{in: "2026-11-30T08:00:00Z", want: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
		{in: " 24h ", want: now.Add(-24 * time.Hour)},
		{in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "2026-11-30", want: time.Date(2026, 11, 30, 0, 0, 0, 0, time.Local)},
		{in: "-3d", bad: true},
		{in: "yesterday", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := index.ParseTime(tc.in, now)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseTime(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("ParseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
