package coord

// What a coordinator says of its job, in its own types: the server puts
// them on the wire (JobInfo, EpochEnd, JobStatus), so that the coordinator
// links neither gRPC nor the protocol's messages. Each mirrors the message
// of the same name, whose comments in stoker.proto say what each figure
// is; the server's mapping is tested to fill every field of the message.

// EpochStart is an epoch beginning: the server sends its JobInfo, made
// from the epoch and its plan.
type EpochStart struct {
	Epoch uint64
	Plan  Plan
}

// EpochEnd counts what an epoch delivered (EpochEnd on the wire).
type EpochEnd struct {
	Epoch        uint64
	Batches      uint64
	Samples      uint64
	SampleErrors uint64
}

// Status is a job's status as its controller last published it
// (JobStatus on the wire).
type Status struct {
	ID, Dataset     string
	Rank, WorldSize int
	Epoch           uint64
	ImagesPerSecond float64
	BytesPerSecond  float64
	InputStallRatio float64
	// GPUIdleRatio is -1 when no GPU monitor is there.
	GPUIdleRatio                 float64
	Window, WindowMin, WindowMax int
	Buffered                     int
	Makers                       []MakerStatus
	WorkersRecommended           float64 // NaN before the advisor has a figure
	Advice                       string
	StarvationSignal             string
	Starvation                   float64
	Shuffle                      string
	TrainerStepRatio             float64
	// Making is nil before a batch is made in the window.
	Making          *MakingShares
	SendRatio       float64
	CreditWaitRatio float64
	Bottleneck      string
	Verdict         string
	// The transform's CPU per sample, in seconds: the cost model's mean
	// and worst, and as measured on this server's executor (0: none
	// yet). Zero for a job that does not say (CPUCoster).
	PredictedCPU, WorstCPU, MeasuredCPU float64
}

// CPUCoster is a Job that knows what its samples cost in CPU: the cost
// model's mean and worst per sample, and what this server measured (0
// before any sample is made here), in seconds.
type CPUCoster interface {
	CPUPerSample() (predicted, worst, measured float64)
}

// MakingShares is where the time of making the job's batches went
// (MakingShares on the wire): shares of the making time, adding up to 1.
type MakingShares struct {
	Queue, Read, Decode, Transform float64
	Peer, Network                  float64
	SecondsPerBatch                float64
	Batches                        int
}

// MakerStatus is one maker as the job sees it (MakerStatus on the wire).
type MakerStatus struct {
	Name                 string
	BatchesPerSecond     float64
	InFlight             int
	Ready                bool
	BusyBatchesPerSecond float64
	BusyRatio            float64
	Unavailable          string
	BackoffSeconds       float64
	FailuresInARow       int
	LeaseSeconds         float64
	NetworkShare         float64 // NaN when unknown
}
