package work

import "github.com/prometheus/client_golang/prometheus"

// WorkerMetrics are a worker's metrics; its server registers them.
type WorkerMetrics struct {
	// Leases is stoker_work_leases_total, by outcome.
	Leases *prometheus.CounterVec
	// Jobs is stoker_work_jobs.
	Jobs prometheus.Gauge
}

// NewWorkerMetrics makes a worker's metrics, unregistered.
func NewWorkerMetrics() *WorkerMetrics {
	return &WorkerMetrics{
		Leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stoker_work_leases_total",
			Help: "Leases this server took from coordinators on Work streams, by outcome (done, failed, cancelled).",
		}, []string{"outcome"}),
		Jobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stoker_work_jobs",
			Help: "Jobs this worker holds state for (a queue and a share of its cores), registered by coordinators on Work streams; they end when their coordinator ends them, when no lease names them for a while, or with their stream.",
		}),
	}
}

// Collectors are the metrics, to register.
func (m *WorkerMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Leases, m.Jobs}
}
