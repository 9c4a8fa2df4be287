package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics. Per-dataset series are
// labelled "dataset"; the stall ratio is per stream and is deleted when the
// stream ends.
type metrics struct {
	batchesSent   *prometheus.CounterVec
	samplesSent   *prometheus.CounterVec
	sampleErrors  *prometheus.CounterVec
	streamsActive prometheus.Gauge
	trainerWait   *prometheus.CounterVec
	stallRatio    *prometheus.GaugeVec
	batchSeconds  *prometheus.HistogramVec
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
			Help: "Per stream: trainer wait time over the stream's wall time so far.",
		}, []string{"dataset", "stream"}),
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stoker_batch_seconds",
			Help:    "Seconds to make one batch (decode and transform all its samples).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"dataset"}),
	}
	for _, c := range []prometheus.Collector{m.batchesSent, m.samplesSent, m.sampleErrors, m.streamsActive, m.trainerWait, m.stallRatio, m.batchSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
