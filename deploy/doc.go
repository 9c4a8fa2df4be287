// Package deploy holds stoker's Kubernetes manifests (base/, a kustomize
// base: the workers, the dataset on a ReadOnlyMany claim;
// overlays/bucket/: the same workers reading the dataset from object
// storage, with workload identity or a Secret for credentials; examples/:
// a training Job with its coordinator as a sidecar, the same with the
// dataset in a bucket, and an overlay for another monitoring namespace;
// prometheus-adapter/: the rule behind the HPA's metric), the Slurm
// script (slurm/) and a Grafana dashboard (dashboard/stoker.json, whose
// every query the tests parse with Prometheus's own parser and check
// against `stoker metrics`), and decodes the manifests for the tests that
// keep them honest.
//
// It is a module of its own, so that the Kubernetes modules its tests need
// (k8s.io/api, kustomize) are no requirement of stoker's: the binary's
// module graph stays free of them. What the manifests ask of the stoker
// binary (the command lines of its containers, the metrics the HPA and the
// adapter rule read) is written to testdata/uses.json by this module's
// tests, which fail when it is stale (go test -update rewrites it); the
// main module's tests (cmd/stoker/deploy_test.go) check that file against
// serve's and drain's own flag sets and the metrics the server registers.
//
// Decode takes YAML documents and returns each as its k8s.io/api type (or
// kustomize's Kustomization), strictly: a field the type does not have is
// an error, as kubectl's server-side field validation would make it.
package deploy
