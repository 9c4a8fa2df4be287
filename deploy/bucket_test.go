package deploy_test

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

const (
	bucketOverlay = "overlays/bucket"
	bucketJob     = "examples/trainer-job-bucket.yaml"
	// bucketIdentity names both the ServiceAccount and the Secret the
	// bucket's readers take their credentials from.
	bucketIdentity = "stoker-bucket"
)

// identityAnnotations are the ServiceAccount annotations of the platforms'
// workload identity: EKS (IRSA), GKE, AKS (Entra Workload ID, with the pod
// label azureUse).
var identityAnnotations = []string{"eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account", "azure.workload.identity/client-id"}

const azureUse = "azure.workload.identity/use"

// bucketPod is a pod template that reads the bucket: where it is, its
// metadata and spec.
type bucketPod struct {
	where  string
	labels map[string]string
	annots map[string]string
	spec   *corev1.PodSpec
}

// bucketPods are the pod templates of the bucket overlay's build (the
// workers) and of the bucket example Job (its coordinator), with the
// overlay's ServiceAccounts by name.
func bucketPods(t *testing.T) ([]bucketPod, map[string]*corev1.ServiceAccount, []any) {
	t.Helper()
	_, objs := kustomizeBuild(t, bucketOverlay)
	sas := map[string]*corev1.ServiceAccount{}
	for _, o := range objs {
		if sa, ok := o.(*corev1.ServiceAccount); ok {
			sas[sa.Name] = sa
		}
	}
	pods := slices.Concat(workloadPods(bucketOverlay, objs), workloadPods(bucketJob, manifests(t)[bucketJob]))
	if len(pods) != 2 {
		t.Fatalf("%d pod templates in %s and %s, want the workers' and the Job's", len(pods), bucketOverlay, bucketJob)
	}
	return pods, sas, objs
}

// workloadPods are the pod templates of the workloads in objs.
func workloadPods(where string, objs []any) []bucketPod {
	var pods []bucketPod
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			pods = append(pods, bucketPod{where + ": Deployment " + o.Name, o.Spec.Template.Labels, o.Spec.Template.Annotations, &o.Spec.Template.Spec})
		case *batchv1.Job:
			pods = append(pods, bucketPod{where + ": Job " + o.Name, o.Spec.Template.Labels, o.Spec.Template.Annotations, &o.Spec.Template.Spec})
		}
	}
	return pods
}

// datasetFlags are the values of a container's --dataset flags.
func datasetFlags(c corev1.Container) []string {
	var ds []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--dataset="); ok {
			ds = append(ds, v)
		}
	}
	return ds
}

// TestDeployBucketNoVolume: neither the workers of the bucket overlay nor
// the bucket Job's coordinator mount their data: no claim (so no
// ReadOnlyMany volume to provide), every volume a Secret's (or an
// emptyDir, as a byte cache's would be), and every stoker container's
// --dataset a bucket URL (s3://, gs://, azblob:// with a bucket), the same
// for workers and coordinator (the same objects: the same fingerprint).
func TestDeployBucketNoVolume(t *testing.T) {
	pods, _, _ := bucketPods(t)
	var datasets []string
	for _, p := range pods {
		for _, v := range p.spec.Volumes {
			if v.Secret == nil && v.EmptyDir == nil {
				t.Errorf("%s: volume %s is neither a Secret's nor an emptyDir (a cache's): the dataset must come from the bucket alone", p.where, v.Name)
			}
		}
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/data" || m.Name == "data" {
					t.Errorf("%s: container %s still mounts %s at %s", p.where, c.Name, m.Name, m.MountPath)
				}
			}
		}
	}
	n := 0
	for _, sc := range allStokerContainers(t) {
		if !strings.HasPrefix(sc.where, bucketOverlay) && !strings.HasPrefix(sc.where, bucketJob) {
			continue
		}
		n++
		ds := datasetFlags(sc.c)
		if len(ds) == 0 {
			t.Errorf("%s: no --dataset", sc.where)
		}
		for _, d := range ds {
			_, loc, _ := strings.Cut(d, "=")
			u, err := url.Parse(loc)
			if err != nil || !slices.Contains([]string{"s3", "gs", "azblob"}, u.Scheme) || u.Host == "" || u.RawQuery != "" {
				t.Errorf("%s: --dataset=%s: want NAME=s3://BUCKET/PREFIX (or gs://, azblob://)", sc.where, d)
			}
		}
		datasets = append(datasets, strings.Join(ds, " "))
	}
	if n != 2 {
		t.Fatalf("%d stoker containers in %s and %s, want the workers and the coordinator", n, bucketOverlay, bucketJob)
	}
	if slices.Sort(datasets); len(slices.Compact(datasets)) != 1 {
		t.Errorf("--dataset differs between the workers and the coordinator: %q", datasets)
	}
}

// TestDeployBucketCache: every stoker container of the bucket overlay and
// of the bucket Job keeps the byte cache on disk: --cache-dir is where an
// emptyDir volume with a sizeLimit is mounted writable (the root file
// system is read-only), and --cache-budget is a positive byte count under
// that sizeLimit (the kubelet evicts a pod whose emptyDir passes it) with
// room to spare for the cache's index and partly written ranges.
func TestDeployBucketCache(t *testing.T) {
	n := 0
	for _, sc := range allStokerContainers(t) {
		if !strings.HasPrefix(sc.where, bucketOverlay) && !strings.HasPrefix(sc.where, bucketJob) {
			continue
		}
		n++
		dir, ok := sc.flags["cache-dir"]
		if !ok {
			t.Errorf("%s: no --cache-dir: every epoch would read the whole dataset from the bucket again", sc.where)
			continue
		}
		budget, err := strconv.ParseInt(sc.flags["cache-budget"], 10, 64)
		if err != nil || budget <= 0 {
			t.Errorf("%s: --cache-budget=%q, want a positive byte count (serve needs one with --cache-dir)", sc.where, sc.flags["cache-budget"])
			continue
		}
		var mount *corev1.VolumeMount
		for i, m := range sc.c.VolumeMounts {
			if m.MountPath == dir {
				mount = &sc.c.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Errorf("%s: nothing mounted at --cache-dir=%s: the root file system is read-only", sc.where, dir)
			continue
		}
		if mount.ReadOnly {
			t.Errorf("%s: the cache volume %s is mounted read-only", sc.where, mount.Name)
		}
		var vol *corev1.Volume
		for i, v := range sc.pod.Volumes {
			if v.Name == mount.Name {
				vol = &sc.pod.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			t.Errorf("%s: mounts volume %s, which the pod lacks", sc.where, mount.Name)
		case vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil:
			t.Errorf("%s: the cache volume %s is not an emptyDir with a sizeLimit", sc.where, vol.Name)
		case budget > vol.EmptyDir.SizeLimit.Value()*9/10:
			t.Errorf("%s: --cache-budget=%d is not under 90%% of the cache volume's sizeLimit %s (%d bytes): the kubelet evicts a pod past it",
				sc.where, budget, vol.EmptyDir.SizeLimit, vol.EmptyDir.SizeLimit.Value())
		}
	}
	if n != 2 {
		t.Fatalf("%d stoker containers in %s and %s, want the workers and the coordinator", n, bucketOverlay, bucketJob)
	}
}

// credentialName is an environment variable that holds a secret by its
// name: its value must come from a Secret, never the manifest.
var credentialName = regexp.MustCompile(`SECRET|KEY|TOKEN|PASSWORD|CONNECTION_STRING|CREDENTIAL`)

// accessKeyID is what an AWS access key ID looks like.
var accessKeyID = regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`)

// TestDeployBucketCredentials: each pod that reads the bucket takes its
// credentials from the platform's workload identity (its ServiceAccount,
// in the overlay, with the annotations of EKS, GKE and AKS, and the pod
// label AKS's webhook looks for) or from the Secret stoker-bucket (envFrom
// on the stoker container only, optional: absent under workload identity);
// a pod that also runs a trainer keeps EKS's and AKS's injected identity
// from it. No manifest under deploy/ carries a credential: no Secret
// objects in the build, no literal value for a variable named like one,
// nothing that looks like an access key.
func TestDeployBucketCredentials(t *testing.T) {
	pods, sas, objs := bucketPods(t)
	for _, p := range pods {
		sa := sas[p.spec.ServiceAccountName]
		if sa == nil {
			t.Errorf("%s: serviceAccountName %q, want the overlay's %s", p.where, p.spec.ServiceAccountName, bucketIdentity)
		} else {
			for _, a := range identityAnnotations {
				if sa.Annotations[a] == "" {
					t.Errorf("ServiceAccount %s: no annotation %s", sa.Name, a)
				}
			}
		}
		if p.labels[azureUse] != "true" {
			t.Errorf("%s: no pod label %s: \"true\" (AKS's webhook injects nothing without it)", p.where, azureUse)
		}
		var others []string
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			stoker := c.Image == "stoker" || strings.Contains(c.Image, "/stoker:")
			var fromSecret bool
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil && e.SecretRef.Name == bucketIdentity {
					fromSecret = true
					if e.SecretRef.Optional == nil || !*e.SecretRef.Optional {
						t.Errorf("%s: container %s: envFrom Secret %s is not optional: under workload identity, with no Secret, the pod would not start", p.where, c.Name, bucketIdentity)
					}
				}
			}
			switch {
			case stoker && !fromSecret:
				t.Errorf("%s: container %s: no envFrom the Secret %s", p.where, c.Name, bucketIdentity)
			case !stoker && fromSecret:
				t.Errorf("%s: container %s is no stoker but gets the bucket's credentials", p.where, c.Name)
			case !stoker:
				others = append(others, c.Name)
			}
		}
		if want := strings.Join(others, ","); p.annots["eks.amazonaws.com/skip-containers"] != want ||
			p.annots["azure.workload.identity/skip-containers"] != strings.Join(others, ";") {
			t.Errorf("%s: skip-containers annotations %q, %q; want the containers other than stoker's, %q",
				p.where, p.annots["eks.amazonaws.com/skip-containers"], p.annots["azure.workload.identity/skip-containers"], want)
		}
	}
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			t.Errorf("%s builds Secret %s: credentials are created in the cluster, never kept in deploy/", bucketOverlay, s.Name)
		}
	}
	every := workloadPods(bucketOverlay, objs)
	for path, objs := range manifests(t) {
		every = append(every, workloadPods(path, objs)...)
		for _, o := range objs {
			if _, ok := o.(*corev1.Secret); ok {
				t.Errorf("%s: a Secret object: credentials are created in the cluster, never kept in deploy/", path)
			}
		}
	}
	for _, p := range every {
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			for _, e := range c.Env {
				if credentialName.MatchString(e.Name) && e.Value != "" {
					t.Errorf("%s: container %s: %s has a literal value: take it from a Secret", p.where, c.Name, e.Name)
				}
			}
		}
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".sbatch"}, filepath.Ext(path)) {
			return err
		}
		data, err := os.ReadFile(path)
		if m := accessKeyID.Find(data); m != nil {
			t.Errorf("%s: %q looks like an AWS access key ID", path, m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeployBucketJobIsTheExample: the bucket Job is the example Job but
// for where the data come from (the URL, no data volume), the byte cache
// on disk (--cache-dir, --cache-budget, the cache volume) and the
// credentials (ServiceAccount, Secret, the AKS label, the annotations that
// keep the identity from the trainer): what is said of the one holds for
// the other.
func TestDeployBucketJobIsTheExample(t *testing.T) {
	ms := manifests(t)
	plain, bucket := ms["examples/trainer-job.yaml"][0].(*batchv1.Job).DeepCopy(), ms[bucketJob][0].(*batchv1.Job).DeepCopy()
	b := &bucket.Spec.Template
	delete(b.Labels, azureUse)
	delete(b.Annotations, "eks.amazonaws.com/skip-containers")
	delete(b.Annotations, "azure.workload.identity/skip-containers")
	b.Spec.ServiceAccountName = ""
	b.Spec.Volumes = slices.DeleteFunc(b.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "cache" })
	p := &plain.Spec.Template
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" })
	for _, spec := range []*corev1.PodSpec{&p.Spec, &b.Spec} {
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				c := &cs[i]
				c.EnvFrom = slices.DeleteFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
					return e.SecretRef != nil && e.SecretRef.Name == bucketIdentity
				})
				if len(c.EnvFrom) == 0 {
					c.EnvFrom = nil
				}
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" || m.Name == "cache" })
				c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
					return strings.HasPrefix(a, "--cache-dir=") || strings.HasPrefix(a, "--cache-budget=")
				})
				for j, a := range c.Args {
					if strings.HasPrefix(a, "--dataset=") {
						c.Args[j] = "--dataset=..."
					}
				}
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(plain, bucket) {
		py, _ := yaml.Marshal(plain)
		by, _ := yaml.Marshal(bucket)
		t.Errorf("%s differs from examples/trainer-job.yaml in more than the data and the credentials:\n%s", bucketJob, diffLines(string(py), string(by)))
	}
}
