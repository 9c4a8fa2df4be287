//go:build lab

package main

// bin/stoker-lab (`make lab`): stoker with the benchmarks' share of the
// tests' harnesses linked (bench/lab), for `stoker bench store` and
// `stoker bench backpressure --scenario autoscale`. The product binary is
// built without the tag and links none of them.
import _ "github.com/stoker-dev/stoker/bench/lab"
