package main

import (
	"fmt"
	"os"
	"testing"
)

// The providers' API keys of the tests whose fake providers want any
// test key. TestMain sets them once for the process, so those tests can be
// parallel (t.Setenv cannot be used in a parallel test, and the key is
// only ever read from the environment). A test that needs another key, or
// another variable, sets it with t.Setenv and stays sequential: Go runs
// every sequential test before it resumes the parallel ones, and t.Setenv
// puts these values back.
const (
	testOpenAIKey    = "sk-test"
	testAnthropicKey = "sk-ant-test"
)

func TestMain(m *testing.M) {
	for k, v := range map[string]string{"OPENAI_API_KEY": testOpenAIKey, "ANTHROPIC_API_KEY": testAnthropicKey} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// wantTestKeys fails t unless the environment holds TestMain's keys: the
// test's fake provider accepts those (what t.Setenv set before the test
// became parallel).
func wantTestKeys(t *testing.T) {
	t.Helper()
	if got := os.Getenv("OPENAI_API_KEY"); got != testOpenAIKey {
		t.Fatalf("OPENAI_API_KEY is %q, want TestMain's %q", got, testOpenAIKey)
	}
	if got := os.Getenv("ANTHROPIC_API_KEY"); got != testAnthropicKey {
		t.Fatalf("ANTHROPIC_API_KEY is %q, want TestMain's %q", got, testAnthropicKey)
	}
}
