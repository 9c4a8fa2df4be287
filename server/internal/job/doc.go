// Package job is a validated JobSpec: what every batch of every epoch of a
// job is made from (its dataset or mix, transform, fields, shuffle and
// plan), checked once against the server's datasets and limits by New and
// never written after. A coordinator runs it (it is a coord.Job); the
// server's makers, its verifier and its streams read it.
//
// What goes in is the wire's JobSpec and what the stream says of the job
// (Origin); what comes out is the JobInfo and BatchHeader of the wire, and
// the epoch plan (server/internal/plan). Its errors are gRPC statuses
// naming what was asked and what is allowed, but for a transform the
// pipeline refuses, whose error the server maps by its error table.
package job
