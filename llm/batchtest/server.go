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
	"io"
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

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(256 << 20); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "unreadable upload: "+err.Error()))
		return
	}
	if r.FormValue("purpose") != "batch" {
		writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "purpose must be batch"))
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "no file"))
		return
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	s.mu.Lock()
	id := fmt.Sprintf("file-%03d", len(s.files)+1)
	s.files[id] = data
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "bytes": len(data), "created_at": time.Now().Unix(),
		"filename": hdr.Filename, "purpose": "batch", "status": "processed"})
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, rest string) {
	switch {
	case rest == "" && r.Method == http.MethodPost:
		var req struct {
			InputFileID      string            `json:"input_file_id"`
			Endpoint         string            `json:"endpoint"`
			CompletionWindow string            `json:"completion_window"`
			Metadata         map[string]string `json:"metadata"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Endpoint != "/v1/chat/completions" || req.CompletionWindow != "24h" {
			writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "want input_file_id, endpoint /v1/chat/completions, completion_window 24h"))
			return
		}
		s.mu.Lock()
		data, ok := s.files[req.InputFileID]
		s.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "no such file"))
			return
		}
		var ids []string
		var bodies [][]byte
		for line := range bytes.Lines(data) {
			var l struct {
				CustomID string          `json:"custom_id"`
				Method   string          `json:"method"`
				URL      string          `json:"url"`
				Body     json.RawMessage `json:"body"`
			}
			if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" || l.Method != "POST" || l.URL != "/v1/chat/completions" {
				writeJSON(w, http.StatusBadRequest, errorBody(false, "invalid_request_error", "bad input line "+strconv.Quote(string(line))))
				return
			}
			ids = append(ids, l.CustomID)
			bodies = append(bodies, l.Body)
		}
		b := s.create("openai", ids, bodies, req.Metadata)
		writeJSON(w, http.StatusOK, s.openAIObject(b))
	case rest == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		var data []any
		for i := len(s.order) - 1; i >= 0; i-- {
			if b := s.batches[s.order[i]]; b.provider == "openai" {
				data = append(data, s.openAIObjectLocked(b))
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": false})
	default:
		id, cancel := strings.CutSuffix(strings.TrimPrefix(rest, "/"), "/cancel")
		b := s.get(id)
		if b == nil || b.provider != "openai" {
			writeJSON(w, http.StatusNotFound, errorBody(false, "invalid_request_error", "No batch found with id '"+id+"'."))
			return
		}
		if cancel {
			s.finish(b, 0, "cancelled")
		} else {
			s.poll(b)
		}
		writeJSON(w, http.StatusOK, s.openAIObject(b))
	}
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, rest string) {
	switch {
	case rest == "" && r.Method == http.MethodPost:
		var req struct {
			Requests []struct {
				CustomID string          `json:"custom_id"`
				Params   json.RawMessage `json:"params"`
			} `json:"requests"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Requests) == 0 {
			writeJSON(w, http.StatusBadRequest, errorBody(true, "invalid_request_error", "requests: want a non-empty list"))
			return
		}
		var ids []string
		var bodies [][]byte
		for _, q := range req.Requests {
			if q.CustomID == "" || len(q.CustomID) > 64 || len(q.Params) == 0 {
				writeJSON(w, http.StatusBadRequest, errorBody(true, "invalid_request_error", "custom_id: 1 to 64 characters; params required"))
				return
			}
			ids = append(ids, q.CustomID)
			bodies = append(bodies, q.Params)
		}
		b := s.create("anthropic", ids, bodies, nil)
		writeJSON(w, http.StatusOK, s.anthropicObject(b))
	default:
		id := strings.TrimPrefix(rest, "/")
		id, results := strings.CutSuffix(id, "/results")
		id, cancel := strings.CutSuffix(id, "/cancel")
		b := s.get(id)
		if b == nil || b.provider != "anthropic" {
			writeJSON(w, http.StatusNotFound, errorBody(true, "not_found_error", "batch "+id+" not found"))
			return
		}
		switch {
		case results:
			s.mu.Lock()
			data, ended := b.results, b.status == "ended"
			s.mu.Unlock()
			if !ended {
				writeJSON(w, http.StatusBadRequest, errorBody(true, "invalid_request_error", "batch has not ended"))
				return
			}
			w.Header().Set("Content-Type", "application/x-jsonl")
			_, _ = w.Write(data)
			return
		case cancel:
			s.finish(b, 0, "cancelled")
		default:
			s.poll(b)
		}
		writeJSON(w, http.StatusOK, s.anthropicObject(b))
	}
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

// writeStray writes n output lines of custom ids no request has, each
// about size bytes, one at a time.
func writeStray(w io.Writer, file string, n, size int) {
	content := strings.Repeat("x", max(size-300, 1))
	for i := range n {
		var buf bytes.Buffer
		writeLine(&buf, map[string]any{"id": fmt.Sprintf("batch_req_stray_%d", i), "custom_id": fmt.Sprintf("stray-%s-%d", file, i),
			"response": map[string]any{"status_code": 200, "request_id": "req_stray", "body": map[string]any{
				"id": "chatcmpl-stray", "object": "chat.completion", "model": "gpt-4o-mini",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}}, "error": nil})
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
	}
}

// validate is what OpenAI does while a batch is "validating": each line
// is checked (Config.Refuse), then the enqueued-token limit. It returns
// the errors that fail the batch. Called with s.mu held.
func (s *Server) validate(b *batch) []ErrorData {
	var errs []ErrorData
	if s.cfg.Refuse != nil {
		for i, body := range b.bodies {
			if e := s.cfg.Refuse(body); e != nil {
				e := *e
				if e.Line < 0 {
					e.Line = 0
				} else {
					e.Line = i + 1
				}
				errs = append(errs, e)
			}
		}
	}
	if len(errs) > 0 || s.cfg.EnqueuedTokenLimit <= 0 {
		return errs
	}
	enqueued := 0
	for _, o := range s.batches {
		if o != b && o.provider == "openai" && (o.status == "in_progress" || o.status == "finalizing") {
			enqueued += o.tokens
		}
	}
	if enqueued+b.tokens > s.cfg.EnqueuedTokenLimit {
		return []ErrorData{{Code: "token_limit_exceeded", Message: fmt.Sprintf("Enqueued token limit reached for gpt-4o-mini in organization org-test. Limit: %s enqueued tokens. Please try again once some in_progress batches have been completed.", thousands(s.cfg.EnqueuedTokenLimit))}}
	}
	return nil
}

// thousands writes n as OpenAI's messages do: 2,000,000.
func thousands(n int) string {
	d := strconv.Itoa(n)
	var out []byte
	for i := range len(d) {
		if i > 0 && (len(d)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, d[i])
	}
	return string(out)
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

func (s *Server) openAIObject(b *batch) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openAIObjectLocked(b)
}

func (s *Server) openAIObjectLocked(b *batch) map[string]any {
	at := func(state string) any {
		if b.status == state {
			return b.ended.Unix()
		}
		return nil
	}
	nilIfEmpty := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var errs any
	if len(b.errors) > 0 {
		data := make([]map[string]any, 0, len(b.errors))
		for _, e := range b.errors {
			var param, line any
			if e.Param != "" {
				param = e.Param
			}
			if e.Line > 0 {
				line = e.Line
			}
			data = append(data, map[string]any{"code": e.Code, "message": e.Message, "param": param, "line": line})
		}
		errs = map[string]any{"object": "list", "data": data}
	}
	return map[string]any{
		"id": b.id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": errs,
		"input_file_id": "file-in", "completion_window": "24h", "status": b.status,
		"output_file_id": nilIfEmpty(b.outputID), "error_file_id": nilIfEmpty(b.errorID),
		"created_at": b.created.Unix(), "in_progress_at": nil, "expires_at": b.created.Add(24 * time.Hour).Unix(),
		"finalizing_at": nil, "completed_at": at("completed"), "failed_at": at("failed"), "expired_at": at("expired"),
		"cancelling_at": nil, "cancelled_at": at("cancelled"),
		"request_counts": map[string]any{"total": b.counts[4], "completed": b.counts[0], "failed": b.counts[1]},
		"metadata":       b.metadata,
	}
}

func (s *Server) anthropicObject(b *batch) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ended, results any
	if b.status == "ended" {
		ended = b.ended.Format(time.RFC3339Nano)
		results = s.URL + "/v1/messages/batches/" + b.id + "/results"
	}
	processing := b.counts[4] - b.counts[0] - b.counts[1] - b.counts[2] - b.counts[3]
	return map[string]any{
		"id": b.id, "type": "message_batch", "processing_status": b.status,
		"request_counts": map[string]any{"processing": processing, "succeeded": b.counts[0], "errored": b.counts[1],
			"canceled": b.counts[2], "expired": b.counts[3]},
		"ended_at": ended, "created_at": b.created.Format(time.RFC3339Nano), "expires_at": b.created.Add(24 * time.Hour).Format(time.RFC3339Nano),
		"archived_at": nil, "cancel_initiated_at": nil, "results_url": results,
	}
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
