package secret_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/secret"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	const key = "sk-test-0123456789abcdef"
	basic := base64.StdEncoding.EncodeToString([]byte("alice:s3cr3t/pass"))
	r := secret.New(key, "", "abc") // empty and short ones are ignored on their own
	r.AddURL("http://example.com/v1, https://alice:s3cr3t%2Fpass@llm.internal/v1, nats://tok_0123456789@n1:4222")
	r.AddURL("https://gw.example/v1?api-version=2024-10-21&key=AIzaSyQueryKey123&sig=sv%3D1%2Fabc")

	tests := []struct {
		name, in, want string
	}{
		{"plain key", "the key is " + key + ".", "the key is [REDACTED]."},
		{"key twice", key + key, "[REDACTED][REDACTED]"},
		{"json escaped", `{"a":"` + strings.ReplaceAll(key, "-", "-") + `"}`, `{"a":"[REDACTED]"}`},
		{"password", "pw s3cr3t/pass here", "pw [REDACTED] here"},
		{"password url-escaped", "pw s3cr3t%2Fpass here", "pw [REDACTED] here"},
		{"user:pass", "alice:s3cr3t/pass", "[REDACTED]"},
		{"basic header", "Authorization: Basic " + basic, "Authorization: Basic [REDACTED]"},
		{"userinfo in url text", "https://alice:s3cr3t%2Fpass@llm.internal", "https://[REDACTED]@llm.internal"},
		{"token as user", "nats://tok_0123456789@n1", "nats://[REDACTED]@n1"},
		{"key in a query", "POST https://gw.example/v1?key=AIzaSyQueryKey123", "POST https://gw.example/v1?key=[REDACTED]"},
		{"signature in a query, as written", "sig=sv%3D1%2Fabc and sv=1/abc", "sig=[REDACTED] and [REDACTED]"},
		{"other query values left alone", "api-version=2024-10-21", "api-version=2024-10-21"},
		{"short secret left alone", "abc abc", "abc abc"},
		{"nothing", "plain text", "plain text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
				t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactJSONStaysValid(t *testing.T) {
	t.Parallel()
	const key = `k<ey>&"quoted"\back`
	r := secret.New(key)
	doc, err := json.Marshal(map[string]string{"raw": "echo " + key})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Bytes(doc)
	if !json.Valid(got) {
		t.Fatalf("redacted JSON is invalid: %s", got)
	}
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if m["raw"] != "echo [REDACTED]" {
		t.Errorf("raw = %q", m["raw"])
	}
}

func TestBytesUnchangedIsSameSlice(t *testing.T) {
	t.Parallel()
	r := secret.New("sk-0123456789")
	in := []byte("nothing secret")
	if out := r.Bytes(in); &out[0] != &in[0] {
		t.Error("Bytes copied a slice that holds no secret")
	}
	var nilR *secret.Redactor
	if got := nilR.String("x sk-0123456789"); got != "x sk-0123456789" {
		t.Errorf("nil redactor changed text: %q", got)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	const key = "sk-live-abcdef123456"
	r := secret.New(key)
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	log = log.With("url", "https://x/?key="+key)
	log.WithGroup("g").Error("call failed with "+key,
		"err", errors.New("401: bad key "+key),
		"body", []byte(key),
		slog.Group("req", "auth", "Bearer "+key),
		"n", 3)
	out := buf.String()
	if strings.Contains(out, key) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(key))) {
		t.Fatalf("log holds the key: %s", out)
	}
	for _, want := range []string{`"msg":"call failed with [REDACTED]"`, `401: bad key [REDACTED]`, `Bearer [REDACTED]`, `"n":3`, `key=[REDACTED]`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
}

// TestRedactClippedSecret: a secret cut short where a message clips a
// long value (the grounding message's "...", a diagnostic's received
// value's "…") is masked too; a start shorter than MinClipped before a
// clip mark, or a start not followed by one, is left as it is. Before, a
// 108-character key cut at 73 characters reached the dead letter.
func TestRedactClippedSecret(t *testing.T) {
	t.Parallel()
	key := "sk-ant-api03-" + strings.Repeat("A", 95)
	r := secret.New(key)
	for _, tc := range []struct{ in, want string }{
		{`"Globex ` + key[:73] + `..." not found in the input`, `"Globex [REDACTED]..." not found in the input`},
		{"received " + key[:150-140] + strings.Repeat("B", 3) + key[:40] + "…", "received " + key[:10] + "BBB[REDACTED]…"},
		{"short " + key[:secret.MinClipped-1] + "...", "short " + key[:secret.MinClipped-1] + "..."},
		{"no mark " + key[:40] + " and more", "no mark " + key[:40] + " and more"},
		{"whole " + key + "...", "whole [REDACTED]..."},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
