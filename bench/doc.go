// Package bench holds stoker's benchmark harnesses, run as `stoker bench
// SUB` (Run dispatches): pipeline (one machine's decode and augment rate
// per core), scale (scale-out over real `stoker serve` worker processes),
// load (many trainers, memory under load) and backpressure (the window
// controller and the advisor against simulated trainers). Each starts
// real `stoker serve` processes of the running executable, measures side
// by side in one run, and prints a table and, with --json, one JSON line.
// The PyTorch baselines (compare.py, e2e.py, baselines.py) live beside it.
package bench
