// Package cluster is the report's rule for grouping failures: a failure's
// Fingerprint (schema id + schema version + path pattern with array
// indices as "*" + keyword), its stable ID (versioned by
// FingerprintVersion, so a change of the rule gives new ids instead of
// silently regrouping old rows), and the failures of one job run (Grouper:
// one per fingerprint, at its first failing attempt, fixed or not by the
// run's end).
//
// It is the part of the report's analysis the index applies when it
// writes an outcome, so that the report reads clusters back with SQL over
// covering indexes instead of scanning payloads; it depends on nothing of
// ours but the job vocabulary, so both package index (below the report)
// and package report import it.
//
//	var g cluster.Grouper
//	for _, f := range g.Failures(nil, &outcome) {
//		fmt.Println(f.ID, f.Path, f.Keyword, f.Fixed)
//	}
package cluster
