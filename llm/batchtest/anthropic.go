package batchtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

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
