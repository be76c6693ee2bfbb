package dlq

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/klauspost/compress/s2"
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

// TestWriteStoresPayloadCompressed checks that Write keeps tiny payloads
// as JSON and compresses the rest, and that both read back.
func TestWriteStoresPayloadCompressed(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	tiny := Outcome{JobID: "t", Schema: "s", Status: StatusSucceeded, Attempts: 1}
	big := realistic(1)
	write(t, s, tiny, big)
	for _, tc := range []struct {
		job string
		enc int
	}{{"t", encJSON}, {big.JobID, encS2}} {
		var enc, n int
		if err := s.r.QueryRow(`SELECT p.encoding, length(p.body) FROM payloads p JOIN outcomes o ON o.id = p.outcome_id WHERE o.job_id = ?`, tc.job).Scan(&enc, &n); err != nil {
			t.Fatal(err)
		}
		if enc != tc.enc {
			t.Errorf("%s: encoding %d, want %d", tc.job, enc, tc.enc)
		}
		got, err := s.Get(t.Context(), tc.job)
		if err != nil {
			t.Fatal(err)
		}
		if got.JobID != tc.job {
			t.Errorf("Get(%s) = %s", tc.job, got.JobID)
		}
		if tc.enc == encS2 {
			js, _ := json.Marshal(got)
			if n >= len(js) {
				t.Errorf("%s: %d bytes stored for a %d-byte transcript: not smaller", tc.job, n, len(js))
			}
		}
	}
}
