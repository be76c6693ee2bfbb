package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/schemas"
)

// Metrics are the worker's Prometheus metrics. Labels stay low-cardinality:
// schema ids, classes and attempt numbers, never job ids.
type Metrics struct {
	jobs             *prometheus.CounterVec
	attempts         *prometheus.HistogramVec
	healed           *prometheus.CounterVec
	transportRetries *prometheus.CounterVec
	modelLatency     *prometheus.HistogramVec
	tokens           *prometheus.CounterVec
	repairs          *prometheus.CounterVec
	cost             *prometheus.CounterVec
	// Gauges the caller sets (see Set*).
	InFlight      prometheus.Gauge
	Pending       prometheus.Gauge
	AckPending    prometheus.Gauge
	Breaker       *prometheus.GaugeVec
	DLQRows       prometheus.Gauge
	RetentionTrim prometheus.Counter
	// AlreadyDone counts deliveries acked without calling the model
	// because the job ledger says their run already ended.
	AlreadyDone prometheus.Counter
	// StoreErrors counts failed writes per store (nats, sqlite);
	// StoreFailing is 1 while a store cannot write at all.
	StoreErrors  *prometheus.CounterVec
	StoreFailing *prometheus.GaugeVec
	// RateLimitWait is the time model calls spent waiting for the rate
	// limiter, per provider; RateLimitMembers the processes sharing the
	// limit, as this one counts them.
	RateLimitWait    *prometheus.CounterVec
	RateLimitMembers *prometheus.GaugeVec

	// perSchema caches, per known schema id, the children a first-pass
	// job updates (*schemaMetrics): WithLabelValues hashes and looks up
	// its labels on every call.
	perSchema sync.Map
}

// schemaMetrics are one schema's children of the metrics every job
// updates.
type schemaMetrics struct {
	attempts         prometheus.Observer
	latency          prometheus.Observer
	promptFirst      prometheus.Counter
	completionFirst  prometheus.Counter
	promptHeal       prometheus.Counter
	completionHeal   prometheus.Counter
	succeeded        prometheus.Counter
	transportRetries prometheus.Counter
}

// forSchema returns schema's cached children. Only schemas of the
// registry get here, so the cache is as bounded as the labels.
func (m *Metrics) forSchema(schema string) *schemaMetrics {
	if v, ok := m.perSchema.Load(schema); ok {
		return v.(*schemaMetrics)
	}
	sm := &schemaMetrics{
		attempts:         m.attempts.WithLabelValues(schema),
		latency:          m.modelLatency.WithLabelValues(schema),
		promptFirst:      m.tokens.WithLabelValues(schema, "prompt", "first"),
		completionFirst:  m.tokens.WithLabelValues(schema, "completion", "first"),
		promptHeal:       m.tokens.WithLabelValues(schema, "prompt", "heal"),
		completionHeal:   m.tokens.WithLabelValues(schema, "completion", "heal"),
		succeeded:        m.jobs.WithLabelValues(schema, job.StatusSucceeded, ""),
		transportRetries: m.transportRetries.WithLabelValues(schema),
	}
	v, _ := m.perSchema.LoadOrStore(schema, sm)
	return v.(*schemaMetrics)
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_jobs_total", Help: "Jobs finished, by schema, outcome (succeeded, dead_lettered) and class.",
		}, []string{"schema", "outcome", "class"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pipeline_attempts_per_job", Help: "Model calls per finished job.", Buckets: []float64{1, 2, 3, 4, 5, 8},
		}, []string{"schema"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_heal_total", Help: "Jobs that needed healing, by schema and result (healed, failed).",
		}, []string{"schema", "result"}),
		transportRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_transport_retries_total", Help: "Model calls retried after a transport failure.",
		}, []string{"schema"}),
		modelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pipeline_model_latency_seconds", Help: "Latency of successful model calls.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"schema"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_model_tokens_total", Help: "Tokens used, by schema, kind (prompt, completion) and phase (first, heal).",
		}, []string{"schema", "kind", "phase"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_sanitizer_repairs_total", Help: "Sanitizer stages applied to model outputs.",
		}, []string{"schema", "stage"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_cost_usd_total", Help: "US dollars paid for answered model calls (failed attempts included), by provider and model spec; models priced nowhere add nothing.",
		}, []string{"provider", "model"}),
		InFlight:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipeline_jobs_in_flight", Help: "Jobs being worked on."}),
		Pending:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipeline_consumer_pending", Help: "Jobs waiting in the stream for the workers' consumer."}),
		AckPending:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipeline_consumer_ack_pending", Help: "Jobs delivered and not yet acknowledged."}),
		Breaker:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pipeline_breaker_state", Help: "1 for the model circuit breaker's current state (closed, open, half-open), 0 for the others."}, []string{"provider", "state"}),
		DLQRows:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "pipeline_dlq_rows", Help: "Dead letters in the index."}),
		RetentionTrim: prometheus.NewCounter(prometheus.CounterOpts{Name: "pipeline_dlq_retention_trimmed_total", Help: "Dead letters removed by retention."}),
		AlreadyDone: prometheus.NewCounter(prometheus.CounterOpts{Name: "pipeline_jobs_already_done_total",
			Help: "Job deliveries acked without calling the model because the job ledger says their run already ended."}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_store_errors_total", Help: "Failed writes, by store: nats (an outcome not stored on its stream, or the embedded store reporting a write error) and sqlite (a sink write to the index).",
		}, []string{"store"}),
		StoreFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pipeline_store_failing", Help: "1 while a store cannot write at all (disk full, I/O error; workers stop fetching while the nats store does), 0 otherwise.",
		}, []string{"store"}),
		RateLimitWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_ratelimit_wait_seconds_total", Help: "Time model calls spent waiting for the rate limiter (--rpm, --tpm, the provider's rate-limit headers) before they were sent.",
		}, []string{"provider"}),
		RateLimitMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pipeline_ratelimit_members", Help: "Processes sharing the model's rate limit, this one included, as this process counts them.",
		}, []string{"provider"}),
	}
	reg.MustRegister(m.jobs, m.attempts, m.healed, m.transportRetries, m.modelLatency, m.tokens, m.repairs, m.cost,
		m.InFlight, m.Pending, m.AckPending, m.Breaker, m.DLQRows, m.RetentionTrim, m.AlreadyDone, m.StoreErrors, m.StoreFailing,
		m.RateLimitWait, m.RateLimitMembers)
	return m
}

// outcome counts one finished job: every result and every dead letter goes
// through here, whatever decided it.
func (m *Metrics) outcome(schema, status, class string) {
	if m == nil {
		return
	}
	if status == job.StatusSucceeded && class == "" {
		// Only jobs of a schema of the registry succeed.
		m.forSchema(schema).succeeded.Inc()
		return
	}
	m.jobs.WithLabelValues(schema, status, class).Inc()
}

// observe records a heal loop's attempts, tokens, latency and repairs;
// schema is a schema of the registry.
func (m *Metrics) observe(schema string, res heal.Result) {
	if m == nil {
		return
	}
	sm := m.forSchema(schema)
	if n := len(res.Attempts); n > 0 {
		sm.attempts.Observe(float64(n))
		if n > 1 {
			r := "failed"
			if res.OK() {
				r = "healed"
			}
			m.healed.WithLabelValues(schema, r).Inc()
		}
	}
	for i, a := range res.Attempts {
		prompt, completion := sm.promptFirst, sm.completionFirst
		if i > 0 {
			prompt, completion = sm.promptHeal, sm.completionHeal
		}
		prompt.Add(float64(a.Usage.PromptTokens))
		completion.Add(float64(a.Usage.CompletionTokens))
		sm.latency.Observe(a.Latency.Seconds())
		if a.TransportRetries > 0 {
			sm.transportRetries.Add(float64(a.TransportRetries))
		}
		for _, st := range a.Stages {
			m.repairs.WithLabelValues(schema, st).Inc()
		}
	}
}

// metricSchema keeps the schema label bounded: ids of unknown schemas come
// from job authors and could be anything.
func metricSchema(id string, reg *schemas.Registry) string {
	if _, ok := reg.Get(id); ok {
		return id
	}
	return "_unknown"
}

// Paid adds the cost of one answered model call; safe on a nil Metrics.
// model is a model spec of the run's configuration (bounded).
func (m *Metrics) Paid(provider, model string, usd float64) {
	if m == nil {
		return
	}
	m.cost.WithLabelValues(provider, model).Add(usd)
}

// SetBreaker records the circuit breaker's state; safe on a nil Metrics.
func (m *Metrics) SetBreaker(provider, state string) {
	if m == nil {
		return
	}
	for _, s := range []string{"closed", "open", "half-open"} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.Breaker.WithLabelValues(provider, s).Set(v)
	}
}

// storeError counts one failed write to store; safe on a nil Metrics.
func (m *Metrics) storeError(store string) {
	if m == nil {
		return
	}
	m.StoreErrors.WithLabelValues(store).Inc()
}

// storeState records whether store cannot write at all; safe on a nil
// Metrics. The error counter's child is created too, so it reads 0
// before the first error.
func (m *Metrics) storeState(store string, failing bool) {
	if m == nil {
		return
	}
	m.StoreErrors.WithLabelValues(store)
	v := 0.0
	if failing {
		v = 1
	}
	m.StoreFailing.WithLabelValues(store).Set(v)
}

// RateLimitWaited adds a wait for the rate limiter; safe on a nil Metrics.
func (m *Metrics) RateLimitWaited(provider string, d time.Duration) {
	if m == nil {
		return
	}
	m.RateLimitWait.WithLabelValues(provider).Add(d.Seconds())
}

// SetRateLimitMembers records the fleet's size; safe on a nil Metrics.
// The wait counter's child is created too, so it reads 0 before the
// first wait.
func (m *Metrics) SetRateLimitMembers(provider string, n int) {
	if m == nil {
		return
	}
	m.RateLimitWait.WithLabelValues(provider)
	m.RateLimitMembers.WithLabelValues(provider).Set(float64(n))
}
