// Package stokerv1 is stoker's wire contract (stoker.proto: the Feed and
// Work services, the job and transform specs, batches) and its generated
// Go code (buf generate; this file is the only one written by hand).
package stokerv1
