package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		h    http.Header
		want Headers
	}{
		{"openai", hdr(
			"x-ratelimit-limit-requests", "500",
			"x-ratelimit-remaining-requests", "499",
			"x-ratelimit-reset-requests", "120ms",
			"x-ratelimit-limit-tokens", "200000",
			"x-ratelimit-remaining-tokens", "195000",
			"x-ratelimit-reset-tokens", "1.5s",
		), Headers{
			Requests: Quota{Known: true, Limit: 500, Remaining: 499, Reset: 120 * time.Millisecond},
			Tokens:   Quota{Known: true, Limit: 200000, Remaining: 195000, Reset: 1500 * time.Millisecond},
		}},
		{"openai minutes", hdr(
			"x-ratelimit-limit-requests", "10000",
			"x-ratelimit-remaining-requests", "0",
			"x-ratelimit-reset-requests", "6m0s",
			"x-ratelimit-remaining-tokens", "12",
			"x-ratelimit-reset-tokens", "1m30.5s",
		), Headers{
			Requests: Quota{Known: true, Limit: 10000, Remaining: 0, Reset: 6 * time.Minute},
			Tokens:   Quota{Known: true, Remaining: 12, Reset: 90*time.Second + 500*time.Millisecond},
		}},
		{"openai 20ms and bare seconds", hdr(
			"x-ratelimit-remaining-requests", "3",
			"x-ratelimit-reset-requests", "20ms",
			"x-ratelimit-remaining-tokens", "7",
			"x-ratelimit-reset-tokens", "2.5",
		), Headers{
			Requests: Quota{Known: true, Remaining: 3, Reset: 20 * time.Millisecond},
			Tokens:   Quota{Known: true, Remaining: 7, Reset: 2500 * time.Millisecond},
		}},
		{"anthropic", hdr(
			"anthropic-ratelimit-requests-limit", "50",
			"anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", "2025-03-01T12:00:01Z",
			"anthropic-ratelimit-tokens-limit", "100000",
			"anthropic-ratelimit-tokens-remaining", "98000",
			"anthropic-ratelimit-tokens-reset", "2025-03-01T12:00:02.5Z",
			"anthropic-ratelimit-input-tokens-limit", "80000",
			"anthropic-ratelimit-input-tokens-remaining", "79000",
			"anthropic-ratelimit-input-tokens-reset", "2025-03-01T12:00:01Z",
			"anthropic-ratelimit-output-tokens-limit", "16000",
			"anthropic-ratelimit-output-tokens-remaining", "0",
			"anthropic-ratelimit-output-tokens-reset", "2025-03-01T12:00:30Z",
		), Headers{
			Requests:     Quota{Known: true, Limit: 50, Remaining: 49, Reset: time.Second},
			Tokens:       Quota{Known: true, Limit: 100000, Remaining: 98000, Reset: 2500 * time.Millisecond},
			InputTokens:  Quota{Known: true, Limit: 80000, Remaining: 79000, Reset: time.Second},
			OutputTokens: Quota{Known: true, Limit: 16000, Remaining: 0, Reset: 30 * time.Second},
		}},
		{"anthropic reset in the past or far", hdr(
			"anthropic-ratelimit-requests-remaining", "5",
			"anthropic-ratelimit-requests-reset", "2025-03-01T11:59:00Z",
			"anthropic-ratelimit-tokens-remaining", "5",
			"anthropic-ratelimit-tokens-reset", "2025-03-02T12:00:00Z",
		), Headers{
			Requests: Quota{Known: true, Remaining: 5},
			Tokens:   Quota{Known: true, Remaining: 5, Reset: maxReset},
		}},
		{"garbled", hdr(
			"x-ratelimit-remaining-requests", "-1",
			"x-ratelimit-remaining-tokens", "lots",
			"anthropic-ratelimit-requests-remaining", "4",
			"anthropic-ratelimit-requests-reset", "soon",
		), Headers{Requests: Quota{Known: true, Remaining: 4}}},
		{"none", http.Header{"Content-Type": {"application/json"}}, Headers{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ParseHeaders(tc.h, now)
			if got != tc.want {
				t.Errorf("ParseHeaders:\n got %+v\nwant %+v", got, tc.want)
			}
			if got.Known() != (tc.want != Headers{}) {
				t.Errorf("Known() = %v", got.Known())
			}
		})
	}
}

func FuzzParseHeaders(f *testing.F) {
	for _, s := range []string{"6m0s", "1.5s", "20ms", "1m30.5s", "2.5", "2025-03-01T12:00:01Z", "", "NaN", "-5s", "1e300"} {
		f.Add("17", s)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, remaining, reset string) {
		h := hdr("x-ratelimit-remaining-requests", remaining, "x-ratelimit-reset-requests", reset,
			"anthropic-ratelimit-tokens-remaining", remaining, "anthropic-ratelimit-tokens-reset", reset)
		got := ParseHeaders(h, now)
		for _, q := range []Quota{got.Requests, got.Tokens} {
			if q.Reset < 0 || q.Reset > maxReset || q.Remaining < 0 {
				t.Fatalf("out of bounds: %+v", q)
			}
		}
	})
}
