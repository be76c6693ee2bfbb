package batchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
