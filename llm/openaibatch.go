package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

// OpenAI Batch API limits: requests and input file bytes per batch.
const (
	OpenAIBatchMaxRequests = 50000
	OpenAIBatchMaxBytes    = 200 << 20
	// openAIBatchKey is the metadata member that carries the caller's key.
	openAIBatchKey = "pipeline_key"
	// batchObjectLimit bounds a batch object or file object answer.
	batchObjectLimit = 4 << 20
	// batchLineLimit bounds one line of a results file.
	batchLineLimit = maxBody + bodyHeadroom
	// maxBatchErrors bounds the errors of a failed batch kept with its
	// record (one per request at most).
	maxBatchErrors = 1000
)

// OpenAIBatch speaks OpenAI's Batch API: the requests are uploaded as a
// JSONL file (POST /files, purpose batch), the batch is created on it
// (POST /batches, completion window 24h, our key in its metadata), polled
// (GET /batches/{id}), and its output and error files read
// (GET /files/{id}/content). Safe for concurrent use.
type OpenAIBatch struct {
	cfg  Config
	http batchHTTP
	m    mirror
	sync *OpenAI // the client the lines are written and read with
}

var _ Batcher = (*OpenAIBatch)(nil)

// NewOpenAIBatch returns the Batch API client for cfg (the synchronous
// client's Config; BaseURL ends in /v1).
func NewOpenAIBatch(cfg Config) (*OpenAIBatch, error) {
	sync, err := NewOpenAI(mirrorConfig(cfg))
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(ProviderOpenAI)
	b := &OpenAIBatch{cfg: cfg, m: mirror{complete: sync.Complete}, sync: sync}
	b.http.c = openAICaller(cfg)
	return b, nil
}

// Provider returns "openai".
func (b *OpenAIBatch) Provider() string { return ProviderOpenAI }

// Limits are 50,000 requests and 200 MB per batch.
func (b *OpenAIBatch) Limits() (int, int64) { return OpenAIBatchMaxRequests, OpenAIBatchMaxBytes }

type openAIBatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

type openAIBatchObject struct {
	ID           string `json:"id"`
	Object       string `json:"object"`
	Status       string `json:"status"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	CreatedAt    int64  `json:"created_at"`
	CompletedAt  int64  `json:"completed_at"`
	FailedAt     int64  `json:"failed_at"`
	ExpiredAt    int64  `json:"expired_at"`
	CancelledAt  int64  `json:"cancelled_at"`
	Errors       *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Metadata map[string]string `json:"metadata"`
}

func (b *OpenAIBatch) line(ctx context.Context, r BatchRequest) ([]byte, error) {
	body, err := b.m.body(ctx, r.Request)
	if err != nil {
		return nil, err
	}
	return json.Marshal(openAIBatchLine{CustomID: r.CustomID, Method: http.MethodPost, URL: "/v1/chat/completions", Body: body})
}

// Size is the length of the request's line in the input file, measured
// without reading its files (mirror.measure).
func (b *OpenAIBatch) Size(r BatchRequest) (int, error) {
	body, files, err := b.m.measure(context.Background(), r.Request)
	if err != nil {
		return 0, err
	}
	l, err := json.Marshal(openAIBatchLine{CustomID: r.CustomID, Method: http.MethodPost, URL: "/v1/chat/completions", Body: body})
	return len(l) + int(files) + 1, err
}

// ShareParams shares the parameters the model refused with the fleet, as
// OpenAI.ShareParams does: the lines of every batch are written without a
// parameter any process (or an earlier batch) was refused, and a refusal
// read from a batch's results is recorded for all.
func (b *OpenAIBatch) ShareParams(ctx context.Context, mem ParamMemory) error {
	return b.sync.ShareParams(ctx, mem)
}

// Create uploads the requests and creates the batch. What the fleet
// learned of the model's parameters is read first (ShareParams), so the
// batch holds none it was refused.
func (b *OpenAIBatch) Create(ctx context.Context, key string, reqs []BatchRequest) (BatchStatus, error) {
	_ = b.sync.recall(ctx, true) // logged; the batch goes out with what this process knows
	// The lines are written straight into the form's file part: the
	// upload is held once, not as a file and then as its form.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: writing the upload: %w", key, err)
	}
	fw, err := mw.CreateFormFile("file", key+".jsonl")
	if err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: writing the upload: %w", key, err)
	}
	for _, r := range reqs {
		l, err := b.line(ctx, r)
		if err != nil {
			return BatchStatus{}, fmt.Errorf("openai batch %s: request %s: %w", key, r.CustomID, err)
		}
		if _, err := fw.Write(append(l, '\n')); err != nil {
			return BatchStatus{}, fmt.Errorf("openai batch %s: writing the upload: %w", key, err)
		}
	}
	if err := mw.Close(); err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: writing the upload: %w", key, err)
	}
	data, err := b.http.do(ctx, http.MethodPost, b.cfg.endpoint("/files"), mw.FormDataContentType(), form.Bytes(), batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: uploading the requests: %w", key, err)
	}
	var f struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &f); err != nil || f.ID == "" {
		return BatchStatus{}, fmt.Errorf("openai batch %s: uploading the requests: no file id in %q", key, truncate(string(data), 200))
	}
	body, err := json.Marshal(map[string]any{
		"input_file_id":     f.ID,
		"endpoint":          "/v1/chat/completions",
		"completion_window": "24h",
		"metadata":          map[string]string{openAIBatchKey: key},
	})
	if err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: %w", key, err)
	}
	data, err = b.http.do(ctx, http.MethodPost, b.cfg.endpoint("/batches"), "application/json", body, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("openai batch %s: creating the batch: %w", key, err)
	}
	return b.status(data)
}

// Get reads a batch.
func (b *OpenAIBatch) Get(ctx context.Context, id string) (BatchStatus, error) {
	data, err := b.http.do(ctx, http.MethodGet, b.cfg.endpoint("/batches/"+url.PathEscape(id)), "", nil, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("reading openai batch %s: %w", id, err)
	}
	return b.status(data)
}

// Cancel cancels a batch (it goes through cancelling to cancelled).
func (b *OpenAIBatch) Cancel(ctx context.Context, id string) (BatchStatus, error) {
	data, err := b.http.do(ctx, http.MethodPost, b.cfg.endpoint("/batches/"+url.PathEscape(id)+"/cancel"), "", nil, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("cancelling openai batch %s: %w", id, err)
	}
	return b.status(data)
}

// findPages bounds how many pages of the batch list Find reads (100 each,
// newest first).
const findPages = 5

// Find looks through the newest batches for one whose metadata carries key.
func (b *OpenAIBatch) Find(ctx context.Context, key string) (BatchStatus, bool, error) {
	after := ""
	for page := 0; page < findPages; page++ {
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("after", after)
		}
		data, err := b.http.do(ctx, http.MethodGet, b.cfg.endpoint("/batches?"+q.Encode()), "", nil, 64<<20)
		if err != nil {
			return BatchStatus{}, false, fmt.Errorf("listing openai batches: %w", err)
		}
		var list struct {
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
			LastID  string            `json:"last_id"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return BatchStatus{}, false, fmt.Errorf("listing openai batches: %w", err)
		}
		for _, raw := range list.Data {
			st, err := b.status(raw)
			if err != nil {
				return BatchStatus{}, false, err
			}
			if st.Key == key {
				return st, true, nil
			}
		}
		if !list.HasMore || list.LastID == "" {
			break
		}
		after = list.LastID
	}
	return BatchStatus{}, false, nil
}

func (b *OpenAIBatch) status(data []byte) (BatchStatus, error) {
	var o openAIBatchObject
	if err := json.Unmarshal(data, &o); err != nil || o.ID == "" {
		return BatchStatus{}, fmt.Errorf("reading an openai batch object: unexpected %q", truncate(string(data), 200))
	}
	st := BatchStatus{
		Provider: ProviderOpenAI,
		ID:       o.ID,
		Status:   o.Status,
		Key:      o.Metadata[openAIBatchKey],
		Counts: BatchCounts{
			Total:     o.RequestCounts.Total,
			Succeeded: o.RequestCounts.Completed,
			Errored:   o.RequestCounts.Failed,
		},
	}
	st.Counts.Processing = max(st.Counts.Total-st.Counts.Succeeded-st.Counts.Errored, 0)
	if o.CreatedAt > 0 {
		st.CreatedAt = time.Unix(o.CreatedAt, 0).UTC()
	}
	switch o.Status {
	case "validating":
		st.State = BatchPending
	case "in_progress", "finalizing", "cancelling":
		st.State = BatchRunning
	case "completed":
		st.State = BatchEnded
		st.EndedAt = unixOr(o.CompletedAt)
	case "failed":
		st.State = BatchFailed
		st.EndedAt = unixOr(o.FailedAt)
		if o.Errors != nil && len(o.Errors.Data) > 0 {
			for i, e := range o.Errors.Data {
				if i == maxBatchErrors {
					break
				}
				be := BatchError{Code: truncate(e.Code, 80), Message: b.http.c.redact(truncate(e.Message, 300)), Param: truncate(e.Param, 80)}
				if e.Line != nil && *e.Line > 0 {
					be.Line = *e.Line
				}
				st.Errors = append(st.Errors, be)
			}
			e := st.Errors[0]
			st.Message = truncate(e.Code+": "+e.Message, 500)
			if n := len(o.Errors.Data); n > 1 {
				st.Message += fmt.Sprintf(" (and %d more)", n-1)
			}
		}
	case "expired":
		st.State = BatchExpired
		st.EndedAt = unixOr(o.ExpiredAt)
	case "cancelled":
		st.State = BatchCanceled
		st.EndedAt = unixOr(o.CancelledAt)
	default:
		st.State = BatchRunning
	}
	if st.Done() {
		st.Counts.Processing = 0
	}
	// The file ids travel in the status so Results needs no second read.
	st.outputs = []string{o.OutputFileID, o.ErrorFileID}
	return st, nil
}

func unixOr(s int64) time.Time {
	if s <= 0 {
		return time.Now().UTC().Truncate(time.Second)
	}
	return time.Unix(s, 0).UTC()
}

type openAIBatchOutput struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Results reads the output file, then the error file. A request with no
// line in either (an expired or cancelled batch) has no result: the caller
// knows its requests and treats the missing ones as unanswered.
func (b *OpenAIBatch) Results(ctx context.Context, st BatchStatus, want func(string) bool, fn func(BatchResult) error) error {
	if len(st.outputs) == 0 {
		fresh, err := b.Get(ctx, st.ID)
		if err != nil {
			return err
		}
		st = fresh
	}
	for _, id := range st.outputs {
		if id == "" {
			continue
		}
		err := b.http.stream(ctx, b.cfg.endpoint("/files/"+url.PathEscape(id)+"/content"), func(r io.Reader) error {
			return readResults(r, ProviderOpenAI, want, func(line []byte) (BatchResult, error) { return b.result(ctx, line) }, fn)
		})
		if err != nil {
			return fmt.Errorf("reading openai batch %s file %s: %w", st.ID, id, err)
		}
	}
	return nil
}

// result reads one output or error line.
func (b *OpenAIBatch) result(ctx context.Context, line []byte) (BatchResult, error) {
	var o openAIBatchOutput
	if err := json.Unmarshal(line, &o); err != nil {
		return BatchResult{}, fmt.Errorf("unreadable result line %q: %w", truncate(string(line), 120), err)
	}
	if o.CustomID == "" {
		return BatchResult{}, fmt.Errorf("result line without custom_id: %q", truncate(string(line), 120))
	}
	res := BatchResult{CustomID: o.CustomID, Type: ResultErrored}
	switch {
	case o.Response != nil && o.Response.StatusCode >= 200 && o.Response.StatusCode < 300:
		resp, err := b.m.answer(ctx, o.Response.Body)
		if err != nil {
			res.Err = err
			return res, nil
		}
		res.Type, res.Response = ResultSucceeded, resp
	case o.Response != nil && o.Response.StatusCode != 0:
		res.Err = b.m.failure(ctx, o.Response.StatusCode, o.Response.Body)
	case o.Error != nil:
		// A line the batch could not run at all (expired requests are
		// written so by some servers): not the answer's fault.
		kind := model.KindTransport
		if o.Error.Code == "batch_expired" || o.Error.Code == "batch_cancelled" {
			res.Type = ResultExpired
			if o.Error.Code == "batch_cancelled" {
				res.Type = ResultCanceled
			}
			return res, nil
		}
		res.Err = &model.Error{Kind: kind, Provider: ProviderOpenAI, Message: b.http.c.redact(truncate(o.Error.Code+": "+o.Error.Message, 500))}
	default:
		res.Err = &model.Error{Kind: model.KindTransport, Provider: ProviderOpenAI, Message: "result line with neither response nor error"}
	}
	return res, nil
}
