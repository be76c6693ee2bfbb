package llm

// Batch clients: the providers' asynchronous batch endpoints (OpenAI's Batch
// API, Anthropic's Message Batches), which take the same requests as the
// synchronous endpoints at a discount and answer within a window.
//
// A batch line carries exactly the body the synchronous client would POST,
// and an answer is read exactly as a synchronous answer is: both go through
// the provider's own Complete, pointed at an in-process transport that
// records the request body, or replays an answer from the batch's results.
// So the batch path can never drift from the synchronous one (response
// formats, tool modes, refusals, the body bound and finish reasons).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

// Batch states, normalised from the providers' words.
const (
	BatchPending  = "pending"  // accepted, not answering yet (validating)
	BatchRunning  = "running"  // in progress, finalizing, cancelling
	BatchEnded    = "ended"    // results can be read (completed, ended)
	BatchFailed   = "failed"   // the provider refused the whole batch
	BatchExpired  = "expired"  // the window passed: unanswered requests have no result
	BatchCanceled = "canceled" // cancelled: unanswered requests have no result
)

// Result types of one batch request.
const (
	ResultSucceeded = "succeeded"
	ResultErrored   = "errored"
	ResultCanceled  = "canceled"
	ResultExpired   = "expired"
	// ResultUnreadable is a line of the results that could not be read (a
	// truncated download, a provider bug): CustomID is the line's when it
	// could still be made out, else ""; Err says which line and why.
	ResultUnreadable = "unreadable"
)

// BatchErrTokenLimit is the code of an OpenAI batch failed because the
// organisation's enqueued-token limit for the model was reached: not the
// requests' fault; they fit once batches in flight have finished.
const BatchErrTokenLimit = "token_limit_exceeded"

// BatchError is one reason the provider gives for failing a whole batch
// (OpenAI's errors.data of the batch object).
type BatchError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Param   string `json:"param,omitempty"`
	// Line is the input file's line the error is about (1 is the first
	// request), 0 when it names none.
	Line int `json:"line,omitempty"`
}

// enqueuedLimit reads the limit out of the message of a
// token_limit_exceeded error ("... Limit: 2,000,000 enqueued tokens. ...").
var enqueuedLimit = regexp.MustCompile(`(?i)limit:\s*([0-9][0-9,_]*)\s*enqueued tokens`)

// EnqueuedTokenLimit is the enqueued-token limit a token_limit_exceeded
// message names, if it names one.
func EnqueuedTokenLimit(msg string) (int, bool) {
	m := enqueuedLimit.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.NewReplacer(",", "", "_", "").Replace(m[1]))
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// BatchRequest is one request of a batch: the synchronous request and the
// id its answer comes back under.
type BatchRequest struct {
	CustomID string
	Request  model.Request
}

// BatchCounts are a batch's request counts.
type BatchCounts struct {
	Total      int `json:"total"`
	Processing int `json:"processing"`
	Succeeded  int `json:"succeeded"`
	Errored    int `json:"errored"`
	Canceled   int `json:"canceled,omitzero"`
	Expired    int `json:"expired,omitzero"`
}

// BatchStatus is what the provider says of one batch.
type BatchStatus struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	// State is normalised (BatchPending ... BatchCanceled); Status is the
	// provider's own word.
	State  string      `json:"state"`
	Status string      `json:"status"`
	Counts BatchCounts `json:"request_counts"`
	// Key is the key the batch was created with (OpenAI keeps it in the
	// batch's metadata; Anthropic keeps none, and Key is "").
	Key       string    `json:"key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Message explains a failed batch (the provider's first error, "code:
	// message"), or says what batch mode did about it.
	Message string `json:"message,omitempty"`
	// Errors are the provider's reasons for failing the batch.
	Errors []BatchError `json:"errors,omitempty"`
	// outputs are where the results are read: OpenAI's output and error
	// file ids, Anthropic's results URL. Empty in a status read back from
	// storage: Results reads the batch again then.
	outputs []string
}

// Done reports whether the batch will change no more: its results, if
// any, can be read.
func (s BatchStatus) Done() bool {
	switch s.State {
	case BatchEnded, BatchFailed, BatchExpired, BatchCanceled:
		return true
	}
	return false
}

// BatchResult is the answer to one request of a batch.
type BatchResult struct {
	CustomID string
	// Type is ResultSucceeded (Response holds the answer), ResultErrored
	// (Err is a *model.Error: KindTransport for a 5xx or an overloaded
	// provider, KindRequest for a request the provider refused, KindAuth
	// for a refused key), ResultCanceled or ResultExpired (no answer), or
	// ResultUnreadable (Err says which line and why).
	Type     string
	Response model.Response
	Err      error
}

// Batcher is one provider's batch endpoint.
type Batcher interface {
	// Provider names the provider ("openai", "anthropic").
	Provider() string
	// Create submits reqs as one batch. key is the caller's name for the
	// batch (kept in the batch's metadata where the provider has any, so
	// Find can tell whether a create whose answer was lost went through).
	Create(ctx context.Context, key string, reqs []BatchRequest) (BatchStatus, error)
	// Get reads a batch's status.
	Get(ctx context.Context, id string) (BatchStatus, error)
	// Find looks for a recent batch created with key; found is false when
	// there is none, or the provider cannot say (Anthropic keeps no key).
	Find(ctx context.Context, key string) (st BatchStatus, found bool, err error)
	// Results streams the results of a done batch to fn, in the order the
	// provider writes them (not the order of the requests). A line whose
	// custom id want refuses is dropped as it is read, unparsed (want nil
	// takes every line); a line that cannot be read is handed on as
	// ResultUnreadable and the reading goes on.
	Results(ctx context.Context, st BatchStatus, want func(customID string) bool, fn func(BatchResult) error) error
	// Cancel asks the provider to cancel a batch.
	Cancel(ctx context.Context, id string) (BatchStatus, error)
	// Size is the most bytes a request's line may take in a batch,
	// estimated from its encoding (for the provider's byte limit).
	Size(r BatchRequest) (int, error)
	// Limits are the provider's per-batch limits: requests and bytes.
	Limits() (requests int, bytes int64)
}

// NewBatcher returns the batch client of provider ("openai" or
// "anthropic") over cfg, the synchronous client's configuration.
func NewBatcher(provider string, cfg Config) (Batcher, error) {
	switch provider {
	case ProviderOpenAI:
		return NewOpenAIBatch(cfg)
	case ProviderAnthropic:
		return NewAnthropicBatch(cfg)
	default:
		return nil, fmt.Errorf("%w: provider %q has no batch endpoint (want openai or anthropic)", ErrConfig, provider)
	}
}

// mirror runs a synchronous client's Complete against an in-process
// transport, to get the body it would POST, or to read a body as its
// answer.
type mirror struct {
	complete func(ctx context.Context, req model.Request) (model.Response, error)
}

type mirrorKey struct{}

// mirrorCall is one call through the in-process transport: the request
// body it saw and the answer (status and body) it gives.
type mirrorCall struct {
	sent   []byte
	status int
	answer []byte
	// measure asks for the body without its files' base64 (sent), and
	// the base64's length (fileBytes): a line is measured without reading
	// a file.
	measure   bool
	fileBytes int64
}

// mirrorTransport records the request body of the call in the request's
// context and answers with the call's canned answer (a 599 without one, so
// the client reports a failure and the caller keeps the body).
type mirrorTransport struct{}

func (mirrorTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	call, _ := r.Context().Value(mirrorKey{}).(*mirrorCall)
	if call == nil {
		return nil, errors.New("mirror transport used outside a batch call")
	}
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		call.sent = b
	}
	status, body := call.status, call.answer
	if status == 0 {
		status, body = 599, []byte(`{"error":{"message":"batch line recorded"}}`)
	}
	return &http.Response{
		StatusCode:    status,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// mirrorConfig is cfg for the in-process client: no retries, no hook, no
// rate-limit reading (the batch endpoints have their own).
func mirrorConfig(cfg Config) Config {
	cfg.HTTPClient = &http.Client{Transport: mirrorTransport{}}
	cfg.TransportRetries = -1
	cfg.OnResponse = nil
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Timeout = time.Hour
	return cfg
}

// body is the request body the synchronous client would POST for req.
func (m mirror) body(ctx context.Context, req model.Request) ([]byte, error) {
	call := &mirrorCall{}
	_, err := m.complete(context.WithValue(ctx, mirrorKey{}, call), req)
	if call.sent == nil {
		if err == nil {
			err = errors.New("no request was sent")
		}
		return nil, fmt.Errorf("encoding a batch request: %w", err)
	}
	return call.sent, nil
}

// measure is body with every file's base64 left out, and the length of
// what was left out: the line's size, without reading any file. Base64
// needs no escaping in JSON, so the line with the files is exactly that
// much longer.
func (m mirror) measure(ctx context.Context, req model.Request) ([]byte, int64, error) {
	call := &mirrorCall{measure: true}
	_, err := m.complete(context.WithValue(ctx, mirrorKey{}, call), req)
	if call.sent == nil {
		if err == nil {
			err = errors.New("no request was sent")
		}
		return nil, 0, fmt.Errorf("encoding a batch request: %w", err)
	}
	return call.sent, call.fileBytes, nil
}

// answer reads body, a 2xx answer of the synchronous endpoint, as the
// synchronous client would.
func (m mirror) answer(ctx context.Context, body []byte) (model.Response, error) {
	call := &mirrorCall{status: http.StatusOK, answer: body}
	return m.complete(context.WithValue(ctx, mirrorKey{}, call), model.Request{})
}

// failure reads a non-2xx answer (status, body) of the synchronous
// endpoint as the synchronous client would: a *model.Error of the kind the
// status says.
func (m mirror) failure(ctx context.Context, status int, body []byte) error {
	call := &mirrorCall{status: status, answer: body}
	_, err := m.complete(context.WithValue(ctx, mirrorKey{}, call), model.Request{})
	if err == nil {
		return &model.Error{Kind: model.KindTransport, StatusCode: status, Message: "unexpected answer"}
	}
	return err
}

// errLineTooLong is a line of a results file over the line limit: it is
// skipped, the lines after it are read.
var errLineTooLong = errors.New("line over the limit")

// readLines calls fn with every non-empty line of r (a JSONL file) and its
// number. A line over maxLine bytes is passed cut at maxLine, with
// errLineTooLong; the rest of it is skipped unread into memory. An error
// of fn stops the reading; so does a read error of r.
func readLines(r io.Reader, maxLine int, fn func(n int, line []byte, err error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, long, err := readLine(br, maxLine)
		if long {
			if ferr := fn(n, line, errLineTooLong); ferr != nil {
				return fmt.Errorf("line %d: %w", n, ferr)
			}
		} else if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(n, line, nil); ferr != nil {
				return fmt.Errorf("line %d: %w", n, ferr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
}

// readLine reads one line; over maxLine bytes, it keeps the first maxLine
// and discards the rest (long is set).
func readLine(br *bufio.Reader, maxLine int) (line []byte, long bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(buf)+len(chunk) > maxLine {
				buf = append(buf, chunk[:maxLine-len(buf)]...)
				long = true
			} else {
				buf = append(buf, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, long, err
		}
	}
}

// customIDOf makes out the custom_id of a results line that does not
// parse (cut short, say): the top-level members are read in order until
// custom_id; "" when the line breaks before it.
func customIDOf(line []byte) string {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := t.(string)
		if key == "custom_id" {
			var id string
			if dec.Decode(&id) != nil {
				return ""
			}
			return id
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// unreadable is the result of a line that could not be read.
func unreadable(provider string, n int, line []byte, err error) BatchResult {
	return BatchResult{CustomID: customIDOf(line), Type: ResultUnreadable,
		Err: &model.Error{Kind: model.KindTransport, Provider: provider,
			Message: fmt.Sprintf("unreadable result line %d (%s): %s", n, err, truncate(strconv.Quote(string(line)), 120))}}
}

// readResults streams the results file r: each line's custom id is read
// first, and the lines want refuses are dropped before the answer in it
// is parsed; parse reads a line (an error: the line is unreadable).
func readResults(r io.Reader, provider string, want func(string) bool, parse func([]byte) (BatchResult, error), fn func(BatchResult) error) error {
	return readLines(r, batchLineLimit, func(n int, line []byte, err error) error {
		if err != nil {
			return fn(unreadable(provider, n, line, err))
		}
		var head struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return fn(unreadable(provider, n, line, err))
		}
		if head.CustomID == "" {
			return fn(unreadable(provider, n, line, errors.New("no custom_id")))
		}
		if want != nil && !want(head.CustomID) {
			return nil
		}
		res, err := parse(line)
		if err != nil {
			return fn(unreadable(provider, n, line, err))
		}
		return fn(res)
	})
}

// batchHTTP sends the batch endpoints' requests with the synchronous
// client's transport retry policy.
type batchHTTP struct {
	c caller
}

// do sends one request and returns its 2xx body (at most limit bytes),
// retrying as a model call does (retrier). Failures are *model.Error.
func (b *batchHTTP) do(ctx context.Context, method, url, contentType string, body []byte, limit int64) ([]byte, error) {
	r := retrier{c: &b.c, doing: "calling the batch endpoint"}
	for {
		data, f := b.once(ctx, method, url, contentType, body, limit)
		if f == nil {
			return data, nil
		}
		if err := r.next(ctx, f); err != nil {
			return nil, err
		}
	}
}

func (b *batchHTTP) once(ctx context.Context, method, url, contentType string, body []byte, limit int64) ([]byte, *failure) {
	rctx, cancel := context.WithTimeout(ctx, b.c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, url, rd)
	if err != nil {
		return nil, &failure{kind: model.KindRequest, message: "building the request: " + err.Error()}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	b.c.setHeaders(req.Header)
	resp, err := b.c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, b.c.transportFailure(rctx, err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	max := int64(maxErrorBody)
	if ok {
		max = limit
	}
	data, over, err := readBounded(resp, max)
	if err != nil {
		return nil, b.c.transportFailure(rctx, fmt.Errorf("reading the response: %w", err))
	}
	if ok {
		if over {
			return nil, &failure{kind: model.KindTransport, status: resp.StatusCode, message: fmt.Sprintf("answer over %d bytes", limit)}
		}
		return data, nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, redirectFailure(resp)
	}
	f := &failure{kind: kindOf(resp.StatusCode, data), status: resp.StatusCode, message: b.c.errMessage(data)}
	if f.message == "" {
		f.message = http.StatusText(resp.StatusCode)
	}
	if f.kind == model.KindTransport {
		f.retryAfter, f.hasAfter = retryAfter(resp.Header, time.Now())
	}
	return nil, f
}

// stream sends a GET and hands the 2xx body to fn unread, for results
// files of any size. Only the request is retried (retrier), never a body
// half read.
func (b *batchHTTP) stream(ctx context.Context, url string, fn func(io.Reader) error) error {
	r := retrier{c: &b.c, doing: "reading batch results"}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return &model.Error{Kind: model.KindRequest, Provider: b.c.provider, Message: "building the request: " + err.Error()}
		}
		b.c.setHeaders(req.Header)
		resp, err := b.c.cfg.HTTPClient.Do(req)
		var f *failure
		if err != nil {
			f = &failure{kind: model.KindTransport, message: err.Error()}
		} else if resp.StatusCode < 200 || resp.StatusCode > 299 {
			data, _, _ := readBounded(resp, maxErrorBody)
			_ = resp.Body.Close()
			f = &failure{kind: kindOf(resp.StatusCode, data), status: resp.StatusCode, message: b.c.errMessage(data)}
			if f.kind == model.KindTransport {
				f.retryAfter, f.hasAfter = retryAfter(resp.Header, time.Now())
			}
		} else {
			err := fn(resp.Body)
			_ = resp.Body.Close()
			return err
		}
		if err := r.next(ctx, f); err != nil {
			return err
		}
	}
}
