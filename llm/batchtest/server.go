// Package batchtest is a provider's batch endpoints for tests: an
// httptest server speaking OpenAI's Batch API (files, batches, output and
// error files) and Anthropic's Message Batches (batches, results JSONL).
// Each request of a batch is answered by an ordinary synchronous handler
// (Config.Answer), so any test server of the chat endpoints answers
// batches too. Results are written in the reverse order of the requests,
// as the providers allow.
package batchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says how the server behaves.
type Config struct {
	// Answer answers one request of a batch as the synchronous endpoint
	// would: POST /v1/chat/completions (OpenAI) or /v1/messages
	// (Anthropic) with the request's body. Required.
	Answer http.Handler
	// Hold keeps new batches in progress until Release (or Expire); by
	// default a batch ends at its first poll.
	Hold bool
	// Key is the API key every call must carry (Authorization: Bearer for
	// OpenAI, x-api-key for Anthropic); "" accepts any. SetKey changes it
	// (a key revoked while batches are in flight).
	Key string
	// Refuse, if set, validates each request of an OpenAI batch (its body)
	// as the provider does while the batch is "validating": a non-nil
	// error fails the whole batch, the errors of every refused line in
	// its errors.data (Line is set by the server, 1 for the first line;
	// a Line below 0 is left out: an error that names no line).
	Refuse func(body []byte) *ErrorData
	// EnqueuedTokenLimit, if set, is the organisation's enqueued-token
	// limit of OpenAI's Batch API: a batch whose requests' tokens (their
	// bodies' bytes over four), with those of the batches in progress,
	// exceed it fails while validating with token_limit_exceeded.
	EnqueuedTokenLimit int
	// Break, if set, may rewrite each line of a results file (an output
	// or error file, Anthropic's results) as it is written: a broken line.
	Break func(customID string, line []byte) []byte
	// Twice, if set, answers the requests it names twice: two lines of
	// the same custom_id, each from its own call of Answer.
	Twice func(customID string) bool
	// Stray lines of custom ids no request has, each about StrayBytes
	// long, end every OpenAI output file; they are made as the file is
	// served, never held.
	Stray      int
	StrayBytes int
	// Throttle, if set, sees every request first: a wait above zero
	// answers it 429 (rate_limit_error) asking for that wait, in the
	// headers each provider sends (OpenAI: retry-after-ms and
	// Retry-After; Anthropic: retry-after, whole seconds rounded up).
	Throttle func(r *http.Request) time.Duration
}

// ErrorData is one item of the errors.data of a failed OpenAI batch
// object (openai-openapi: Batch.errors.data[]).
type ErrorData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// Server is the fake provider. Its URL serves both wire formats: OpenAI
// under /v1/files and /v1/batches (base URL URL+"/v1"), Anthropic under
// /v1/messages/batches (base URL URL); and the synchronous endpoints
// (/v1/chat/completions, /v1/messages) through Config.Answer.
type Server struct {
	*httptest.Server
	cfg Config

	mu        sync.Mutex
	files     map[string][]byte
	batches   map[string]*batch
	order     []string // batch ids, oldest first
	submitted []string // every custom_id ever accepted, in order
	creates   int
	unauth    int // calls refused for their key
}

type batch struct {
	id, provider string
	status       string // the provider's word
	customIDs    []string
	bodies       [][]byte
	metadata     map[string]string
	created      time.Time
	ended        time.Time
	held         bool
	answered     map[string]bool // custom ids with a result line
	results      []byte          // anthropic results, or openai output file
	outputID     string
	errorID      string
	counts       [5]int // succeeded, errored, canceled, expired, total
	errors       []ErrorData
	tokens       int // the requests' tokens, as the enqueued-token limit counts them
}

// New starts a server; it is closed when the test ends (t.Cleanup by the
// caller, via Close).
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, files: map[string][]byte{}, batches: map[string]*batch{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Submitted returns every custom_id the server accepted in a batch, in
// order (a custom_id twice means a request was submitted twice).
func (s *Server) Submitted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.submitted)
}

// Creates is how many batches were created.
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// Batches returns the ids of the batches created, oldest first.
func (s *Server) Batches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Status is a batch's provider status word ("" for an unknown id).
func (s *Server) Status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batches[id]; b != nil {
		return b.status
	}
	return ""
}

// SetKey changes the key every call must carry.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Key = key
}

// Unauthorized is how many calls were refused for their key.
func (s *Server) Unauthorized() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unauth
}

// Failed returns the errors.data of a failed batch (nil otherwise).
func (s *Server) Failed(id string) []ErrorData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batches[id]; b != nil {
		return slices.Clone(b.errors)
	}
	return nil
}

// SetEnqueuedTokenLimit changes Config.EnqueuedTokenLimit.
func (s *Server) SetEnqueuedTokenLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.EnqueuedTokenLimit = n
}

// Tokens is a batch's requests' tokens as the enqueued-token limit counts
// them (their bodies' bytes over four).
func (s *Server) Tokens(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batches[id]; b != nil {
		return b.tokens
	}
	return 0
}

// Requests returns the custom ids of a batch, in its order.
func (s *Server) Requests(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batches[id]; b != nil {
		return slices.Clone(b.customIDs)
	}
	return nil
}

// Release lets a held batch end at its next poll.
func (s *Server) Release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.batches[id]; b != nil {
		b.held = false
	}
}

// SetHold changes Config.Hold for batches created from now on.
func (s *Server) SetHold(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Hold = hold
}

// Expire ends a batch as expired once its first answered requests are
// answered: those get results, the others none (OpenAI) or an expired
// result (Anthropic).
func (s *Server) Expire(id string, answered int) {
	s.finishWith(id, answered, "expired")
}

// CancelNow cancels a batch as the provider would on a cancel request,
// with its first answered requests answered.
func (s *Server) CancelNow(id string, answered int) {
	s.finishWith(id, answered, "cancelled")
}

func (s *Server) finishWith(id string, answered int, how string) {
	s.mu.Lock()
	b := s.batches[id]
	s.mu.Unlock()
	if b == nil {
		return
	}
	s.finish(b, answered, how)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	anthropic := strings.HasPrefix(p, "/v1/messages/batches")
	if !s.authorized(r, anthropic) {
		s.mu.Lock()
		s.unauth++
		s.mu.Unlock()
		if anthropic {
			writeJSON(w, http.StatusUnauthorized, errorBody(true, "authentication_error", "invalid x-api-key"))
			return
		}
		// OpenAI's answer to a wrong key: 401, invalid_request_error,
		// code invalid_api_key.
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"message": "Incorrect API key provided: sk-*****. You can find your API key at https://platform.openai.com/account/api-keys.",
			"type":    "invalid_request_error", "param": nil, "code": "invalid_api_key"}})
		return
	}
	if s.cfg.Throttle != nil {
		if wait := s.cfg.Throttle(r); wait > 0 {
			secs := strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
			w.Header().Set("retry-after", secs)
			if !anthropic {
				w.Header().Set("retry-after-ms", strconv.FormatInt(wait.Milliseconds(), 10))
			}
			if anthropic {
				writeJSON(w, http.StatusTooManyRequests, errorBody(true, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"))
				return
			}
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
				"message": "Rate limit reached for requests", "type": "requests", "param": nil, "code": "rate_limit_exceeded"}})
			return
		}
	}
	switch {
	case p == "/v1/chat/completions" || p == "/v1/messages":
		// The synchronous endpoints, for calls outside a batch.
		s.cfg.Answer.ServeHTTP(w, r)
	case anthropic:
		s.serveAnthropic(w, r, strings.TrimPrefix(p, "/v1/messages/batches"))
	case p == "/v1/files" && r.Method == http.MethodPost:
		s.upload(w, r)
	case strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")
		s.mu.Lock()
		data, ok := s.files[id]
		stray, size := s.cfg.Stray, s.cfg.StrayBytes
		s.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, errorBody(false, "invalid_request_error", "No such File object: "+id))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
		if strings.HasPrefix(id, "file-out-") {
			writeStray(w, id, stray, size)
		}
	case strings.HasPrefix(p, "/v1/batches"):
		s.serveOpenAI(w, r, strings.TrimPrefix(p, "/v1/batches"))
	default:
		writeJSON(w, http.StatusNotFound, errorBody(false, "invalid_request_error", "unknown path "+p))
	}
}

func (s *Server) authorized(r *http.Request, anthropic bool) bool {
	s.mu.Lock()
	key := s.cfg.Key
	s.mu.Unlock()
	if key == "" {
		return true
	}
	if anthropic {
		return r.Header.Get("x-api-key") == key && r.Header.Get("anthropic-version") != ""
	}
	return r.Header.Get("Authorization") == "Bearer "+key
}

func (s *Server) create(provider string, ids []string, bodies [][]byte, meta map[string]string) *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates++
	prefix := "batch_"
	status := "validating"
	if provider == "anthropic" {
		prefix, status = "msgbatch_", "in_progress"
	}
	b := &batch{id: fmt.Sprintf("%s%04d", prefix, s.creates), provider: provider, status: status, customIDs: ids, bodies: bodies,
		metadata: meta, created: time.Now().UTC(), held: s.cfg.Hold, answered: map[string]bool{}}
	b.counts[4] = len(ids)
	for _, body := range bodies {
		b.tokens += len(body) / 4
	}
	s.batches[b.id] = b
	s.order = append(s.order, b.id)
	s.submitted = append(s.submitted, ids...)
	return b
}

func (s *Server) get(id string) *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[id]
}

// poll moves a batch along: validating to in_progress (or failed), and,
// unless held, to its end with every request answered.
func (s *Server) poll(b *batch) {
	s.mu.Lock()
	if b.status == "validating" {
		if errs := s.validate(b); len(errs) > 0 {
			b.status, b.errors, b.ended = "failed", errs, time.Now().UTC()
			s.mu.Unlock()
			return
		}
		b.status = "in_progress"
	}
	run := (b.status == "in_progress") && !b.held
	s.mu.Unlock()
	if run {
		s.finish(b, len(b.customIDs), "")
	}
}

// finish answers the first n requests and ends the batch: completed
// (how ""), "expired" or "cancelled".
func (s *Server) finish(b *batch, n int, how string) {
	s.mu.Lock()
	if b.status != "validating" && b.status != "in_progress" {
		s.mu.Unlock()
		return
	}
	ids, bodies := b.customIDs, b.bodies
	s.mu.Unlock()
	type line struct {
		id     string
		status int
		body   []byte
	}
	var lines []line
	for i := range min(n, len(ids)) {
		status, body := s.answer(b.provider, bodies[i])
		lines = append(lines, line{ids[i], status, body})
		if s.cfg.Twice != nil && s.cfg.Twice(ids[i]) {
			// Written before the first one: lines are in reverse order.
			status, body := s.answer(b.provider, bodies[i])
			lines = append(lines, line{ids[i], status, body})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writeLine := func(w *bytes.Buffer, v map[string]any) {
		var l bytes.Buffer
		writeLine(&l, v)
		if s.cfg.Break != nil {
			id, _ := v["custom_id"].(string)
			w.Write(s.cfg.Break(id, l.Bytes()))
			return
		}
		w.Write(l.Bytes())
	}
	var out, errs bytes.Buffer
	// Reverse order: the providers do not keep the input's order.
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		ok := l.status >= 200 && l.status < 300
		if !b.answered[l.id] {
			if ok {
				b.counts[0]++
			} else {
				b.counts[1]++
			}
		}
		b.answered[l.id] = true
		if b.provider == "openai" {
			obj := map[string]any{"id": "batch_req_" + strconv.Itoa(i), "custom_id": l.id,
				"response": map[string]any{"status_code": l.status, "request_id": "req_" + strconv.Itoa(i), "body": json.RawMessage(l.body)}, "error": nil}
			dst := &out
			if !ok {
				dst = &errs
			}
			writeLine(dst, obj)
			continue
		}
		var result map[string]any
		if ok {
			result = map[string]any{"type": "succeeded", "message": json.RawMessage(l.body)}
		} else {
			result = map[string]any{"type": "errored", "error": json.RawMessage(l.body)}
		}
		writeLine(&out, map[string]any{"custom_id": l.id, "result": result})
	}
	for _, id := range ids {
		if b.answered[id] {
			continue
		}
		if how == "cancelled" {
			b.counts[2]++
		} else {
			b.counts[3]++
		}
		if b.provider == "anthropic" {
			typ := "expired"
			if how == "cancelled" {
				typ = "canceled"
			}
			writeLine(&out, map[string]any{"custom_id": id, "result": map[string]any{"type": typ}})
		}
	}
	b.ended = time.Now().UTC()
	if b.provider == "anthropic" {
		b.status = "ended"
		b.results = out.Bytes()
		return
	}
	b.status = "completed"
	if how != "" {
		b.status = how
	}
	if out.Len() > 0 {
		b.outputID = fmt.Sprintf("file-out-%s", b.id)
		s.files[b.outputID] = out.Bytes()
	}
	if errs.Len() > 0 {
		b.errorID = fmt.Sprintf("file-err-%s", b.id)
		s.files[b.errorID] = errs.Bytes()
	}
}

func (s *Server) answer(provider string, body []byte) (int, []byte) {
	path := "/v1/chat/completions"
	if provider == "anthropic" {
		path = "/v1/messages"
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Key)
		req.Header.Set("x-api-key", s.cfg.Key)
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	rec := httptest.NewRecorder()
	s.cfg.Answer.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func writeLine(w *bytes.Buffer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errorBody(anthropic bool, typ, msg string) map[string]any {
	if anthropic {
		return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}}
}
