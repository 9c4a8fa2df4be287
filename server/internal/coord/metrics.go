package coord

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the coordinators' metrics; the server registers them (with
// its own). Per-job series are labelled "stoker_job" and deleted when the
// job ends.
type Metrics struct {
	StallRatio         *prometheus.GaugeVec     // stoker_input_stall_ratio
	BatchSeconds       *prometheus.HistogramVec // stoker_lease_seconds
	Leases             *prometheus.CounterVec   // stoker_leases_total
	LeaseFailures      *prometheus.CounterVec   // stoker_lease_failures_total
	ResultsDropped     prometheus.Counter       // stoker_results_dropped_total
	Hedges             *prometheus.CounterVec   // stoker_lease_hedges_total
	Window             *prometheus.GaugeVec     // stoker_window
	Buffered           *prometheus.GaugeVec     // stoker_buffered_batches
	PredictedCPU       *prometheus.GaugeVec     // stoker_predicted_cpu_seconds_per_sample
	MeasuredCPU        *prometheus.GaugeVec     // stoker_cpu_seconds_per_sample
	GPUIdle            *prometheus.GaugeVec     // stoker_gpu_idle_ratio
	WorkersRecommended *prometheus.GaugeVec     // stoker_workers_recommended
	PeersRecommended   *prometheus.GaugeVec     // stoker_peers_recommended
	WindowDecisions    *prometheus.CounterVec   // stoker_window_decisions_total
	AffinitySamples    *prometheus.CounterVec   // stoker_affinity_samples_total
	// Where the input stalls (stages.go).
	Images      *prometheus.GaugeVec // stoker_images_per_second
	TrainerStep *prometheus.GaugeVec // stoker_trainer_step_ratio
	SendRatio   *prometheus.GaugeVec // stoker_send_ratio
	CreditWait  *prometheus.GaugeVec // stoker_credit_wait_ratio
	MakingShare *prometheus.GaugeVec // stoker_making_share
	Bottleneck  *prometheus.GaugeVec // stoker_bottleneck
}

// NewMetrics makes the coordinators' metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		StallRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_input_stall_ratio",
			Help: "Per job: trainer wait time over wall time, over the last 3 seconds.",
		}, []string{"dataset", "stoker_job"}),
		BatchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stoker_lease_seconds",
			Help:    "Seconds from leasing a batch to having it made, on whichever maker (queueing included; stoker_sample_stage_seconds splits the local executor's time by stage).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"dataset"}),
		Leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_leases_total",
			Help: "Leases to makers by this server's jobs, by maker (local or a peer's address; a peer's series goes when it leaves the peer set): whole batches, or parts of batches under cache affinity (one per maker among a batch's samples' homes).",
		}, []string{"maker"}),
		LeaseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_lease_failures_total",
			Help: "Leases that failed and were leased again, by maker and reason (timeout, refused, error, mismatch; slow: outrun by its hedge; busy and draining: turned away, no failure; decoder: a peer refused at handshake, once per attempt, because it would make other bytes). A peer's series go when it leaves the peer set.",
		}, []string{"maker", "reason"}),
		ResultsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stoker_results_dropped_total",
			Help: "Batches that arrived for a lease that had moved on or a batch already delivered, and were dropped.",
		}),
		AffinitySamples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_affinity_samples_total",
			Help: "Samples of the batches delivered while leases follow cache affinity (--cache-affinity), by where they were made: home (at the maker their rendezvous hash names among those the job can use, where their cache is) or away (elsewhere: that maker was backing off after a failure, or the batch was made whole by one maker: a hedge, a batch with a failed sample, or a pool with one maker able to take work).",
		}, []string{"made"}),
		Hedges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_lease_hedges_total",
			Help: "Leases that took much longer than the job's recent ones and were also given to another maker, by outcome: won (the hedge made the batch first; the first lease was cancelled and its maker counted slow), lost (the first lease made it first; the hedge was cancelled), failed.",
		}, []string{"outcome"}),
		Window: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_window",
			Help: "Per job: leases the window controller lets the job have in flight.",
		}, []string{"stoker_job"}),
		Buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_buffered_batches",
			Help: "Per job: batches made and waiting to be sent to the trainer.",
		}, []string{"stoker_job"}),
		PredictedCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_predicted_cpu_seconds_per_sample",
			Help: "Per job: the cost model's CPU seconds per sample of its transform, the mean (--max-sample-cpu bounds the worst sample, stoker status shows both).",
		}, []string{"stoker_job"}),
		MeasuredCPU: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_cpu_seconds_per_sample",
			Help: "Per job: CPU seconds per sample its samples took on this server's executor (a thread CPU clock around each sample), since it opened; absent before one is made here.",
		}, []string{"stoker_job"}),
		GPUIdle: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_gpu_idle_ratio",
			Help: "Per job: the share of the last few seconds the trainer's GPUs were idle (NVML); absent without a GPU monitor.",
		}, []string{"stoker_job"}),
		WorkersRecommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_workers_recommended",
			Help: "Per job: makers (the local executor and each peer count one) needed to bring the input stall under --stall-target, from the trainer's measured demand and the makers' measured rates.",
		}, []string{"stoker_job"}),
		PeersRecommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_peers_recommended",
			Help: "Per job: the workers it needs from a pool, besides its coordinator's own executor: stoker_workers_recommended less one where the coordinator decodes (--workers > 0), as is where it does not (--workers 0). What an autoscaler of the workers follows.",
		}, []string{"stoker_job"}),
		WindowDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_window_decisions_total",
			Help: "Window controller decisions that changed a job's window, by decision (widen, narrow).",
		}, []string{"decision"}),
		Images: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_images_per_second",
			Help: "Per job: samples delivered to the trainer per second, over the last 3 seconds.",
		}, []string{"stoker_job"}),
		TrainerStep: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_trainer_step_ratio",
			Help: "Per job: the trainer's step (from taking a batch to asking for the next) over wall time, over the last 3 seconds; with stoker_input_stall_ratio (its wait) it adds up to about 1.",
		}, []string{"stoker_job"}),
		SendRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_send_ratio",
			Help: "Per job: the share of the last 3 seconds the stream spent sending batches to the trainer (headers and chunks, or a copy into a ring slot); near 1, delivery is the limit.",
		}, []string{"stoker_job"}),
		CreditWait: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_credit_wait_ratio",
			Help: "Per job: the share of the last 3 seconds a made batch waited for the trainer's credit (the makers were ahead of the trainer).",
		}, []string{"stoker_job"}),
		MakingShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_making_share",
			Help: "Per job: of the time its batches made in the last 3 seconds spent from lease to made (summed over batches), the share in each stage: queue (waiting for a local core), read, decode, transform (local executor), peer (a peer making it), network (a peer's lease time not spent making). Adds up to 1.",
		}, []string{"stoker_job", "stage"}),
		Bottleneck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_bottleneck",
			Help: "Per job: 1 for what limits it now (stage: trainer, read, decode, transform, peer, network, delivery, making, idle, starting), as stoker status's verdict says it; one series per job.",
		}, []string{"stoker_job", "stage"}),
	}
}

// Collectors are the metrics, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.StallRatio, m.BatchSeconds, m.Leases, m.LeaseFailures, m.ResultsDropped, m.Hedges,
		m.Window, m.Buffered, m.PredictedCPU, m.MeasuredCPU, m.GPUIdle, m.WorkersRecommended, m.PeersRecommended, m.WindowDecisions, m.AffinitySamples,
		m.Images, m.TrainerStep, m.SendRatio, m.CreditWait, m.MakingShare, m.Bottleneck}
}

// ForgetMaker deletes the series of a maker that is gone (a peer that left
// the peer set).
func (m *Metrics) ForgetMaker(name string) {
	m.Leases.DeleteLabelValues(name)
	m.LeaseFailures.DeletePartialMatch(prometheus.Labels{"maker": name})
}
