package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics. Per-dataset series are
// labelled "dataset"; per-job series (one per Feed stream) are labelled
// "stoker_job" and deleted when the stream ends. The label is not "job":
// Prometheus gives every scraped series a "job" label of its own (the
// scrape job's name) and renames a conflicting one to "exported_job".
type metrics struct {
	batchesSent    *prometheus.CounterVec
	samplesSent    *prometheus.CounterVec
	sampleErrors   *prometheus.CounterVec
	streamsActive  prometheus.Gauge
	trainerWait    *prometheus.CounterVec
	stallRatio     *prometheus.GaugeVec
	batchSeconds   *prometheus.HistogramVec
	leases         *prometheus.CounterVec
	leaseFailures  *prometheus.CounterVec
	resultsDropped prometheus.Counter
	peersReady     prometheus.GaugeFunc // counted when scraped: registered by New, once the server can count
	workLeases     *prometheus.CounterVec
	workJobs       prometheus.Gauge
	refusals       *prometheus.CounterVec

	window             *prometheus.GaugeVec
	buffered           *prometheus.GaugeVec
	gpuIdle            *prometheus.GaugeVec
	workersRecommended *prometheus.GaugeVec
	peersRecommended   *prometheus.GaugeVec
	windowDecisions    *prometheus.CounterVec
	sendSeconds        prometheus.Histogram
	sampleStages       *prometheus.HistogramVec
	shmBatches         *prometheus.CounterVec
	shmSlotCopies      *prometheus.CounterVec
	shmRings           prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		batchesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_batches_sent_total",
			Help: "Batches sent to trainers.",
		}, []string{"dataset"}),
		samplesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_samples_sent_total",
			Help: "Samples sent to trainers (padded copies included).",
		}, []string{"dataset"}),
		sampleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_sample_errors_total",
			Help: "Samples that could not be made and were padded or dropped by policy.",
		}, []string{"dataset"}),
		streamsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stoker_streams_active",
			Help: "Open Feed streams.",
		}),
		trainerWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_trainer_wait_seconds_total",
			Help: "Seconds trainers reported blocking on their next batch.",
		}, []string{"dataset"}),
		stallRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stoker_input_stall_ratio",
			Help: "Per job: trainer wait time over wall time, over the last 3 seconds.",
		}, []string{"dataset", "stoker_job"}),
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stoker_lease_seconds",
			Help:    "Seconds from leasing a batch to having it made, on whichever maker (queueing included; stoker_sample_stage_seconds splits the local executor's time by stage).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"dataset"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_leases_total",
			Help: "Batches leased to makers by this server's jobs, by maker (local or a peer's address; a peer's series goes when it leaves the peer set).",
		}, []string{"maker"}),
		leaseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_lease_failures_total",
			Help: "Leases that failed and were leased again, by maker and reason (timeout, refused, error; busy and draining: turned away, no failure; decoder: a peer refused at handshake, once per attempt, because it would make other bytes). A peer's series go when it leaves the peer set.",
		}, []string{"maker", "reason"}),
		resultsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stoker_results_dropped_total",
			Help: "Batches that arrived for a lease that had moved on or a batch already delivered, and were dropped.",
		}),
		workLeases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_work_leases_total",
			Help: "Leases this server took from coordinators on Work streams, by outcome (done, failed, cancelled).",
		}, []string{"outcome"}),
		workJobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stoker_work_jobs",
			Help: "Jobs this worker holds state for (a queue and a share of its cores), registered by coordinators on Work streams; they end when their coordinator ends them, when no lease names them for a while, or with their stream.",
		}),
	}
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_refusals_total",
		Help: "Calls and streams refused, by the policy that refused them (unauthenticated, max_streams, memory_budget, idle_timeout, first_message_timeout, ...).",
	}, []string{"policy"})
	m.window = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stoker_window",
		Help: "Per job: leases the window controller lets the job have in flight.",
	}, []string{"stoker_job"})
	m.buffered = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stoker_buffered_batches",
		Help: "Per job: batches made and waiting to be sent to the trainer.",
	}, []string{"stoker_job"})
	m.gpuIdle = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stoker_gpu_idle_ratio",
		Help: "Per job: the share of the last few seconds the trainer's GPUs were idle (NVML); absent without a GPU monitor.",
	}, []string{"stoker_job"})
	m.workersRecommended = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stoker_workers_recommended",
		Help: "Per job: makers (the local executor and each peer count one) needed to bring the input stall under --stall-target, from the trainer's measured demand and the makers' measured rates.",
	}, []string{"stoker_job"})
	m.peersRecommended = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stoker_peers_recommended",
		Help: "Per job: the workers it needs from a pool, besides its coordinator's own executor: stoker_workers_recommended less one where the coordinator decodes (--workers > 0), as is where it does not (--workers 0). What an autoscaler of the workers follows.",
	}, []string{"stoker_job"})
	m.windowDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_window_decisions_total",
		Help: "Window controller decisions that changed a job's window, by decision (widen, narrow).",
	}, []string{"decision"})
	m.sendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "stoker_send_seconds",
		Help:    "Seconds to send one batch to a trainer (header and chunks; a trainer that reads slowly makes it longer).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	m.sampleStages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stoker_sample_stage_seconds",
		Help:    "Seconds one sample spent in each stage on the local executor: queue (waiting for a worker), read (its file), decode (decode and transform).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
	}, []string{"stage"})
	m.shmBatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_shm_batches_total",
		Help: "Batches sent to same-host trainers with a shared-memory ring: via slot (pixels in the ring) or chunks (every slot held by the trainer).",
	}, []string{"dataset", "via"})
	m.shmSlotCopies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_shm_slot_copies_total",
		Help: "Batches sent in a ring slot that were made outside the ring and copied into it (no slot was free when they were leased); the others were made in their slot.",
	}, []string{"dataset"})
	m.shmRings = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stoker_shm_ring_bytes",
		Help: "Bytes of shared-memory rings mapped for open Feed streams.",
	})
	for _, c := range []prometheus.Collector{m.window, m.buffered, m.gpuIdle, m.workersRecommended, m.peersRecommended, m.windowDecisions, m.sendSeconds, m.sampleStages, m.shmBatches, m.shmSlotCopies, m.shmRings} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{m.batchesSent, m.samplesSent, m.sampleErrors, m.streamsActive, m.trainerWait, m.stallRatio, m.batchSeconds,
		m.leases, m.leaseFailures, m.resultsDropped, m.workLeases, m.workJobs, m.refusals} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// registerPeersReady registers stoker_peers_ready, whose value is count()
// at each scrape. A gauge set whenever a peer's state changed was
// set from each peer's goroutine, and two peers ready at once could leave
// it at the count of the one that counted first: a coordinator with three
// peers ready reported two until a lease moved it.
func (m *metrics) registerPeersReady(reg prometheus.Registerer, count func() int) error {
	m.peersReady = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stoker_peers_ready",
		Help: "Peers connected and taking leases (a peer quarantined for a batch that did not match is not counted).",
	}, func() float64 { return float64(count()) })
	return reg.Register(m.peersReady)
}

// forgetMaker deletes the series of a maker that is gone (a peer that left
// the peer set).
func (m *metrics) forgetMaker(name string) {
	m.leases.DeleteLabelValues(name)
	m.leaseFailures.DeletePartialMatch(prometheus.Labels{"maker": name})
}
