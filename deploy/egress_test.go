package deploy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// egressAllowed says whether NetworkPolicies pols let a pod with
// podLabels in namespace ns open a connection to ip:port over proto, as
// the API defines it: a pod no policy of its namespace selects for Egress
// may reach anything; a selected one only what some selecting policy's
// rule admits (every port when a rule names none, every destination when
// it names no peer; an address only through an ipBlock, a pod selector
// never matching a bare address). Named ports match no bare address
// either.
func egressAllowed(t *testing.T, pols []*networkingv1.NetworkPolicy, ns string, podLabels map[string]string,
	proto corev1.Protocol, ip netip.Addr, port int32) bool {
	t.Helper()
	isolated := false
	for _, p := range pols {
		if p.Namespace != ns || !selects(t, &p.Spec.PodSelector, podLabels) || !hasEgress(p) {
			continue
		}
		isolated = true
		for _, r := range p.Spec.Egress {
			if portMatches(r.Ports, proto, port) && peerMatches(t, r.To, ip) {
				return true
			}
		}
	}
	return !isolated
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(podLabels))
}

// hasEgress: the policy isolates egress; without policyTypes, when it has
// egress rules (the API's default).
func hasEgress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

func portMatches(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type != 0 { // a named port: a bare address has none
			continue
		}
		lo, hi := p.Port.IntVal, p.Port.IntVal
		if p.EndPort != nil {
			hi = *p.EndPort
		}
		if lo <= port && port <= hi {
			return true
		}
	}
	return false
}

func peerMatches(t *testing.T, peers []networkingv1.NetworkPolicyPeer, ip netip.Addr) bool {
	t.Helper()
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock == nil {
			continue
		}
		if prefixOf(t, p.IPBlock.CIDR).Contains(ip) && !slices.ContainsFunc(p.IPBlock.Except, func(e string) bool { return prefixOf(t, e).Contains(ip) }) {
			return true
		}
	}
	return false
}

func prefixOf(t *testing.T, cidr string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		t.Fatalf("ipBlock %q: %v", cidr, err)
	}
	return p
}

// policies are the NetworkPolicies among objs.
func policies(objs []any) []*networkingv1.NetworkPolicy {
	var pols []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if p, ok := o.(*networkingv1.NetworkPolicy); ok {
			pols = append(pols, p)
		}
	}
	return pols
}

// egressCase is a connection a pod opens.
type egressCase struct {
	what  string
	proto corev1.Protocol
	ip    string
	port  int32
}

func (c egressCase) String() string {
	return fmt.Sprintf("%s (%s %s port %d)", c.what, c.proto, c.ip, c.port)
}

var (
	// storeEgress is what a pod that reads a bucket must reach.
	storeEgress = []egressCase{
		{"DNS, the cluster's Service", corev1.ProtocolUDP, "10.96.0.10", 53},
		{"DNS over TCP, a node-local cache", corev1.ProtocolTCP, "169.254.20.10", 53},
		{"S3 over HTTPS", corev1.ProtocolTCP, "52.216.8.1", 443},
		{"GCS over HTTPS, IPv6", corev1.ProtocolTCP, "2607:f8b0:4004:c1b::cf", 443},
		{"an S3-compatible store in the cluster (AWS_ENDPOINT_URL, MinIO's port)", corev1.ProtocolTCP, "10.244.3.7", 9000},
		{"an S3-compatible store outside it", corev1.ProtocolTCP, "192.0.2.10", 9000},
		{"the GKE metadata server (Workload Identity)", corev1.ProtocolTCP, "169.254.169.254", 80},
		{"the EKS Pod Identity agent", corev1.ProtocolTCP, "169.254.170.23", 80},
	}
	// otherEgress is what a worker has no reason to reach.
	otherEgress = []egressCase{
		{"a database in the cluster", corev1.ProtocolTCP, "10.244.3.8", 5432},
		{"plain HTTP outside", corev1.ProtocolTCP, "52.216.8.1", 80},
		{"the Kubernetes API", corev1.ProtocolTCP, "10.96.0.1", 6443},
	}
)

// TestDeployBucketEgress: with the bucket overlay, the workers reach the
// store (HTTPS, and an S3-compatible endpoint's port, in the cluster or
// outside), DNS and the link-local credential endpoints, and nothing
// else (they dial no one: coordinators dial them); the coordinator's pod,
// which the policies do not select, reaches the store too; the base's
// policies restrict no egress at all. The evaluator is checked first on
// policies whose answer is known.
func TestDeployBucketEgress(t *testing.T) {
	worker := map[string]string{"app.kubernetes.io/name": "stoker", "app.kubernetes.io/component": "worker"}
	tcp := corev1.ProtocolTCP
	known := []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-egress", Namespace: "stoker"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	}}
	https := egressCase{"HTTPS", tcp, "52.216.8.1", 443}
	if egressAllowed(t, known, "stoker", worker, https.proto, netip.MustParseAddr(https.ip), https.port) {
		t.Errorf("evaluator: a deny-all egress policy admits %s", https)
	}
	if !egressAllowed(t, known, "other", worker, https.proto, netip.MustParseAddr(https.ip), https.port) {
		t.Errorf("evaluator: another namespace's policy isolates the pod")
	}

	check := func(name string, pols []*networkingv1.NetworkPolicy, podLabels map[string]string, cases []egressCase, want bool) {
		t.Helper()
		for _, c := range cases {
			if got := egressAllowed(t, pols, "stoker", podLabels, c.proto, netip.MustParseAddr(c.ip), c.port); got != want {
				t.Errorf("%s: %s allowed %v, want %v", name, c, got, want)
			}
		}
	}
	_, base := kustomizeBuild(t, "base")
	check("base, workers", policies(base), worker, slices.Concat(storeEgress, otherEgress), true)

	_, objs := kustomizeBuild(t, bucketOverlay)
	pols := policies(objs)
	pods, _, _ := bucketPods(t)
	for _, p := range pods {
		check(p.where, pols, p.labels, storeEgress, true)
		if p.labels["app.kubernetes.io/component"] == "worker" {
			check(p.where, pols, p.labels, otherEgress, false)
		}
	}
	// The base's ingress policies are kept as they were.
	var names []string
	for _, p := range pols {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if want := []string{"stoker-workers", "stoker-workers-egress", "stoker-workers-monitoring"}; !slices.Equal(names, want) {
		t.Errorf("%s: NetworkPolicies %q, want %q", bucketOverlay, names, want)
	}
}
