package index

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/llmpipeline/pipeline/job"
)

// TestDecodePayload reads every encoding a file may hold: plain JSON,
// DEFLATE (written by schema version 1) and S2 (written since).
func TestDecodePayload(t *testing.T) {
	t.Parallel()
	o := realistic(7)
	o.Data = nil
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var fl bytes.Buffer
	zw, err := flate.NewWriter(&fl, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		enc     int
		body    []byte
		wantErr bool
	}{
		{"json", encJSON, js, false},
		{"deflate", encDeflate, fl.Bytes(), false},
		{"s2", encS2, s2.Encode(nil, js), false},
		{"unknown encoding", 9, js, true},
		{"corrupt s2", encS2, []byte("not s2 at all"), true},
		{"corrupt deflate", encDeflate, []byte{0xff, 0xff, 0xff}, true},
		{"truncated json", encJSON, js[:len(js)/2], true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodePayload(tc.enc, tc.body)
			if tc.wantErr {
				if err == nil {
					t.Errorf("decodePayload succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Trace, o.Trace) || got.JobID != o.JobID || !bytes.Equal(got.Job, o.Job) {
				t.Errorf("decodePayload = %+v, want %+v", got, o)
			}
		})
	}
}

// TestWriteStoresPayloadAsText checks that Write stores every payload,
// tiny or large, as JSON text (what sqlite3 and the views read), and that
// Get reads it back.
func TestWriteStoresPayloadAsText(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	tiny := job.Outcome{JobID: "t", Schema: "s", Status: job.StatusSucceeded, Attempts: 1}
	big := realistic(1)
	big.Trace[0].Raw = strings.Repeat(`{"note":"long output"}`, 400)
	write(t, s, tiny, big)
	for _, want := range []job.Outcome{tiny, big} {
		var typ, job string
		if err := s.r.QueryRow(`SELECT typeof(p.body), json_extract(p.body, '$.job_id') FROM payloads p JOIN outcomes o ON o.id = p.outcome_id WHERE o.job_id = ?`,
			want.JobID).Scan(&typ, &job); err != nil {
			t.Fatal(err)
		}
		if typ != "text" || job != want.JobID {
			t.Errorf("%s: payload stored as %s with job_id %q, want JSON text", want.JobID, typ, job)
		}
		got, err := s.Get(t.Context(), want.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if got.JobID != want.JobID || !reflect.DeepEqual(got.Trace, want.Trace) {
			t.Errorf("Get(%s) = %+v, want %+v", want.JobID, got, want)
		}
	}
}

// TestAttemptsRows: one attempts row per model call, except for a job valid
// at its first call, whose call is its outcome row and payload.
func TestAttemptsRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    job.Outcome
		want int
	}{
		{"first pass", outcome("a", false, 1, t0), 0},
		{"healed at 2", outcome("b", false, 2, t0, diag("/total", "type", "1")), 2},
		{"dead after 3", outcome("c", true, 3, t0, diag("/total", "type", "1")), 3},
		{"dead at 1", outcome("d", true, 1, t0, diag("/total", "type", "1")), 1},
	}
	s := openTemp(t)
	for _, tc := range tests {
		write(t, s, tc.o)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			if err := s.r.QueryRow(`SELECT COUNT(*) FROM attempts a JOIN outcomes o ON o.id = a.outcome_id WHERE o.job_id = ?`, tc.o.JobID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("%d attempts rows, want %d", n, tc.want)
			}
			got, err := s.Get(t.Context(), tc.o.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Trace) != len(tc.o.Trace) || got.Trace[0].LatencyMS != tc.o.Trace[0].LatencyMS {
				t.Errorf("payload trace = %+v, want the %d attempts written", got.Trace, len(tc.o.Trace))
			}
		})
	}
}

// TestWriteLargeBatch writes a batch over several prepare chunks (prepared
// while the previous chunk is inserted), again (idempotent), and under a
// cancelled context (nothing stored, no goroutine left touching the batch).
func TestWriteLargeBatch(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	var outs []job.Outcome
	for i := 0; i < 3*prepChunk+17; i++ {
		outs = append(outs, mixed(i))
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Write(cancelled, outs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write(cancelled) = %v, want context.Canceled", err)
	}
	if n := count(t, s, "outcomes"); n != 0 {
		t.Fatalf("%d outcomes stored by a cancelled Write", n)
	}
	write(t, s, outs...)
	write(t, s, outs...)
	if n := count(t, s, "outcomes"); n != len(outs) {
		t.Errorf("%d outcomes, want %d", n, len(outs))
	}
	if n := count(t, s, "payloads"); n != len(outs) {
		t.Errorf("%d payloads, want %d", n, len(outs))
	}
	for _, i := range []int{0, prepChunk, len(outs) - 1} {
		got, err := s.Get(t.Context(), outs[i].JobID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != outs[i].Status || len(got.Trace) != len(outs[i].Trace) {
			t.Errorf("Get(%s) = %s with %d attempts, want %s with %d", outs[i].JobID, got.Status, len(got.Trace), outs[i].Status, len(outs[i].Trace))
		}
	}
}

// FuzzDecodePayload: a stored body of any encoding either decodes or
// returns an error, never panics.
func FuzzDecodePayload(f *testing.F) {
	o := realistic(3)
	js, _ := json.Marshal(o)
	f.Add(encJSON, js)
	f.Add(encS2, s2.Encode(nil, js))
	f.Add(encDeflate, []byte{0x01, 0x00, 0x00, 0xff, 0xff})
	f.Add(7, []byte("{}"))
	f.Fuzz(func(t *testing.T, enc int, body []byte) {
		o, err := decodePayload(enc, body)
		if err == nil && enc != encJSON && enc != encDeflate && enc != encS2 {
			t.Errorf("encoding %d decoded to %+v", enc, o)
		}
	})
}
