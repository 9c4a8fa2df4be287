package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// metrics are the server's Prometheus metrics. Per-dataset series are
// labelled "dataset"; per-job series (one per Feed stream) are labelled
// "stoker_job" and deleted when the stream ends. The label is not "job":
// Prometheus gives every scraped series a "job" label of its own (the
// scrape job's name) and renames a conflicting one to "exported_job".
type metrics struct {
	// coord are the coordinators' (leases, window, advice), work the
	// worker's (Work streams' leases and jobs).
	coord *coord.Metrics
	work  *work.WorkerMetrics

	batchesSent   *prometheus.CounterVec
	samplesSent   *prometheus.CounterVec
	sampleErrors  *prometheus.CounterVec
	streamsActive prometheus.Gauge
	trainerWait   *prometheus.CounterVec
	peersReady    prometheus.GaugeFunc // counted when scraped: registered by New, once the server can count
	refusals      *prometheus.CounterVec

	sendSeconds   prometheus.Histogram
	sampleStages  *prometheus.HistogramVec
	shmBatches    *prometheus.CounterVec
	shmSlotCopies *prometheus.CounterVec
	shmTargets    *prometheus.CounterVec
	shmRings      prometheus.Gauge
	// workMemory is stoker_work_memory_bytes, executorSamples
	// stoker_executor_samples_total.
	workMemory      prometheus.Gauge
	executorSamples *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		coord: coord.NewMetrics(),
		work:  work.NewWorkerMetrics(),
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
	}
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_refusals_total",
		Help: "Calls and streams refused, by the policy that refused them (unauthenticated, max_streams, memory_budget, idle_timeout, first_message_timeout, ...).",
	}, []string{"policy"})
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
	m.shmTargets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_shm_targets_total",
		Help: "Batches with targets sent in a ring slot to a trainer that reads targets there: via slot (their arrays after the pixels) or header (they did not fit in the slot's room).",
	}, []string{"dataset", "via"})
	m.shmRings = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stoker_shm_ring_bytes",
		Help: "Bytes of shared-memory rings mapped for open Feed streams.",
	})
	m.workMemory = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stoker_work_memory_bytes",
		Help: "Bytes of the memory budget that Work streams make this server keep: their jobs' state, their leases' batches and the buffers kept for their next leases (each client within --max-work-memory-per-client).",
	})
	m.executorSamples = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stoker_executor_samples_total",
		Help: "Samples the local executor made under the stall schedule, by the kind of stream they were for: feed (this server's own trainers' jobs) or work (other servers' leases); --work-share sets how the cores are split while both want them.",
	}, []string{"stream"})
	cs := []prometheus.Collector{m.workMemory, m.executorSamples, m.sendSeconds, m.sampleStages, m.shmBatches, m.shmSlotCopies, m.shmTargets, m.shmRings,
		m.batchesSent, m.samplesSent, m.sampleErrors, m.streamsActive, m.trainerWait, m.refusals}
	cs = append(cs, m.coord.Collectors()...)
	for _, c := range append(cs, m.work.Collectors()...) {
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
