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
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// billSchema grounds the vendor and the buyer and holds the total to a
// rule over three fields that no chunk sees together: on a chunk's answer
// it cannot be evaluated (a field is absent), and is left to the merge.
const billSchema = `{"type":"object","additionalProperties":false,
  "properties":{"vendor":{"type":"string","x-grounded":true},"buyer":{"type":"string","x-grounded":true},
    "subtotal":{"type":"number"},"tax":{"type":"number"},"total":{"type":"number"}},
  "x-rules":[{"rule":"self.total == self.subtotal + self.tax","message":"total must be subtotal + tax","path":"/total"}]}`

var billFields = map[string]*regexp.Regexp{
	"vendor":   regexp.MustCompile(`Sold by ([^\s,.]+)`),
	"buyer":    regexp.MustCompile(`bought by ([^\s,.]+)`),
	"subtotal": regexp.MustCompile(`Subtotal (\d+)`),
	"tax":      regexp.MustCompile(`Tax (\d+)`),
	"total":    regexp.MustCompile(`Total (\d+)`),
}

// billAnswers speaks the OpenAI chat completions wire format and answers
// with the fields the user turn's text names.
func billAnswers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		task := req.Messages[1].Content
		answer := map[string]any{}
		for name, re := range billFields {
			if m := re.FindStringSubmatch(task); m != nil {
				if name == "vendor" || name == "buyer" {
					answer[name] = m[1]
				} else {
					answer[name] = json.Number(m[1])
				}
			}
		}
		content, _ := json.Marshal(answer)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-bill", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": string(content)}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	})
}

// longBill is a bill of paragraphs of about 130 characters, with accents,
// CJK and emoji before its values: the vendor in the first paragraph, the
// subtotal, tax, buyer and total in later ones, each in a chunk of its own
// at --chunk-chars 300.
func longBill(total string) string {
	return strings.Join([]string{
		"🧾 請求書 Rechnung Nr. 7 — Sold by Müller, Straße 5, München. Alle Beträge in Euro, zahlbar binnen vierzehn Tagen ab Rechnungsdatum.",
		"Die Lieferung erfolgte am dritten März; die Ware wurde geprüft und ohne Beanstandung angenommen, wie im Lieferschein vermerkt ist.",
		"Position eins: Beratung vor Ort 😀, sechs Stunden zu je fünfzig Euro, abzüglich Rabatt. Subtotal 100 nach allen Abzügen gerechnet.",
		"Der Rabatt gilt nur für diese Rechnung und nicht für künftige Aufträge; er ist bereits im Betrag berücksichtigt, wie vereinbart.",
		"Die Umsatzsteuer beträgt neunzehn Prozent auf den Nettobetrag. Tax 19 wird gesondert ausgewiesen und an das Finanzamt abgeführt.",
		"Geliefert an die Firma Dvořák in Brno, bought by Dvořák, Tschechien; die Zollformalitäten erledigte der Käufer selbst wie üblich.",
		"Bitte überweisen Sie den Betrag auf das unten genannte Konto. Total " + total + " Euro, fällig am Ende des Monats. Vielen Dank, 谢谢.",
	}, "\n\n")
}

// TestChunkedDocumentTruthChecks: a document split at --chunk-chars 300
// whose grounded values lie in different chunks ends as a result whose
// grounding gives each value's offsets in the whole document (code points:
// input[start:end] is the value); a rule over fields no chunk sees
// together is checked on the merge, and a document whose total breaks it
// ends as a dead letter of class merge with the rule's diagnostic; no
// chunk is failed (nor healed) for the rule it cannot evaluate.
func TestChunkedDocumentTruthChecks(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	for _, mode := range []string{"sync", "batch"} {
		t.Run(mode, func(t *testing.T) { chunkedTruth(t, mode) })
	}
}

func chunkedTruth(t *testing.T, mode string) {
	dir, schemaDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(schemaDir, "bill.json"), []byte(billSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	good, bad := longBill("119"), longBill("120")
	var in strings.Builder
	for _, j := range []map[string]string{{"id": "bill-ok", "schema": "bill", "input": good}, {"id": "bill-bad", "schema": "bill", "input": bad}} {
		line, _ := json.Marshal(j)
		in.Write(append(line, '\n'))
	}
	out := mustCLI(t, in.String(), "submit", "--data-dir", dir, "--schemas", schemaDir, "--chunk-chars", "300", "--chunk-overlap", "40", "--json", "-")
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["chunks"] < 6 {
		t.Fatalf("submit: %s, want the two bills in at least 3 chunks each", out)
	}
	args := []string{"run", "--data-dir", dir, "--schemas", schemaDir, "--until-idle", "--model", "openai:m", "--concurrency", "4"}
	if mode == "batch" {
		srv := batchtest.New(batchtest.Config{Answer: billAnswers(), Key: "sk-test"})
		t.Cleanup(srv.Close)
		args = append(args, "--llm-url", srv.URL+"/v1", "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
	} else {
		srv := httptest.NewServer(billAnswers())
		t.Cleanup(srv.Close)
		args = append(args, "--llm-url", srv.URL+"/v1")
	}
	mustCLI(t, "", args...)

	chunks := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir, "--json", "--chunks"))
	for _, c := range chunks {
		if c["chunk"] != nil && c["attempts"].(float64) != 1 {
			t.Errorf("chunk %v: %v attempts, want 1 (a rule it cannot evaluate is the merge's)", c["job_id"], c["attempts"])
		}
	}
	if n := len(chunks) - 1; n != sub["chunks"] { // and the one document's result
		t.Errorf("%d chunk results, want %d", n, sub["chunks"])
	}
	res := results(t, dir)
	if len(res) != 1 || res[0]["job_id"] != "bill-ok" {
		t.Fatalf("results %v, want bill-ok alone", res)
	}
	doc := res[0]
	if data, _ := json.Marshal(doc["data"]); string(data) != `{"buyer":"Dvořák","subtotal":100,"tax":19,"total":119,"vendor":"Müller"}` {
		t.Errorf("merged data %s", data)
	}
	runs := doc["chunk_runs"].([]any)
	for _, r := range runs {
		if r := r.(map[string]any); r["attempts"].(float64) != 1 {
			t.Errorf("chunk %v: %v attempts, want 1 (a rule it cannot evaluate is the merge's)", r["job_id"], r["attempts"])
		}
	}
	firstEnd := int(runs[0].(map[string]any)["end"].(float64))
	gr, _ := doc["grounding"].([]any)
	if len(gr) != 2 {
		t.Fatalf("grounding %v, want the vendor and the buyer", doc["grounding"])
	}
	runes := []rune(good)
	want := map[string]string{"/vendor": "Müller", "/buyer": "Dvořák"}
	for _, g := range gr {
		g := g.(map[string]any)
		path := g["path"].(string)
		start, end := int(g["start"].(float64)), int(g["end"].(float64))
		if start < 0 || end > len(runes) || string(runes[start:end]) != want[path] || g["match"] != "exact" {
			t.Errorf("grounding %v does not slice the document to %q", g, want[path])
		}
		if path == "/buyer" && start < firstEnd {
			t.Errorf("the buyer at %d, within the first chunk [0, %d): offsets not in the whole document", start, firstEnd)
		}
	}

	var letter struct {
		Class            string `json:"class"`
		Reason           string `json:"reason"`
		Hint             string `json:"hint"`
		MergeDiagnostics []struct {
			Path, Keyword, Message string
		} `json:"merge_diagnostics"`
		Grounding []any `json:"grounding"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "bill-bad")), &letter); err != nil {
		t.Fatal(err)
	}
	if letter.Class != "merge" || len(letter.MergeDiagnostics) != 1 || letter.MergeDiagnostics[0].Keyword != "x-rules/0" ||
		letter.MergeDiagnostics[0].Path != "/total" || !strings.Contains(letter.MergeDiagnostics[0].Message, "total must be subtotal + tax") {
		t.Errorf("bill-bad: class %q, merge diagnostics %+v (%s); want merge with x-rules/0 at /total", letter.Class, letter.MergeDiagnostics, letter.Reason)
	}
	if !strings.Contains(letter.Hint, "x-rules") {
		t.Errorf("bill-bad: hint %q, want it to name the truth checks the merge failed", letter.Hint)
	}
	if len(letter.Grounding) != 0 {
		t.Errorf("bill-bad: a dead letter records grounding %v", letter.Grounding)
	}
}
