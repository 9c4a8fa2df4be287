// Package bench holds stoker's benchmark harnesses, run as `stoker bench
// SUB` (Run dispatches): pipeline (one machine's decode and augment rate
// per core), scale (scale-out over real `stoker serve` worker processes),
// load (many trainers, memory under load), backpressure (the window
// controller and the advisor against simulated trainers) and cost (the
// cost model's calibration and its check against every preset). Each but
// cost starts real `stoker serve` processes of the running executable
// (cost runs the pipeline on one locked thread); each measures side by
// side in one run and prints a table and, with --json, one JSON line.
// Two of them stand up the tests' harnesses (a real S3 server and a
// latency proxy for store, a DNS server for backpressure's autoscale
// scenario), which the product binary does not link: package bench/lab
// provides them (lab.go says how), in bin/stoker-lab (make lab).
// The PyTorch baselines (compare.py, e2e.py, baselines.py) live beside it,
// and timm_geometry.py (stoker's timm geometric ops against timm's PIL ones).
//
// The synthetic ImageFolder of stoker mkdata and of the harnesses run
// without --data (WriteSyntheticSet) is drawn in YCbCr at the JPEG's own
// resolutions and written by a baseline 4:2:0 JPEG writer of its own
// (synthjpeg.go: the standard's tables, libjpeg's integer DCT), with
// about a third of image/jpeg's CPU for the same files.
package bench
