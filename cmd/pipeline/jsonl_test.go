package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer starts a NATS server with JetStream for one test (random
// port, store under t.TempDir) and returns its URL.
func natsServer(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return s.ClientURL()
}

// compactLines checks that out is JSON Lines: every line one compact JSON
// object (encoding/json's Compact changes nothing), and returns them.
func compactLines(t *testing.T, what, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(line)); err != nil {
			t.Fatalf("%s: line %q is not a JSON value: %v\nwhole output:\n%s", what, line, err, out)
		}
		if b.String() != line {
			t.Errorf("%s: line is not compact: %q", what, line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: line %q is not an object: %v", what, line, err)
		}
		objs = append(objs, m)
	}
	return objs
}

// TestJSONLinesWhateverTheModelWrote: a pretty-printed (multi-line) answer
// from the provider and pretty-printed jobs published straight onto the
// jobs stream by another producer still give one compact object per line
// from `results`, `results --json` and `dlq export`, with every field.
func TestJSONLinesWhateverTheModelWrote(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	answer := "{\n  \"subject\": \"Cannot log in\",\n  \"priority\": \"high\",\n  \"category\": \"account\",\n  \"customer\": {\n    \"name\": \"Ana Lima\",\n    \"email\": \"ana@example.com\"\n  }\n}\n"
	srv := newOpenAIServer(t, http.StatusOK, answer)
	url := natsServer(t)
	dir := t.TempDir()

	// submit creates the streams and publishes one job the usual way
	mustCLI(t, `{"id":"plain-1","schema":"ticket","input":"From: Ana Lima <ana@example.com>\nI cannot log in."}`+"\n",
		"submit", "--data-dir", dir, "--nats-url", url, "-")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct{ id, schema, body string }{
		{"pretty-1", "ticket", "{\n  \"id\": \"pretty-1\",\n  \"schema\": \"ticket\",\n  \"input\": \"From: Ana Lima\\nI cannot log in.\",\n  \"metadata\": {\n    \"source\": \"crm\",\n    \"n\": 1.50\n  }\n}\n"},
		{"pretty-2", "nope", "{\n\t\"id\": \"pretty-2\",\n\t\"schema\": \"nope\",\n\t\"input\": \"x\"\n}"},
	} {
		msg := nats.NewMsg("pipeline.jobs." + j.schema)
		msg.Header.Set(nats.MsgIdHdr, j.id)
		msg.Data = []byte(j.body)
		if _, err := js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatalf("publishing %s: %v", j.id, err)
		}
	}
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--nats-url", url, "--until-idle",
		"--model", "openai:test-model", "--llm-url", srv.URL+"/v1")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}

	// an outcome as an older worker stored it: the model's answer as it
	// was spelled, over many lines
	old := "{\"job_id\":\"old-1\",\"schema\":\"ticket\",\"status\":\"succeeded\",\"attempts\":1,\"data\":" + answer + ",\"job\":{\n \"id\": \"old-1\"\n}}"
	if _, err := js.Publish(t.Context(), "pipeline.results.ticket", []byte(old)); err != nil {
		t.Fatal(err)
	}

	plain := compactLines(t, "results", mustCLI(t, "", "results", "--data-dir", dir, "--nats-url", url))
	full := compactLines(t, "results --json", mustCLI(t, "", "results", "--data-dir", dir, "--nats-url", url, "--json"))
	dead := compactLines(t, "dlq export", mustCLI(t, "", "dlq", "export", "--data-dir", dir))
	if len(plain) != 3 || len(full) != 3 || len(dead) != 1 {
		t.Fatalf("%d results, %d with --json, %d dead letters exported; want 3, 3, 1", len(plain), len(full), len(dead))
	}
	for _, r := range plain {
		for _, k := range []string{"job_id", "schema", "attempts", "data"} {
			if _, ok := r[k]; !ok {
				t.Errorf("results line %v lacks %q", r, k)
			}
		}
		if r["data"].(map[string]any)["customer"].(map[string]any)["email"] != "ana@example.com" {
			t.Errorf("results data %v", r["data"])
		}
	}
	for _, r := range full {
		if r["job_id"] == "old-1" {
			continue
		}
		for _, k := range []string{"job_id", "schema", "schema_version", "status", "model", "attempts", "data", "job", "trace", "deliveries", "started_at", "finished_at"} {
			if _, ok := r[k]; !ok {
				t.Errorf("results --json line lacks %q: %v", k, r)
			}
		}
		if r["job_id"] == "pretty-1" {
			meta := r["job"].(map[string]any)["metadata"].(map[string]any)
			if meta["source"] != "crm" || meta["n"] != 1.5 {
				t.Errorf("job metadata %v, want the submitted one", meta)
			}
		}
	}
	d := dead[0]
	if d["job_id"] != "pretty-2" || d["class"] != "unknown_schema" || d["job"].(map[string]any)["input"] != "x" {
		t.Errorf("exported dead letter %v, want pretty-2 (unknown_schema) with its job", d)
	}
	for _, k := range []string{"schema", "status", "reason", "hint", "attempts", "job", "started_at", "finished_at"} {
		if _, ok := d[k]; !ok {
			t.Errorf("exported dead letter lacks %q: %v", k, d)
		}
	}
}
