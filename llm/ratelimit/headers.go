package ratelimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Quota is one rate-limit family as a provider reported it on a response:
// the limit of its window, what remains of it, and how long until it is
// whole again. Known is false when the response carried none of it.
type Quota struct {
	Known     bool
	Limit     int64 // 0 when the provider did not say
	Remaining int64
	// Reset is how long from the response until the family is fully
	// replenished (0: it is now, or the provider did not say).
	Reset time.Duration
}

// Headers are the rate-limit families of one response. OpenAI reports
// Requests and Tokens; Anthropic reports Requests, Tokens, InputTokens and
// OutputTokens.
type Headers struct {
	Requests     Quota
	Tokens       Quota
	InputTokens  Quota
	OutputTokens Quota
}

// Known reports whether any family was present.
func (h Headers) Known() bool {
	return h.Requests.Known || h.Tokens.Known || h.InputTokens.Known || h.OutputTokens.Known
}

// maxReset bounds a reset read from a header: a clock far off or a
// garbled value must not hold requests for hours.
const maxReset = time.Hour

// ParseHeaders reads both providers' rate-limit headers from h; now is the
// time the response arrived (Anthropic's resets are times, OpenAI's are
// durations).
//
// OpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the
// resets Go-style durations ("6m0s", "1.5s", "20ms", "1m30.5s"; a bare
// number is read as seconds). Anthropic:
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset},
// the resets RFC 3339 times. A family counts as known when its remaining
// count parses; a reset that does not parse is taken as 0 (now), and
// resets are capped at an hour.
func ParseHeaders(h http.Header, now time.Time) Headers {
	var out Headers
	for _, f := range []struct {
		q                       *Quota
		limit, remaining, reset string
		absolute                bool
	}{
		{&out.Requests, "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", false},
		{&out.Tokens, "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", false},
		{&out.Requests, "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset", true},
		{&out.Tokens, "anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset", true},
		{&out.InputTokens, "anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset", true},
		{&out.OutputTokens, "anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset", true},
	} {
		rem, ok := parseCount(h.Get(f.remaining))
		if !ok {
			continue
		}
		q := Quota{Known: true, Remaining: rem}
		q.Limit, _ = parseCount(h.Get(f.limit))
		if f.absolute {
			q.Reset = parseResetTime(h.Get(f.reset), now)
		} else {
			q.Reset = parseResetDuration(h.Get(f.reset))
		}
		*f.q = q
	}
	return out
}

// parseCount reads a non-negative integer count.
func parseCount(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// parseResetDuration reads OpenAI's reset: a Go-style duration, or a bare
// number of seconds as some compatible servers send.
func parseResetDuration(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || s != s { // NaN
			return 0
		}
		d = time.Duration(min(s, maxReset.Seconds()) * float64(time.Second))
	}
	return min(max(d, 0), maxReset)
}

// parseResetTime reads Anthropic's reset: an RFC 3339 time.
func parseResetTime(v string, now time.Time) time.Duration {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxReset)
}
