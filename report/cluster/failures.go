package cluster

import "github.com/llmpipeline/pipeline/job"

// Failure is one cluster's failure in one job run: where it first failed
// and whether the model fixed it before the run ended.
type Failure struct {
	// ID is the cluster: the ID of the failure's Fingerprint.
	ID string
	// Path is the path pattern (PathPattern of the diagnostic's path).
	Path    string
	Keyword string
	// Attempt is the number of the first attempt that failed on the
	// fingerprint (counted from 1 when the trace has no numbers), Seq the
	// position of that diagnostic in the attempt.
	Attempt, Seq int
	// Received is the value received there, as the diagnostic holds it.
	Received string
	// Fixed: the run's last validated attempt (see validated) came after
	// the failure, kept all its diagnostics (none omitted past the cap)
	// and had none with the fingerprint. A truncated or unparsable last
	// attempt proves nothing, so it does not count.
	Fixed bool

	inLast bool // the last validated attempt failed on it
}

// Grouper groups the diagnostics of outcomes into their failures, one per
// fingerprint per job run. It keeps the ids of the fingerprints it met, so
// the SHA-256 of a fingerprint is computed once however many runs fail on
// it. The zero value is ready; a Grouper is not safe for concurrent use.
type Grouper struct {
	ids map[key]val
}

// key is a diagnostic's fingerprint before its path becomes a pattern.
type key struct{ schema, version, path, keyword string }

type val struct{ id, pattern string }

// cluster returns the id and path pattern of a diagnostic's fingerprint.
func (g *Grouper) cluster(schema, version, path, keyword string) val {
	k := key{schema, version, path, keyword}
	if v, ok := g.ids[k]; ok {
		return v
	}
	if g.ids == nil {
		g.ids = make(map[key]val)
	}
	pat := PathPattern(path)
	v := val{id: ID(Fingerprint{Schema: schema, Version: version, Path: pat, Keyword: keyword}), pattern: pat}
	g.ids[k] = v
	return v
}

// Failures appends to dst the failures of o, one per fingerprint, in the
// order of their first diagnostic, and returns the extended slice.
func (g *Grouper) Failures(dst []Failure, o *job.Outcome) []Failure {
	start := len(dst)
	last := lastValidated(o.Trace)
	for k := range o.Trace {
		a := &o.Trace[k]
		for j := range a.Diagnostics {
			d := &a.Diagnostics[j]
			fp := g.cluster(o.Schema, o.SchemaVersion, d.Path, d.Keyword)
			f := -1
			for x := start; x < len(dst); x++ {
				if dst[x].ID == fp.id {
					f = x
					break
				}
			}
			if f < 0 {
				f = len(dst)
				dst = append(dst, Failure{ID: fp.id, Path: fp.pattern, Keyword: d.Keyword,
					Attempt: attemptN(a, k), Seq: j, Received: d.Received})
			}
			if k == last {
				dst[f].inLast = true
			}
		}
	}
	if last >= 0 && o.Trace[last].DiagnosticsOmitted == 0 {
		for x := start; x < len(dst); x++ {
			dst[x].Fixed = !dst[x].inLast
		}
	}
	return dst
}

// validated reports whether an attempt's output was parsed and validated,
// so its diagnostics (or their absence) say which fields were wrong: a
// valid or schema-failing attempt, or one with diagnostics.
func validated(a *job.Attempt) bool {
	return a.Class == job.ClassNone || a.Class == job.ClassSchema || len(a.Diagnostics) > 0
}

// lastValidated is the index in trace of the last validated attempt, -1
// when none was.
func lastValidated(trace []job.Attempt) int {
	for k := len(trace) - 1; k >= 0; k-- {
		if validated(&trace[k]) {
			return k
		}
	}
	return -1
}

// attemptN is an attempt's number, counted from 1 when the trace has none.
func attemptN(a *job.Attempt, k int) int {
	if a.N == 0 {
		return k + 1
	}
	return a.N
}
