package main

import (
	"fmt"
	"time"
)

// The latency cases size themselves to whole rounds of K jobs: about 12 s
// of rounds at L = 200 ms, and at least 5000 jobs from K = 64 up.
func Example_jobsFor() {
	for _, k := range []int{1, 16, 64, 256, 1024} {
		fmt.Println(k, jobsFor(k, 200*time.Millisecond, 12*time.Second, 5000))
	}
	// Output:
	// 1 60
	// 16 960
	// 64 5056
	// 256 15360
	// 1024 61440
}

func Example_parseBenchLine() {
	l, _ := parseBenchLine("./report", "BenchmarkBuild/dead=1M-2  2  566828660 ns/op  120.0 clusters  784648 B/op  16682 allocs/op")
	fmt.Println(l.Name, time.Duration(l.Values["ns/op"]).Round(time.Millisecond), l.Values["clusters"])
	// Output: BenchmarkBuild/dead=1M 567ms 120
}
