// Package deploy holds stoker's Kubernetes manifests (base/, a kustomize
// base: the workers; examples/: a training Job with its coordinator as a
// sidecar; prometheus-adapter/: the rule behind the HPA's metric) and the
// Slurm script (slurm/), and decodes the manifests for the tests that keep
// them honest.
//
// Decode takes YAML documents and returns each as its k8s.io/api type (or
// kustomize's Kustomization), strictly: a field the type does not have is
// an error, as kubectl's server-side field validation would make it.
package deploy
