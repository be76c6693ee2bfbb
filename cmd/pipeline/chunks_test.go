package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/app"
)

// contractSchema: parties are merged on their name (x-merge-key), the
// currency is a scalar whose later values are conflicts.
const contractSchema = `{
  "type": "object",
  "required": ["parties"],
  "properties": {
    "currency": {"type": ["string", "null"]},
    "parties": {"type": "array", "x-merge-key": ["name"],
      "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "role": {"type": "string"}}}}
  }
}`

// chunkServer speaks the OpenAI chat completions wire format and answers
// from the text it is given: every "PARTY=<name>" is a party ("ROLE=<r>"
// right after gives its role), the first "CUR=<c>" the currency. A text with
// FAIL in it gets an answer the schema refuses, until failing is turned off.
// It counts the calls per chunk (the part line names the chunk).
type chunkServer struct {
	*httptest.Server
	mu    sync.Mutex
	fail  bool
	calls map[string]int
}

var (
	partyRe = regexp.MustCompile(`PARTY=(\w+)(?: ROLE=(\w+))?`)
	curRe   = regexp.MustCompile(`CUR=(\w+)`)
	partRe  = regexp.MustCompile(`part (\d+) of (\d+)`)
)

func newChunkServer(t *testing.T) *chunkServer {
	t.Helper()
	s := &chunkServer{fail: true, calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/chat/completions" || len(req.Messages) < 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		task := req.Messages[1].Content // the user turn: instructions and input
		part := "whole"
		if m := partRe.FindStringSubmatch(task); m != nil {
			part = m[1]
		}
		s.mu.Lock()
		s.calls[part]++
		failing := s.fail
		s.mu.Unlock()
		answer := map[string]any{"parties": []any{}}
		for _, m := range partyRe.FindAllStringSubmatch(task, -1) {
			p := map[string]any{"name": m[1]}
			if m[2] != "" {
				p["role"] = m[2]
			}
			answer["parties"] = append(answer["parties"].([]any), p)
		}
		if m := curRe.FindStringSubmatch(task); m != nil {
			answer["currency"] = m[1]
		}
		content, _ := json.Marshal(answer)
		if failing && strings.Contains(task, "FAIL") {
			content = []byte(`{"parties": "none"}`)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + part, "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": string(content)}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *chunkServer) callsPerChunk() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func contractDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "contract.json"), []byte(contractSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// longContract is a document of paragraphs of about 150 characters: ACME
// is named in the first and the last paragraph, the currency EUR first and
// USD later, and fail puts FAIL in the fourth.
func longContract(fail bool) string {
	paras := []string{
		"This agreement is made between PARTY=ACME ROLE=seller and the buyer named below. All amounts are in CUR=EUR unless stated.",
		"The buyer is PARTY=Bob ROLE=buyer who agrees to the terms set out in the following clauses of this agreement, in full.",
		"Delivery shall take place within thirty days of signature. The seller bears the risk until delivery is complete and accepted.",
		"Payment is due within fourteen days of the invoice. Late payment accrues interest at the statutory rate, compounded monthly.",
		"Notices go to the parties at their registered addresses. Either party may change its address for notices by written notice.",
		"Amounts in the annex are in CUR=USD for reference only. The guarantor is PARTY=Carol ROLE=guarantor of the buyer's debts.",
		"Signed for and on behalf of PARTY=ACME by its director, on the date written at the head of this agreement, in two copies.",
	}
	if fail {
		paras[3] += " FAIL"
	}
	return strings.Join(paras, "\n\n")
}

func contractJob(t *testing.T, id, text string) string {
	t.Helper()
	line, err := json.Marshal(map[string]string{"id": id, "schema": "contract", "input": text})
	if err != nil {
		t.Fatal(err)
	}
	return string(line) + "\n"
}

// TestLongDocumentEndsOnceMerged: a document of seven paragraphs at
// --chunk-chars 300 becomes chunk jobs; once they ran, results shows the
// document once, its data the merge of the chunks (ACME once, its role from
// the first chunk; the currency EUR with USD as a conflict), its outcome
// counting the chunks, their ranges, attempts and tokens; results --chunks
// shows the chunks too. A short job beside it stays an ordinary job.
func TestLongDocumentEndsOnceMerged(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newChunkServer(t)
	dir, schemas := t.TempDir(), contractDir(t)
	in := contractJob(t, "deal-1", longContract(false)) + contractJob(t, "short-1", "A note from PARTY=Dan only.")
	out := mustCLI(t, in, "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "300", "--chunk-overlap", "40", "--json", "-")
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil {
		t.Fatalf("submit --json: %v\n%s", err, out)
	}
	if sub["chunks"] < 3 || sub["published"] != sub["chunks"]+1 {
		t.Fatalf("submit: %v, want at least 3 chunks plus the short job published", sub)
	}
	n := sub["chunks"]
	mustCLI(t, "", "run", "--data-dir", dir, "--schemas", schemas, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1", "--concurrency", "4")

	res := results(t, dir)
	if len(res) != 2 {
		t.Fatalf("results: %d lines, want the document and the short job:\n%v", len(res), res)
	}
	var doc map[string]any
	for _, r := range res {
		if r["job_id"] == "deal-1" {
			doc = r
		}
	}
	if doc == nil {
		t.Fatalf("no result for deal-1: %v", res)
	}
	data, _ := json.Marshal(doc["data"])
	if want := `{"currency":"EUR","parties":[{"name":"ACME","role":"seller"},{"name":"Bob","role":"buyer"},{"name":"Carol","role":"guarantor"}]}`; string(data) != want {
		t.Errorf("merged data\n got %s\nwant %s", data, want)
	}
	chunks, _ := json.Marshal(doc["chunks"])
	if want := `{"succeeded":` + itoa(n) + `,"total":` + itoa(n) + `}`; string(chunks) != want {
		t.Errorf("chunks %s, want %s", chunks, want)
	}
	conflicts, _ := json.Marshal(doc["conflicts"])
	if !strings.Contains(string(conflicts), `"path":"/currency"`) || !strings.Contains(string(conflicts), `"USD"`) {
		t.Errorf("conflicts %s: want /currency with EUR kept and USD from a later chunk", conflicts)
	}
	runs := doc["chunk_runs"].([]any)
	if len(runs) != n || doc["attempts"].(float64) != float64(n) || doc["prompt_tokens"].(float64) != float64(100*n) {
		t.Errorf("document: %d chunk runs, %v attempts, %v prompt tokens; want %d, %d, %d", len(runs), doc["attempts"], doc["prompt_tokens"], n, n, 100*n)
	}
	last := runs[len(runs)-1].(map[string]any)
	if last["end"].(float64) != float64(len([]rune(longContract(false)))) || runs[0].(map[string]any)["start"].(float64) != 0 {
		t.Errorf("chunk ranges do not cover the document: first %v, last %v", runs[0], last)
	}
	for part, c := range srv.callsPerChunk() {
		if c != 1 {
			t.Errorf("chunk %s: %d model calls, want 1", part, c)
		}
	}
	var rep struct {
		Conflicts []map[string]any `json:"conflicts"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--format", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(rep.Conflicts); string(got) != `[{"documents":1,"path":"/currency","schema":"contract","values":2}]` {
		t.Errorf("report conflicts %s, want /currency in 1 document", got)
	}
	if table := mustCLI(t, "", "report", "--data-dir", dir); !regexp.MustCompile(`MERGE CONFLICTS.*\n.*\ncontract +/currency +1 +2`).MatchString(table) {
		t.Errorf("report table without its merge conflicts:\n%s", table)
	}
	if page := mustCLI(t, "", "report", "--data-dir", dir, "--format", "html"); !strings.Contains(page, `id="conflicts-table"`) || !strings.Contains(page, "/currency") {
		t.Errorf("HTML report without its merge conflicts table")
	}
	all := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir, "--json", "--chunks"))
	if len(all) != n+2 {
		t.Errorf("results --chunks: %d lines, want %d chunks, the document and the short job", len(all), n)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestPartialDocumentReplayedToAResult: one chunk of a document fails the
// schema on every attempt; the document ends as one dead letter of class
// partial holding the merge of the others and naming the failed chunk.
// Once the model is fixed, dlq replay of the document runs only that chunk
// again, and the document ends as a result with every chunk merged.
func TestPartialDocumentReplayedToAResult(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newChunkServer(t)
	dir, schemas := t.TempDir(), contractDir(t)
	mustCLI(t, contractJob(t, "deal-2", longContract(true)), "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "300", "-")
	run := []string{"run", "--data-dir", dir, "--schemas", schemas, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL + "/v1", "--max-attempts", "2"}
	mustCLI(t, "", run...)

	if res := results(t, dir); len(res) != 0 {
		t.Fatalf("results of a partial document: %v, want none", res)
	}
	var dead map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "deal-2")), &dead); err != nil {
		t.Fatal(err)
	}
	if dead["class"] != "partial" {
		t.Fatalf("document dead letter class %v, want partial: %v", dead["class"], dead)
	}
	reason, _ := dead["reason"].(string)
	failedPart := ""
	for part, c := range srv.callsPerChunk() {
		if c == 2 {
			failedPart = part
		}
	}
	if failedPart == "" || !strings.Contains(reason, "deal-2#"+failedPart+" (no_progress") {
		t.Fatalf("reason %q does not name the failed chunk %q (calls %v)", reason, failedPart, srv.callsPerChunk())
	}
	data, _ := json.Marshal(dead["merged"])
	if !strings.Contains(string(data), `"ACME"`) {
		t.Errorf("partial data %s: want the merge of the chunks that succeeded", data)
	}
	chunks := dead["chunks"].(map[string]any)
	if chunks["succeeded"].(float64) != chunks["total"].(float64)-1 {
		t.Errorf("chunks %v: want all but one succeeded", chunks)
	}

	// The console's page of the document lists its chunks and conflicts.
	web, conn, st := console(t, dir, schemas)
	resp, err := http.Get(web.URL + "/dead-letters/deal-2")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`id="doc-chunks"`, "deal-2#" + failedPart, `id="doc-conflicts"`, "/currency", "USD"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("console page of deal-2 lacks %q", want)
		}
	}
	web.Close()
	st.Close()
	conn.Close()

	srv.mu.Lock()
	srv.fail = false
	srv.mu.Unlock()
	before := srv.callsPerChunk()
	mustCLI(t, "", "dlq", "replay", "--data-dir", dir, "deal-2")
	mustCLI(t, "", run...)
	after := srv.callsPerChunk()
	for part := range after {
		want := before[part]
		if part == failedPart {
			want++
		}
		if after[part] != want {
			t.Errorf("chunk %s: %d calls after the replay, want %d (only the failed chunk runs again)", part, after[part], want)
		}
	}
	res := results(t, dir)
	if len(res) != 1 || res[0]["job_id"] != "deal-2" {
		t.Fatalf("results after the replay: %v, want deal-2 once", res)
	}
	chunks = res[0]["chunks"].(map[string]any)
	if chunks["succeeded"] != chunks["total"] {
		t.Errorf("chunks %v after the replay: want all succeeded", chunks)
	}
	if list := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(list) != 0 {
		t.Errorf("dlq list after the replay: %v, want nothing left", list)
	}
}

// TestMergeThatFailsTheSchemaIsAMergeDeadLetter: every chunk of a document
// succeeds, but their parties together are more than the schema's
// maxItems: the document is a dead letter of class merge, holding the merge,
// the schema's diagnostics and every chunk's data.
func TestMergeThatFailsTheSchemaIsAMergeDeadLetter(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newChunkServer(t)
	dir, schemas := t.TempDir(), t.TempDir()
	bounded := strings.Replace(contractSchema, `"x-merge-key": ["name"],`, `"x-merge-key": ["name"], "maxItems": 2,`, 1)
	if err := os.WriteFile(filepath.Join(schemas, "contract.json"), []byte(bounded), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, contractJob(t, "deal-3", longContract(false)), "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "300", "-")
	mustCLI(t, "", "run", "--data-dir", dir, "--schemas", schemas, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1")
	var dead map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "deal-3")), &dead); err != nil {
		t.Fatal(err)
	}
	if dead["class"] != "merge" {
		t.Fatalf("class %v, want merge: %v", dead["class"], dead["reason"])
	}
	diags, _ := json.Marshal(dead["merge_diagnostics"])
	if !strings.Contains(string(diags), `"path":"/parties"`) || !strings.Contains(string(diags), "maxItems") {
		t.Errorf("merge diagnostics %s, want /parties maxItems", diags)
	}
	merged, _ := json.Marshal(dead["merged"])
	if !strings.Contains(string(merged), "Carol") {
		t.Errorf("merged %s, want all three parties", merged)
	}
	for _, c := range dead["chunk_runs"].([]any) {
		if c.(map[string]any)["data"] == nil {
			t.Errorf("chunk run %v has no data", c)
		}
	}
	if res := results(t, dir); len(res) != 0 {
		t.Errorf("results %v, want none: the document is a dead letter", res)
	}
}

// TestSubmitChunkingSettings: PIPELINE_CHUNK_CHARS splits the long jobs, a
// job's own "chunking" overrides it (chars 0 keeps it whole), a bad one is
// refused with its line, and submit counts the chunk jobs.
func TestSubmitChunkingSettings(t *testing.T) {
	dir, schemas := t.TempDir(), contractDir(t)
	text := longContract(false)
	line := func(id string, chunking string) string {
		l := strings.TrimSuffix(contractJob(t, id, text), "}\n")
		if chunking != "" {
			l += `,"chunking":` + chunking
		}
		return l + "}\n"
	}
	t.Setenv("PIPELINE_CHUNK_CHARS", "300")
	bad := line("deal-x", `{"chars":100,"overlap":60}`)
	_, errs, code := runCLI(t, bad, "submit", "--data-dir", dir, "--schemas", schemas, "-")
	if code == 0 || !strings.Contains(errs, "<stdin>:1:") || !strings.Contains(errs, `"chunking"`) {
		t.Fatalf("a bad chunking: exit %d, stderr %q; want its line and field named", code, errs)
	}
	in := line("deal-1", "") + line("deal-2", `{"chars":0}`) + line("deal-3", `{"chars":500,"overlap":50}`)
	var sub map[string]int
	if err := json.Unmarshal([]byte(mustCLI(t, in, "submit", "--data-dir", dir, "--schemas", schemas, "--json", "-")), &sub); err != nil {
		t.Fatal(err)
	}
	want := len(chunk.Split(text, 300, 0)) + len(chunk.Split(text, 500, 50))
	if sub["chunks"] != want || sub["published"] != want+1 {
		t.Errorf("submit %v: want %d chunks and the whole deal-2 published", sub, want)
	}
	human := mustCLI(t, contractJob(t, "deal-4", text), "submit", "--data-dir", dir, "--schemas", schemas, "-")
	if !strings.Contains(human, "of them chunks of long documents") {
		t.Errorf("human line %q does not count the chunks", human)
	}
}

// TestRerunOfALongDocumentIsRefused: --rerun and --rerun-changed refuse a
// line that would be split into chunks (naming FILE:LINE, the document and
// what to do instead), and publish nothing of the file; a short job beside
// it reruns as usual once the document is left out. Before, a rerun of a
// document that had ended republished its chunks one by one, and the
// document ended once per chunk, mixing its old and new runs.
func TestRerunOfALongDocumentIsRefused(t *testing.T) {
	t.Parallel()
	dir, schemas := t.TempDir(), contractDir(t)
	file := filepath.Join(t.TempDir(), "deals.jsonl")
	if err := os.WriteFile(file, []byte(contractJob(t, "short-1", "A note from PARTY=Dan only.")+contractJob(t, "deal.1 v2", longContract(false))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--rerun", "--rerun-changed"} {
		out, errs, code := runCLI(t, "", "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "300", flag, "--json", file)
		if code != exitNegative || !strings.Contains(errs, file+":2: ") || !strings.Contains(errs, `job "deal.1 v2" is a long document`) ||
			!strings.Contains(errs, "pipeline dlq replay deal.1 v2") {
			t.Errorf("submit %s: exit %d, stderr %q; want exit 1 naming %s:2 and the document", flag, code, errs, file)
		}
		var st map[string]int
		if err := json.Unmarshal([]byte(out), &st); err != nil || st["published"] != 0 {
			t.Errorf("submit %s: %q, want nothing published", flag, out)
		}
	}
	out := mustCLI(t, "", "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "300", "--json", file)
	var st map[string]int
	if err := json.Unmarshal([]byte(out), &st); err != nil || st["published"] != 1+st["chunks"] || st["chunks"] < 2 {
		t.Errorf("submit without --rerun: %q, want the short job and the document's chunks published", out)
	}
}

// TestSubmitRefusesTooManyChunks: a document that would be split into more
// than app.MaxChunks chunks is refused at FILE:LINE, naming the figures and
// the flag to raise, before anything is published (its state would not fit
// one message of the documents' bucket, and no chunk of it could end).
func TestSubmitRefusesTooManyChunks(t *testing.T) {
	t.Parallel()
	dir, schemas := t.TempDir(), contractDir(t)
	text := strings.Repeat("word ", 6*app.MaxChunks) // 30,000 characters a 5-character chunk
	_, errs, code := runCLI(t, contractJob(t, "big", text), "submit", "--data-dir", dir, "--schemas", schemas, "--chunk-chars", "5", "-")
	if code != exitNegative || !strings.Contains(errs, "<stdin>:1: ") || !strings.Contains(errs, "more than 5000 chunks") || !strings.Contains(errs, "--chunk-chars") {
		t.Errorf("exit %d, stderr %q; want exit 1 refusing the split at <stdin>:1", code, errs)
	}
}
