package index

import "testing"

// embeddedMigrations is the number of migrations embedded (their versions
// need not be contiguous: each issue takes its own number).
func embeddedMigrations(t *testing.T) int {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}
