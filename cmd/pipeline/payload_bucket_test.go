package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// bucketBytes is the payload object store's size and object count.
func bucketBytes(t *testing.T, c *broker.Conn) (uint64, int) {
	t.Helper()
	obs, err := c.JetStream().ObjectStore(t.Context(), payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	return st.Size(), len(infos)
}

// bigJobs is n jobs of 2 MiB each (twice the broker's max payload).
func bigJobs(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(bigJob(fmt.Sprintf("big-%d", i), "invoice", 2<<20))
		b.WriteByte('\n')
	}
	return b.String()
}

// nearEmpty: what a bucket of deleted objects may keep (their markers).
const nearEmpty = 64 << 10

// TestPayloadBucketEmpties: the bodies of large jobs and of their outcomes
// leave PIPELINE_PAYLOADS with them: a job's when it is acked, an
// outcome's when the stream limits remove its message (once indexed) and
// when `dlq purge` deletes its dead letter.
func TestPayloadBucketEmpties(t *testing.T) {
	t.Parallel()
	t.Run("run with stream limits", func(t *testing.T) {
		dir := t.TempDir()
		conn := []string{"--data-dir", dir}
		mustCLI(t, bigJobs(4), append([]string{"submit"}, append(conn, "-")...)...)
		mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--stream-max-age", "1ms"}, conn...)...)
		// The run's last trim keeps an outcome stored less than 1ms before
		// it (the limit is an age); the next sink, a run that takes no
		// jobs, trims the rest.
		mustCLI(t, "", append([]string{"run", "--until-idle", "--concurrency", "0", "--stream-max-age", "1ms"}, conn...)...)
		c := connFor(t, conn)
		defer c.Close()
		if size, n := bucketBytes(t, c); size > nearEmpty {
			t.Errorf("after the run: %d bytes in %d objects left in %s, want near empty (the outcomes were indexed and removed from their stream)", size, n, payload.Bucket)
		}
		if got := len(jsonLines(t, mustCLI(t, "", "results", "--json", "--data-dir", dir))); got != 0 {
			t.Errorf("%d results on RESULTS, want the limit applied", got)
		}
	})
	t.Run("dlq purge", func(t *testing.T) {
		dir := t.TempDir()
		conn := []string{"--data-dir", dir}
		mustCLI(t, bigJobs(4), append([]string{"submit"}, append(conn, "-")...)...)
		mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "grammar", "--max-attempts", "1"}, conn...)...)
		c := connFor(t, conn)
		size, n := bucketBytes(t, c)
		c.Close()
		if n != 4 || size < 4*(2<<20) {
			t.Fatalf("before the purge: %d bytes in %d objects, want the 4 dead letters' bodies", size, n)
		}
		if out := mustCLI(t, "", "dlq", "purge", "--all", "--data-dir", dir); !strings.Contains(out, "purged 4 dead letters") {
			t.Fatalf("dlq purge: %s", out)
		}
		c = connFor(t, conn)
		defer c.Close()
		if size, n := bucketBytes(t, c); size > nearEmpty {
			t.Errorf("after dlq purge --all: %d bytes in %d objects left in %s, want near empty", size, n, payload.Bucket)
		}
		p, err := queue.Pending(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if p.DeadLetters != 0 {
			t.Errorf("%d dead letters left on DLQ after dlq purge --all (a rebuild would bring them back)", p.DeadLetters)
		}
	})
}

// TestTamperedPayloadEndsAsInvalidJob: a job whose body in the object
// store was changed after submit ends, on its first delivery, as an
// invalid_job dead letter naming the digest mismatch; nothing is left on
// JOBS.
func TestTamperedPayloadEndsAsInvalidJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conn := []string{"--data-dir", dir}
	mustCLI(t, bigJobs(1)+`{"id":"small-1","schema":"invoice","input":"Invoice 7 from ACME, total 12 EUR"}`+"\n", append([]string{"submit"}, append(conn, "-")...)...)
	c := connFor(t, conn)
	s, err := c.JetStream().Stream(t.Context(), broker.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	name := m.Header.Get(payload.Header)
	if name == "" {
		t.Fatalf("the big job's message names no payload object: %v", m.Header)
	}
	obs, err := c.JetStream().ObjectStore(t.Context(), payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	body, err := obs.GetBytes(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	body = bytes.Replace(body, []byte("3 bolts"), []byte("9 bolts"), 1)
	if _, err := obs.PutBytes(t.Context(), name, body); err != nil {
		t.Fatal(err)
	}
	c.Close()

	_, errs, code := runCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0"}, conn...)...)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	var o struct {
		Class, Reason string
		Deliveries    int
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, "big-0")), &o); err != nil {
		t.Fatal(err)
	}
	if o.Class != "invalid_job" || !strings.Contains(o.Reason, "digest") {
		t.Errorf("tampered job: class %q, reason %q; want invalid_job naming the digest mismatch", o.Class, o.Reason)
	}
	c = connFor(t, conn)
	defer c.Close()
	p, err := queue.Pending(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 0 || p.Results != 1 || p.DeadLetters != 1 {
		t.Errorf("streams: %d jobs left, %d results, %d dead letters; want 0, 1, 1", p.Jobs, p.Results, p.DeadLetters)
	}
}
