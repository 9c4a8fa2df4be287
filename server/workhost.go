package server

import (
	"errors"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/source"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/makers"
)

// Work implements stokerv1.WorkServiceServer: another server's coordinator
// leasing batches to this one, served by work.Worker. The stream is bounded
// like a Feed stream, apart from them: a per-client and a total cap.
func (s *Server) Work(stream stokerv1.WorkService_WorkServer) error {
	switch {
	case s.exec == nil:
		return status.Error(codes.FailedPrecondition, "this server makes no batches (--workers 0): it only coordinates")
	case !s.cfg.acceptsWork():
		s.refusals.refuse("accept_work", "Work stream refused: --accept-work=false", "client", rpc.ClientHost(stream.Context()))
		return status.Error(codes.FailedPrecondition, "this server makes no batches for other servers (--accept-work=false, the default for a server with --peers)")
	case s.isDraining():
		return status.Error(codes.Unavailable, work.DrainingMessage)
	}
	release, err := s.acquireStream(stream.Context(), false)
	if err != nil {
		return err
	}
	defer release()
	mem := s.workMem.open(rpc.LimitID(stream.Context()))
	defer mem.close()
	return s.worker.Serve(stream, "work-"+strconv.FormatUint(s.streamID.Add(1), 10), mem)
}

// newWorker is the server's side of Work streams, over its executor.
func (s *Server) newWorker() *work.Worker {
	return work.NewWorker(work.WorkerConfig{
		Host: workHost{s}, Metrics: s.m.work, Log: s.log,
		Executors: s.exec.Workers(), Identity: s.cfg.decoderIdentity(), MaxChunkBytes: MaxChunkBytes,
		FirstMessageTimeout: s.cfg.FirstMessageTimeout, IdleTimeout: s.cfg.WorkIdleTimeout, JobIdle: s.cfg.WorkJobIdle,
		Draining: s.draining,
	})
}

// workHost is what the worker needs of the server: its jobs, its refusals
// and its error table.
type workHost struct{ s *Server }

// Open validates a registered job and makes its handle on the executor.
// A job one of whose samples needs more worker scratch than the budget
// could ever give it is refused here, as a Feed stream's is when it
// opens (checkScratch), not left to fail its samples one by one.
func (h workHost) Open(spec *stokerv1.JobSpec, name, client string) (work.JobQueue, error) {
	j, err := h.s.newJob(spec, job.Origin{ID: name})
	if err != nil {
		return nil, err
	}
	if err := h.s.checkScratch(j); err != nil {
		h.s.refusals.refuse("memory_budget", "work job refused: memory budget", "job", name, "err", err)
		return nil, err
	}
	return makers.OpenExecJob(h.s.exec, h.s.shares, h.s.cfg.Making, j, true, client), nil
}

func (h workHost) Refuse(policy, msg string, attrs ...any) {
	h.s.refusals.refuse(policy, msg, attrs...)
}

// Status is the status a lease failed with, sent to its coordinator.
// UNAVAILABLE there means this worker drains (its executor closed: the
// coordinator sends it no more leases on the stream), so a lease that
// failed by its store's fault, which toStatus calls UNAVAILABLE for a
// trainer, goes as UNKNOWN (the store's error, message kept): a lease's
// own failure, tried again and counted, the peer kept.
func (h workHost) Status(err error) error {
	if source.IsStoreFault(err) && !errors.Is(err, pipeline.ErrClosed) {
		code := codes.Unknown
		if errors.Is(err, source.ErrDenied) {
			code = codes.PermissionDenied
		}
		return status.Error(code, err.Error())
	}
	return toStatus(err)
}
