package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

// Message Batches limits: requests and bytes per batch.
const (
	AnthropicBatchMaxRequests = 100000
	AnthropicBatchMaxBytes    = 256 << 20
)

// AnthropicBatch speaks Anthropic's Message Batches API: POST
// /v1/messages/batches with the requests ({custom_id, params}), polled
// (GET /v1/messages/batches/{id}), results read from results_url once the
// batch has ended. Safe for concurrent use.
type AnthropicBatch struct {
	cfg  Config
	http batchHTTP
	m    mirror
}

var _ Batcher = (*AnthropicBatch)(nil)

// NewAnthropicBatch returns the Message Batches client for cfg (the
// synchronous client's Config).
func NewAnthropicBatch(cfg Config) (*AnthropicBatch, error) {
	sync, err := NewAnthropic(mirrorConfig(cfg))
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(ProviderAnthropic)
	b := &AnthropicBatch{cfg: cfg, m: mirror{complete: sync.Complete}}
	b.http.c = anthropicCaller(cfg)
	return b, nil
}

// Provider returns "anthropic".
func (b *AnthropicBatch) Provider() string { return ProviderAnthropic }

// Limits are 100,000 requests and 256 MB per batch.
func (b *AnthropicBatch) Limits() (int, int64) {
	return AnthropicBatchMaxRequests, AnthropicBatchMaxBytes
}

type anthropicBatchRequest struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

type anthropicBatchObject struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	ProcessingStatus string `json:"processing_status"`
	RequestCounts    struct {
		Processing int `json:"processing"`
		Succeeded  int `json:"succeeded"`
		Errored    int `json:"errored"`
		Canceled   int `json:"canceled"`
		Expired    int `json:"expired"`
	} `json:"request_counts"`
	CreatedAt         time.Time  `json:"created_at"`
	EndedAt           *time.Time `json:"ended_at"`
	CancelInitiatedAt *time.Time `json:"cancel_initiated_at"`
	ResultsURL        *string    `json:"results_url"`
}

func (b *AnthropicBatch) request(ctx context.Context, r BatchRequest) (anthropicBatchRequest, error) {
	body, err := b.m.body(ctx, r.Request)
	if err != nil {
		return anthropicBatchRequest{}, err
	}
	return anthropicBatchRequest{CustomID: r.CustomID, Params: body}, nil
}

// Size is the length of the request's entry in the batch body, measured
// without reading its files (mirror.measure).
func (b *AnthropicBatch) Size(r BatchRequest) (int, error) {
	body, files, err := b.m.measure(context.Background(), r.Request)
	if err != nil {
		return 0, err
	}
	l, err := json.Marshal(anthropicBatchRequest{CustomID: r.CustomID, Params: body})
	return len(l) + int(files) + 1, err
}

// Create submits the batch. Message Batches keep no metadata, so key is
// not sent: Find cannot find the batch by it.
func (b *AnthropicBatch) Create(ctx context.Context, key string, reqs []BatchRequest) (BatchStatus, error) {
	body := struct {
		Requests []anthropicBatchRequest `json:"requests"`
	}{Requests: make([]anthropicBatchRequest, 0, len(reqs))}
	for _, r := range reqs {
		e, err := b.request(ctx, r)
		if err != nil {
			return BatchStatus{}, fmt.Errorf("anthropic batch %s: request %s: %w", key, r.CustomID, err)
		}
		body.Requests = append(body.Requests, e)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("anthropic batch %s: %w", key, err)
	}
	out, err := b.http.do(ctx, http.MethodPost, b.cfg.endpoint("/v1/messages/batches"), "application/json", data, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("anthropic batch %s: creating the batch: %w", key, err)
	}
	return b.status(out)
}

// Get reads a batch.
func (b *AnthropicBatch) Get(ctx context.Context, id string) (BatchStatus, error) {
	data, err := b.http.do(ctx, http.MethodGet, b.cfg.endpoint("/v1/messages/batches/"+url.PathEscape(id)), "", nil, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("reading anthropic batch %s: %w", id, err)
	}
	return b.status(data)
}

// Cancel cancels a batch (canceling, then ended with canceled results).
func (b *AnthropicBatch) Cancel(ctx context.Context, id string) (BatchStatus, error) {
	data, err := b.http.do(ctx, http.MethodPost, b.cfg.endpoint("/v1/messages/batches/"+url.PathEscape(id)+"/cancel"), "", nil, batchObjectLimit)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("cancelling anthropic batch %s: %w", id, err)
	}
	return b.status(data)
}

// Find cannot find a batch by key: Message Batches keep no metadata.
func (b *AnthropicBatch) Find(context.Context, string) (BatchStatus, bool, error) {
	return BatchStatus{}, false, nil
}

func (b *AnthropicBatch) status(data []byte) (BatchStatus, error) {
	var o anthropicBatchObject
	if err := json.Unmarshal(data, &o); err != nil || o.ID == "" {
		return BatchStatus{}, fmt.Errorf("reading an anthropic message batch: unexpected %q", truncate(string(data), 200))
	}
	c := o.RequestCounts
	st := BatchStatus{
		Provider:  ProviderAnthropic,
		ID:        o.ID,
		Status:    o.ProcessingStatus,
		CreatedAt: o.CreatedAt.UTC(),
		Counts: BatchCounts{
			Total:      c.Processing + c.Succeeded + c.Errored + c.Canceled + c.Expired,
			Processing: c.Processing,
			Succeeded:  c.Succeeded,
			Errored:    c.Errored,
			Canceled:   c.Canceled,
			Expired:    c.Expired,
		},
	}
	switch o.ProcessingStatus {
	case "ended":
		// One word for every end: the results say, per request, whether
		// it was answered, cancelled or expired.
		st.State = BatchEnded
		switch {
		case c.Succeeded+c.Errored == 0 && c.Canceled > 0:
			st.State = BatchCanceled
		case c.Succeeded+c.Errored == 0 && c.Expired > 0:
			st.State = BatchExpired
		}
		st.EndedAt = time.Now().UTC().Truncate(time.Second)
		if o.EndedAt != nil {
			st.EndedAt = o.EndedAt.UTC()
		}
	default: // in_progress, canceling
		st.State = BatchRunning
	}
	if o.ResultsURL != nil && *o.ResultsURL != "" {
		st.outputs = []string{*o.ResultsURL}
	}
	return st, nil
}

type anthropicBatchResult struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	} `json:"result"`
}

// Results reads the results file of an ended batch.
func (b *AnthropicBatch) Results(ctx context.Context, st BatchStatus, want func(string) bool, fn func(BatchResult) error) error {
	if len(st.outputs) == 0 {
		fresh, err := b.Get(ctx, st.ID)
		if err != nil {
			return err
		}
		st = fresh
	}
	if len(st.outputs) == 0 {
		return fmt.Errorf("anthropic batch %s (%s) has no results_url", st.ID, st.Status)
	}
	u := st.outputs[0]
	if !b.sameHost(u) {
		return fmt.Errorf("anthropic batch %s: results_url is not on the API's host: the key is not sent elsewhere", st.ID)
	}
	err := b.http.stream(ctx, u, func(r io.Reader) error {
		return readResults(r, ProviderAnthropic, want, func(line []byte) (BatchResult, error) { return b.result(ctx, line) }, fn)
	})
	if err != nil {
		return fmt.Errorf("reading anthropic batch %s results: %w", st.ID, err)
	}
	return nil
}

// sameHost reports whether u is on the base URL's scheme and host, where
// the key may go.
func (b *AnthropicBatch) sameHost(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	base, err := url.Parse(b.cfg.BaseURL)
	return err == nil && strings.EqualFold(p.Host, base.Host) && p.Scheme == base.Scheme
}

func (b *AnthropicBatch) result(ctx context.Context, line []byte) (BatchResult, error) {
	var o anthropicBatchResult
	if err := json.Unmarshal(line, &o); err != nil {
		return BatchResult{}, fmt.Errorf("unreadable result line %q: %w", truncate(string(line), 120), err)
	}
	if o.CustomID == "" {
		return BatchResult{}, fmt.Errorf("result line without custom_id: %q", truncate(string(line), 120))
	}
	res := BatchResult{CustomID: o.CustomID, Type: o.Result.Type}
	switch o.Result.Type {
	case ResultSucceeded:
		resp, err := b.m.answer(ctx, o.Result.Message)
		if err != nil {
			res.Type, res.Err = ResultErrored, err
		} else {
			res.Response = resp
		}
	case ResultErrored:
		res.Err = b.errored(o.Result.Error)
	case ResultCanceled, ResultExpired:
	default:
		res.Type = ResultErrored
		res.Err = &model.Error{Kind: model.KindTransport, Provider: ProviderAnthropic, Message: "unknown result type " + truncate(o.Result.Type, 40)}
	}
	return res, nil
}

// errored reads an errored result's error ({"type":"error","error":{...}}):
// an invalid request is the request's fault (not retried); any other error
// (api_error, overloaded_error) is transport; a refused key or an account
// without credit stops the run.
func (b *AnthropicBatch) errored(raw json.RawMessage) error {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	kind, status := model.KindTransport, 0
	switch e.Error.Type {
	case "invalid_request_error", "not_found_error", "request_too_large":
		kind, status = model.KindRequest, http.StatusBadRequest
	case "authentication_error", "permission_error":
		kind, status = model.KindAuth, http.StatusUnauthorized
	case "billing_error":
		kind, status = model.KindNoCredit, http.StatusPaymentRequired
	}
	msg := anthropicErrorMessage(raw)
	return &model.Error{Kind: kind, Provider: ProviderAnthropic, StatusCode: status, Message: b.http.c.redact(msg), KeyEnv: b.cfg.KeyEnv}
}
